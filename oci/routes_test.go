package oci

import "testing"

func TestSplitPath(t *testing.T) {
	tests := []struct{ rest, name, ref, route string }{
		{"p/h/acme/net/tags/list", "p/h/acme/net", "", RouteTags},
		{"p/h/acme/net/manifests/1.0.0", "p/h/acme/net", "1.0.0", RouteManifests},
		{"p/h/acme/net/blobs/sha256:ab", "p/h/acme/net", "sha256:ab", RouteBlobs},
		{"p/h/acme/net/referrers/sha256:ab", "p/h/acme/net", "sha256:ab", RouteReferrers},
		{"p/h/acme/net/blobs/uploads/", "p/h/acme/net", "", RouteUploads},
		{"p/h/acme/net/blobs/uploads/id", "p/h/acme/net", "", RouteUploads},
		// The routes' words as components of the name.
		{"p/h/acme/manifests/blobs/sha256:ab", "p/h/acme/manifests", "sha256:ab", RouteBlobs},
		{"p/h/acme/manifests/referrers/sha256:ab", "p/h/acme/manifests", "sha256:ab", RouteReferrers},
		{"p/h/blobs/uploads/manifests/1.0.0", "p/h/blobs/uploads", "1.0.0", RouteManifests},
		{"p/h/blobs/uploads/tags/list", "p/h/blobs/uploads", "", RouteTags},
		{"p/h/blobs/uploads/blobs/uploads/", "p/h/blobs/uploads", "", RouteUploads},
		{"p/h/manifests/blobs/manifests/1.0.0", "p/h/manifests/blobs", "1.0.0", RouteManifests},
		{"p/h/tags/list/manifests/1.0.0", "p/h/tags/list", "1.0.0", RouteManifests},
		// None.
		{"p/h/acme/net/manifests/", "", "", ""},
		{"p/h/acme/net/manifests/a/b", "", "", ""},
		{"p/h/acme/net/blobs/", "", "", ""},
		{"p/h/acme/net/whatever", "", "", ""},
		{"manifests/1.0.0", "", "", ""},
		{"/manifests/1.0.0", "", "", ""},
		{"/tags/list", "", "", ""},
		{"blobs/uploads/", "", "", ""},
		{"tags/list", "", "", ""},
		{"", "", "", ""},
	}
	for _, tt := range tests {
		name, ref, route := SplitPath(tt.rest)
		if name != tt.name || ref != tt.ref || route != tt.route {
			t.Errorf("SplitPath(%q) = %q, %q, %q; want %q, %q, %q", tt.rest, name, ref, route, tt.name, tt.ref, tt.route)
		}
	}
}
