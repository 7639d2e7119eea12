package oci

import "strings"

// The routes of the distribution API a path under /v2/ names, as
// SplitPath reads them.
const (
	RouteTags      = "tags"      // NAME/tags/list
	RouteManifests = "manifests" // NAME/manifests/REF
	RouteBlobs     = "blobs"     // NAME/blobs/DIGEST
	RouteReferrers = "referrers" // NAME/referrers/DIGEST
	RouteUploads   = "uploads"   // NAME/blobs/uploads/ and NAME/blobs/uploads/REF (a push)
)

// SplitPath reads the route of rest, a path under /v2/ without that
// prefix: the repository name, the reference (a tag or digest; "" for
// the tag list and uploads) and the route (one of the Route constants,
// "" for a path that is none). The route is read from the end of the
// path, as the distribution spec anchors it: a repository name may hold
// any of the routes' words as a component (a provider "blobs/uploads", a
// type "manifests"), so what names the route is what follows the name,
// never one of its words found anywhere in the path. The name is not
// checked here (Names.Parse does).
func SplitPath(rest string) (name, ref, route string) {
	if name, ok := strings.CutSuffix(rest, "/tags/list"); ok && name != "" {
		return name, "", RouteTags
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", ""
	}
	ref = rest[i+1:]
	j := strings.LastIndexByte(rest[:i], '/')
	if j <= 0 {
		return "", "", ""
	}
	switch k := rest[j+1 : i]; k {
	case RouteManifests, RouteBlobs, RouteReferrers:
		if ref == "" {
			return "", "", ""
		}
		return rest[:j], ref, k
	case RouteUploads:
		if name, ok := strings.CutSuffix(rest[:j], "/blobs"); ok && name != "" {
			return name, "", RouteUploads
		}
	}
	return "", "", ""
}
