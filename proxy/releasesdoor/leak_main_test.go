package releasesdoor_test

import (
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
