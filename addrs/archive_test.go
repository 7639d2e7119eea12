package addrs

import "testing"

func TestArchiveName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, typ, file string
		wantVersion     string
		wantPlatform    string
		wantErr         bool
	}{
		{name: "plain", typ: "random", file: "terraform-provider-random_3.6.0_linux_amd64.zip", wantVersion: "3.6.0", wantPlatform: "linux_amd64"},
		{name: "prerelease", typ: "aws", file: "terraform-provider-aws_6.0.0-beta1_darwin_arm64.zip", wantVersion: "6.0.0-beta1", wantPlatform: "darwin_arm64"},
		{name: "dashed type", typ: "my-type", file: "terraform-provider-my-type_1.0.0_windows_386.zip", wantVersion: "1.0.0", wantPlatform: "windows_386"},
		// The version is returned as written, for the caller to parse.
		{name: "version not checked", typ: "random", file: "terraform-provider-random_v1_linux_amd64.zip", wantVersion: "v1", wantPlatform: "linux_amd64"},
		{name: "other type", typ: "random", file: "terraform-provider-null_1.0.0_linux_amd64.zip", wantErr: true},
		{name: "type prefix of another", typ: "random", file: "terraform-provider-randomx_1.0.0_linux_amd64.zip", wantErr: true},
		{name: "underscore in version", typ: "random", file: "terraform-provider-random_1_0_linux_amd64.zip", wantErr: true},
		{name: "empty version", typ: "random", file: "terraform-provider-random__linux_amd64.zip", wantErr: true},
		{name: "platform only", typ: "random", file: "terraform-provider-random_linux_amd64.zip", wantErr: true},
		{name: "no platform", typ: "random", file: "terraform-provider-random_1.0.0.zip", wantErr: true},
		{name: "half platform", typ: "random", file: "terraform-provider-random_1.0.0_linux.zip", wantErr: true},
		{name: "empty os", typ: "random", file: "terraform-provider-random_1.0.0__amd64.zip", wantErr: true},
		{name: "empty arch", typ: "random", file: "terraform-provider-random_1.0.0_linux_.zip", wantErr: true},
		{name: "bad arch", typ: "random", file: "terraform-provider-random_1.0.0_linux_AMD64.zip", wantErr: true},
		{name: "nothing after prefix", typ: "random", file: "terraform-provider-random_.zip", wantErr: true},
		{name: "not zip", typ: "random", file: "terraform-provider-random_1.0.0_linux_amd64.tar", wantErr: true},
		{name: "no prefix", typ: "random", file: "random_1.0.0_linux_amd64.zip", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, pl, err := ParseArchiveName(tc.typ, tc.file)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parsed %q as %q %s, want an error", tc.file, v, pl)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v != tc.wantVersion || pl.String() != tc.wantPlatform {
				t.Fatalf("got %q %s, want %q %s", v, pl, tc.wantVersion, tc.wantPlatform)
			}
			if back := ArchiveName(tc.typ, v, pl.String()); back != tc.file {
				t.Fatalf("ArchiveName = %q, want %q", back, tc.file)
			}
		})
	}
}
