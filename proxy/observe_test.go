package proxy

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/jsonlog"
)

// The access-log line is the same whichever slog handler writes it: the
// fast JSON handler, slog's own JSON handler (which it must match byte for
// byte), or the text handler of --log-format text.
func TestAccessLineWithEveryHandler(t *testing.T) {
	t.Parallel()
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Tfmirror-Cache", "hit")
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("short"))
	})
	line := func(h slog.Handler, buf *bytes.Buffer) string {
		req := httptest.NewRequest(http.MethodGet, "/registry.terraform.io/hashicorp/random/index.json?sig=x", nil)
		req.Header.Set("X-Request-Id", "ci-42")
		req.Header.Set("User-Agent", `Terraform/1.9 "quoted"`)
		Instrument(next, slog.New(h), nil).ServeHTTP(httptest.NewRecorder(), req)
		// Time and duration differ from request to request.
		return regexp.MustCompile(`("time":"|time=)[^" ]+|("duration":|duration=)[0-9.µnms]+`).ReplaceAllString(buf.String(), "${1}${2}X")
	}
	var fast, std, text bytes.Buffer
	gotFast := line(jsonlog.New(&fast, nil), &fast)
	gotStd := line(slog.NewJSONHandler(&std, nil), &std)
	gotText := line(slog.NewTextHandler(&text, nil), &text)

	wantJSON := `{"time":"X","level":"INFO","msg":"request","request_id":"ci-42","method":"GET",` +
		`"path":"/registry.terraform.io/hashicorp/random/index.json","route":"index","status":418,"bytes":5,` +
		`"duration":X,"cache":"hit","aborted":false,"user_agent":"Terraform/1.9 \"quoted\"","client":"192.0.2.1"}` + "\n"
	if gotFast != wantJSON {
		t.Errorf("fast JSON handler wrote\n%s\nwant\n%s", gotFast, wantJSON)
	}
	if gotStd != wantJSON {
		t.Errorf("slog's JSON handler wrote\n%s\nwant\n%s", gotStd, wantJSON)
	}
	wantText := `time=X level=INFO msg=request request_id=ci-42 method=GET ` +
		`path=/registry.terraform.io/hashicorp/random/index.json route=index status=418 bytes=5 ` +
		`duration=X cache=hit aborted=false user_agent="Terraform/1.9 \"quoted\"" client=192.0.2.1` + "\n"
	if gotText != wantText {
		t.Errorf("text handler wrote\n%s\nwant\n%s", gotText, wantText)
	}
}

// The access-log line takes jsonlog's way through without allocating.
var _ jsonlog.Fields = (*requestLine)(nil)

// The OCI door's route labels are read as the door reads its routes:
// from the end of the path, whatever words the repository name holds.
func TestOCIRouteLabels(t *testing.T) {
	t.Parallel()
	p := "/v2/providers/registry.terraform.io/"
	d := "sha256:" + strings.Repeat("a", 64)
	for path, want := range map[string]string{
		"/v2/":                                  "oci_ping",
		"/v2/token":                             "oci_token",
		p + "acme/net/tags/list":                "oci_tags",
		p + "acme/net/manifests/1.0.0":          "oci_manifest",
		p + "acme/net/blobs/" + d:               "oci_blob",
		p + "acme/net/referrers/" + d:           "oci_referrers",
		p + "acme/net/blobs/uploads/":           "other",
		p + "acme/manifests/blobs/" + d:         "oci_blob",
		p + "acme/manifests/referrers/" + d:     "oci_referrers",
		p + "blobs/uploads/manifests/1.0.0":     "oci_manifest",
		p + "blobs/uploads/tags/list":           "oci_tags",
		p + "acme/net/manifests/1.0.0/whatever": "other",
	} {
		if got := Route(path); got != want {
			t.Errorf("Route(%s) = %s, want %s", path, got, want)
		}
	}
}

// The CLI releases door's requests have route labels of their own: an
// OpenTofu archive or HashiCorp's product document, whose paths have the
// network mirror's depth, is not counted as a provider archive or
// index.json, nor are the others lumped with unknown paths.
func TestReleasesRouteLabels(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/releases/opentofu/v1.8.1/tofu_1.8.1_linux_amd64.zip":                                    "releases_archive",
		"/releases/hashicorp/terraform/1.9.0/terraform_1.9.0_linux_amd64.zip":                     "releases_archive",
		"/releases/hashicorp/terraform/index.json":                                                "releases",
		"/releases/hashicorp/terraform/1.9.0/index.json":                                          "releases",
		"/releases/hashicorp/terraform/1.9.0/terraform_1.9.0_SHA256SUMS":                          "releases",
		"/releases/opentofu/api.json":                                                             "releases",
		"/releases/":                                                                              "releases",
		"/registry.terraform.io/hashicorp/random/terraform-provider-random_1.0.0_linux_amd64.zip": "archive",
	} {
		if got := Route(path); got != want {
			t.Errorf("Route(%s) = %s, want %s", path, got, want)
		}
	}
}
