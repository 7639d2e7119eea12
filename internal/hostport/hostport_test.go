package hostport

import (
	"net/url"
	"testing"
)

func TestCheck(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://mirror.example.com/":       true,
		"https://mirror.example.com:8443/":  true,
		"https://mirror.example.com:/":      true, // the scheme's port
		"http://u:p@proxy:3128":             true,
		"https://[::1]:1/":                  true,
		"https://10.0.0.1:65535":            true,
		"https://:8443/":                    false,
		"http://u:p@:3128":                  false,
		"https://mirror.example.com:0/":     false,
		"https://mirror.example.com:65536/": false,
		"https://mirror.example.com:99999/": false,
		"https:///path":                     false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if err := Check(u); (err == nil) != ok {
			t.Errorf("Check(%s) = %v, want ok %v", raw, err, ok)
		}
	}
}
