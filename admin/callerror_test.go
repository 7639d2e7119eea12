package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
)

// TestCallErrorShowsNoTerminalControls: an admin answer's error (which
// may quote what the serve read of a stranger: a record, an origin's
// answer) reaches the command that prints it with its control and format
// characters escaped, line by line, its line breaks kept (a reload's
// error names each file on a line of its own): every command that asks
// a running serve prints it through CallError, none escaping it itself.
func TestCallErrorShowsNoTerminalControls(t *testing.T) {
	body, err := json.Marshal(ErrorBody{Error: "configuration file a.hcl put in force\ntitle\x1b]0;owned\x07 bad\u202eft.niam \u009b2J"})
	if err != nil {
		t.Fatal(err)
	}
	msg := DecodeError(422, body).Error()
	for _, want := range []string{"configuration file a.hcl put in force\n", `title\x1b]0;owned\x07`, `bad\u202eft.niam`, `\x9b2J`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q lacks %q", msg, want)
		}
	}
	for _, r := range msg {
		if r != '\n' && unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			t.Errorf("the error holds %U as it came: %q", r, msg)
		}
	}
}
