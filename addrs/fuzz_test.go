package addrs

import (
	"strings"
	"testing"
)

// FuzzParseArchiveName checks that the archive-name parser accepts only
// names that ArchiveName of the parsed parts gives back exactly, with a
// version free of "_" and a valid platform; and that every name
// ArchiveName makes of such parts parses back to them.
func FuzzParseArchiveName(f *testing.F) {
	f.Add("random", "terraform-provider-random_3.6.0_linux_amd64.zip", "3.6.0", "linux_amd64")
	f.Add("my-type", "terraform-provider-my-type_1.0.0-beta.1+x_windows_386.zip", "1.0.0-beta.1+x", "windows_386")
	f.Add("random", "terraform-provider-random_1_0_linux_amd64.zip", "1_0", "linux_amd64")
	f.Add("a_b", "terraform-provider-a_b_1.0.0_linux_amd64.zip", "", "darwin_arm64")
	f.Add("random", "terraform-provider-random__linux_amd64.zip", "1.0.0", "linux_")
	f.Fuzz(func(t *testing.T, typ, name, version, platform string) {
		v, pl, err := ParseArchiveName(typ, name)
		if err == nil {
			if back := ArchiveName(typ, v, pl.String()); back != name {
				t.Fatalf("ParseArchiveName(%q, %q) = %q, %s; ArchiveName gives back %q", typ, name, v, pl, back)
			}
			if v == "" || strings.Contains(v, "_") {
				t.Fatalf("ParseArchiveName(%q, %q) accepted the version %q", typ, name, v)
			}
			if _, err := ParsePlatform(pl.String()); err != nil {
				t.Fatalf("ParseArchiveName(%q, %q) accepted the platform %s: %v", typ, name, pl, err)
			}
		}
		// The other way: parts that ArchiveName may be given parse back.
		want, perr := ParsePlatform(platform)
		if version == "" || strings.Contains(version, "_") || perr != nil {
			return
		}
		made := ArchiveName(typ, version, platform)
		v, pl, err = ParseArchiveName(typ, made)
		if err != nil || v != version || pl != want {
			t.Fatalf("ParseArchiveName(%q, %q) = %q, %s, %v; want %q, %s", typ, made, v, pl, err, version, want)
		}
	})
}
