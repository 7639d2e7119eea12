package settings

import (
	"strings"
	"testing"
)

// TestBadValueSaysWhatIsWanted gives a value a setting cannot take, of
// each kind, on the command line, in its TFMIRROR_ variable and in the
// configuration file: each refusal quotes the value once and says what
// the setting wants, where a whole number and a switch said only "parse
// error" and a duration quoted the value twice.
func TestBadValueSaysWhatIsWanted(t *testing.T) {
	for _, tc := range []struct{ setting, value, want string }{
		{"origin-retries", "x", "want a whole number"},
		{"origin-retries", "99999999999999999999", "want a whole number"},
		{"offline", "maybe", "want true or false"},
		{"origin-timeout", "bogus", "want a duration"},
		{"evict-unused-after", "3w", "want a duration"},
		{"evict-unused-after", "9999999d", "want a duration"},
		{"cache-max-bytes", "12QB", "want bytes"},
	} {
		s := Named(tc.setting)
		quoted := `"` + tc.value + `"`
		fileValue := quoted
		if strings.Trim(tc.value, "0123456789") == "" {
			fileValue = tc.value // a number in the file
		}
		for _, src := range []struct {
			name string
			args []string
			env  map[string]string
		}{
			{"flag", []string{"--" + tc.setting + "=" + tc.value}, nil},
			{"environment", nil, map[string]string{s.Env(): tc.value}},
			{"file", []string{"--config", writeFile(t, "c.hcl", s.Attribute()+" = "+fileValue+"\n")}, nil},
		} {
			_, err := load(t, src.args, src.env)
			if err == nil {
				t.Errorf("%s %s=%s: accepted", src.name, tc.setting, tc.value)
				continue
			}
			msg := err.Error()
			if n := strings.Count(msg, tc.value); n != 1 {
				t.Errorf("%s %s=%s: the value is in the message %d times, want once: %s", src.name, tc.setting, tc.value, n, msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("%s %s=%s: %s, want it to say %q", src.name, tc.setting, tc.value, msg, tc.want)
			}
		}
	}
}

// TestUsageShowsKinds: -h shows each setting's kind beside its flag,
// where the flag package says "value" for every type but its own.
func TestUsageShowsKinds(t *testing.T) {
	var c Config
	fs := allSettings(&c)
	var out strings.Builder
	fs.SetOutput(&out)
	PrintDefaults(fs)
	for _, s := range Table {
		want := "  -" + s.Name + " " + map[string]string{"string": "string", "int": "int", "duration": "duration", "days": "duration", "size": "size", "list": "list"}[s.Kind()] + "\n"
		if s.Kind() == "bool" {
			want = "  -" + s.Name + "\n"
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage has no line %q", want)
		}
	}
	if strings.Contains(out.String(), " value\n") {
		t.Errorf("usage shows a kind as value:\n%s", out.String())
	}
}
