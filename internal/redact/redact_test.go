package redact

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"testing"
)

const sig = "f00dfacecafe0123456789abcdefdeadbeef"

func TestLocation(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"pre-signed S3 archive", "https://bucket.s3.amazonaws.com/x.tar.gz?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20240101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=" + sig,
			"https://bucket.s3.amazonaws.com/x.tar.gz"},
		{"archive parameter kept", "https://h.example/dl?archive=zip&token=" + sig, "https://h.example/dl?archive=zip"},
		{"git with ref and subdir", "git::https://h.example/r.git//modules/app?ref=v1.2.0&sshkey=" + sig, "git::https://h.example/r.git//modules/app?ref=v1.2.0"},
		{"userinfo", "git::https://user:" + sig + "@h.example/r.git?ref=v1", "git::https://h.example/r.git?ref=v1"},
		{"token as user", "https://" + sig + "@h.example/x.zip", "https://h.example/x.zip"},
		{"fragment", "https://h.example/x.zip#" + sig, "https://h.example/x.zip"},
		{"github shorthand", "github.com/acme/mod?ref=v1&token=" + sig, "github.com/acme/mod?ref=v1"},
		{"forced s3 getter", "s3::https://s3.amazonaws.com/b/x.zip?aws_access_key_secret=" + sig, "s3::https://s3.amazonaws.com/b/x.zip"},
		{"scp-like", "git@github.com:acme/mod.git?ref=v1&x=" + sig, "github.com:acme/mod.git"},
		{"unparsable with userinfo", "https://u:" + sig + "@h.example/%zz?sig=" + sig, "https://h.example/%zz"},
		{"key without value", "https://h.example/x.zip?" + sig, "https://h.example/x.zip"},
		{"opaque", "mailto:u:" + sig + "@h.example?x=" + sig, "h.example"},
		{"password with an unencoded slash", "git::https://user:/" + sig + "@h.example/r.git?ref=v1", "git::https://h.example/r.git?ref=v1"},
		{"password of digits and an unencoded slash", "https://user:8/" + sig + "@h.example/x.zip", "https://h.example/x.zip"},
		{"password with unencoded slashes", "https://user:/a/" + sig + "@h.example/x.zip", "https://h.example/x.zip"},
		{"unparsable, password with an unencoded slash", "https://user:/" + sig + "@h.example/%zz", "https://h.example/%zz"},
		{"plain", "https://h.example/x.tar.gz", "https://h.example/x.tar.gz"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Location(tc.in)
			if got != tc.want {
				t.Errorf("Location(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.Contains(got, sig) {
				t.Errorf("Location(%q) = %q keeps the secret", tc.in, got)
			}
		})
	}
}

func TestURL(t *testing.T) {
	u, err := url.Parse("https://u:p@releases.example/p/1.0/x.zip?X-Amz-Signature=" + sig + "#frag")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := URL(u), "https://releases.example/p/1.0/x.zip"; got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
	// A proxy URL whose password holds an unencoded "/": net/url ends
	// its authority there, reading the password as the path.
	u, err = url.Parse("http://mirror:/" + sig + "@proxy.example:3128")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := URL(u), "http://proxy.example:3128"; got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
	if URL(nil) != "" {
		t.Error("URL(nil) is not empty")
	}
}

// A library's message that repeats the location, escaped or not, loses
// every secret of it, and errors.Is still sees the cause.
func TestError(t *testing.T) {
	loc := "git::https://user:pw-" + sig + "@h.example/r.git?ref=v1&token=" + sig + "%2Fx&X-Amz-Expires=3600"
	for _, tc := range []struct {
		name string
		err  error
		keep string
	}{
		{"raw location", fmt.Errorf("get %q: %w", loc, fs.ErrNotExist), "h.example"},
		{"url.Error", fmt.Errorf("fetch: %w", &url.Error{Op: "Get", URL: strings.TrimPrefix(loc, "git::") + "/info/refs", Err: fs.ErrNotExist}), "h.example"},
		{"unescaped value", fmt.Errorf("token %s/x refused after 3600 s: %w", sig, fs.ErrNotExist), "3600 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Error(tc.err, loc)
			if strings.Contains(err.Error(), sig) {
				t.Errorf("message keeps the secret: %s", err)
			}
			if !strings.Contains(err.Error(), tc.keep) {
				t.Errorf("message lost %q: %s", tc.keep, err)
			}
			if !errors.Is(err, fs.ErrNotExist) {
				t.Error("errors.Is lost the cause")
			}
		})
	}
	if Error(nil, loc) != nil {
		t.Error("Error(nil) is not nil")
	}
	plain := errors.New("x")
	if Error(plain, "https://h.example/x.zip") != plain {
		t.Error("an error with no secret to remove was wrapped")
	}
}

// A library's message that names a URL the caller never gave it (the
// target of a redirect, a submodule's URL) loses that URL's secrets too,
// and keeps what Location keeps of it.
func TestErrorHidesURLsItWasNotGiven(t *testing.T) {
	given := "git::https://h.example/r.git?ref=v1"
	target := "https://bucket.example/r/info/refs?service=git-upload-pack&X-Amz-Signature=" + sig
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"url.Error", fmt.Errorf("fetch: %w", &url.Error{Op: "Get", URL: target, Err: fs.ErrNotExist})},
		{"quoted", fmt.Errorf("unexpected requesting %q status code: 500: %w", target, fs.ErrNotExist)},
		{"bare", fmt.Errorf("get %s: %w", target, fs.ErrNotExist)},
		{"userinfo", fmt.Errorf("get %s: %w", "https://user:pw-"+sig+"@other.example/x", fs.ErrNotExist)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{Error(tc.err, given), Error(tc.err)} {
				if strings.Contains(err.Error(), sig) {
					t.Errorf("message keeps the secret: %s", err)
				}
				if !strings.Contains(err.Error(), ".example/") {
					t.Errorf("message lost the URL's host and path: %s", err)
				}
				if !errors.Is(err, fs.ErrNotExist) {
					t.Error("errors.Is lost the cause")
				}
			}
		})
	}
	if got := Error(fmt.Errorf("get %s: refused", "https://h.example/x.zip?ref=v1")).Error(); got != "get https://h.example/x.zip?ref=v1: refused" {
		t.Errorf("a URL with nothing to hide changed: %s", got)
	}
}

// A location whose password holds an unencoded "/" (read by net/url as
// a path) loses that password in a message that names it bare too.
func TestErrorPasswordReadAsPath(t *testing.T) {
	for _, loc := range []string{"git::https://user:/" + sig + "@h.example/r.git", "https://user:/" + sig + "@h.example/%zz"} {
		err := Error(fmt.Errorf("lookup user: refused with %s: %w", sig, fs.ErrNotExist), loc)
		if strings.Contains(err.Error(), sig) {
			t.Errorf("%s: message keeps the secret: %s", loc, err)
		}
	}
}

// TestSentError: the credentials of the Authorization headers recorded
// on a context (a bearer token; basic authentication's encoded value,
// USER:PASSWORD and password) are replaced in an error's message, which
// errors.Is still sees through; one shorter than 4 bytes, a user name
// alone, and a context that does not record are left as they are.
func TestSentError(t *testing.T) {
	cause := errors.New("cause")
	ctx := Sending(context.Background())
	Sent(ctx, "Bearer tok-0123456789")
	basic := base64.StdEncoding.EncodeToString([]byte("deploy:pass-0123456789"))
	Sent(Sending(ctx), "Basic "+basic) // Sending keeps the record already there
	Sent(ctx, "Bearer abc")
	err := fmt.Errorf("host said %s, %s, deploy:pass-0123456789 and pass-0123456789; abc: %w", "tok-0123456789", basic, cause)
	got := SentError(ctx, err)
	if want := "host said REDACTED, REDACTED, REDACTED and REDACTED; abc: cause"; got.Error() != want {
		t.Errorf("SentError = %q, want %q", got, want)
	}
	if !errors.Is(got, cause) {
		t.Error("errors.Is does not see the cause")
	}
	if got := SentError(ctx, cause); got != cause {
		t.Errorf("an error without a credential sent became %v", got)
	}
	if got := SentError(context.Background(), err); got != err {
		t.Errorf("a context that does not record changed the error: %v", got)
	}
	if SentError(ctx, nil) != nil || Credentials(nil, "tok-0123456789") != nil {
		t.Error("nil is not nil")
	}
}
