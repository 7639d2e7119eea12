package modules_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// failSecondDelete is a store whose second deletion of a record, once
// armed, fails: a removal stopped half way (killed, the disk failing).
type failSecondDelete struct {
	harness.Store
	armed   atomic.Bool
	deletes atomic.Int32
}

func (s *failSecondDelete) DeleteMeta(key string) error {
	if s.armed.Load() && s.deletes.Add(1) == 2 {
		return errors.New("disk failed")
	}
	return s.Store.DeleteMeta(key)
}

// A module version's removal stopped between its two records leaves no
// zip record whose version is gone (it would name the zip for ever, and
// be read against a version fetched again): the zip's record goes first,
// and a version left whole makes its zip again when asked.
func TestModuleRemovalStoppedLeavesNoZipRecordAlone(t *testing.T) {
	t.Parallel()
	needGit(t)
	var store *failSecondDelete
	h := harness.New(t, harness.Options{Wrap: func(s harness.Store) harness.Store {
		store = &failSecondDelete{Store: s}
		return store
	}})
	o := h.Origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# vpc\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	if _, _, err := readModuleZip(t, h, "1.0.0"); err != nil {
		t.Fatal(err)
	}
	store.armed.Store(true)
	if err := h.Engine.Inventory().RemoveVersion("module", harness.Module.String(), "1.0.0"); err == nil {
		t.Fatal("the removal whose second deletion failed said nothing")
	}
	v := versions.MustParseVersion("1.0.0")
	var zip records.ModuleZipRecord
	_, zerr := h.Store.GetMeta(records.ModuleZipKey(harness.Module, v), &zip)
	var mod records.ModuleRecord
	_, merr := h.Store.GetMeta(records.ModuleRecordKey(harness.Module, v), &mod)
	if zerr == nil && merr != nil {
		t.Errorf("the zip record outlived its version's record (%v)", merr)
	}
}
