package settings

import (
	"strings"
	"testing"
)

// shared_store is no secret (it names a bucket, its credentials come
// from the AWS sources), but its endpoint parameter may be given with a
// token in its own query, which Validate refuses: the values shown until
// then (config check, a reload's changes) and after (the status page's
// configuration) show the endpoint as the status page's health does,
// without it.
func TestSharedStoreShownRedacted(t *testing.T) {
	e, err := load(t, []string{"--shared-store", "s3://mybucket/prefix?endpoint=http://AKIA:STORETOK6@127.0.0.1:9/?token=STORETOK6&region=us-east-1&path_style=true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range e.Values() {
		if v.Setting.Name != "shared-store" {
			continue
		}
		if want := "s3://mybucket/prefix?endpoint=http://127.0.0.1:9/&region=us-east-1&path_style=true"; v.Value != want {
			t.Errorf("shown as %q, want %q", v.Value, want)
		}
		return
	}
	t.Error("shared-store not among the values")
}

// Validate refuses a shared store endpoint with a query, naming the
// flag, without the query.
func TestSharedStoreEndpointQueryRefused(t *testing.T) {
	t.Parallel()
	var c Config
	allSettings(&c)
	c.SharedStore = "s3://mybucket/prefix?endpoint=http://127.0.0.1:9/?token=STORETOK6&region=us-east-1&path_style=true"
	c.SharedKeyFile = "/nonexistent/shared.key"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--shared-store") || !strings.Contains(err.Error(), "query") || strings.Contains(err.Error(), "STORETOK6") {
		t.Errorf("Validate: %v, want the endpoint's query refused naming --shared-store, without it", err)
	}
}

// shared_store_id left to its default is shown as the ID in force, the
// one shared_store's bucket and prefix give it, not as empty.
func TestSharedStoreIDShownDerived(t *testing.T) {
	e, err := load(t, []string{"--shared-store", "s3://mybucket/prefix?region=us-east-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range e.Values() {
		if v.Setting.Name == "shared-store-id" && (v.Value != "s3://mybucket/prefix/" || v.Source != FromDefault) {
			t.Errorf("shared-store-id shown as %q from %s, want s3://mybucket/prefix/ from default", v.Value, v.Source)
		}
	}
}

// shared_store_id left to its default is the ID its store's location
// gives it: a reload that keeps a new shared_store for a restart keeps
// the ID pending beside it (the restart changes it too, and every
// replica must have the same), and one that takes shared_store_id out of
// the file has the ID the location gives pending, not an empty value.
func TestSharedStoreIDPendingDerived(t *testing.T) {
	loadFile := func(content string) *Effective {
		t.Helper()
		path := writeFile(t, "c.hcl", content)
		e, err := load(t, []string{"--config", path}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	pending := func(e *Effective, name string) Value {
		t.Helper()
		for _, v := range e.Values() {
			if v.Setting.Name == name {
				return v
			}
		}
		t.Fatalf("no value of %s", name)
		return Value{}
	}
	for _, tc := range []struct {
		name, from, to string
		value, pending string
	}{
		{"the location changed", "shared_store = \"s3://one/a?region=us-east-1\"\n", "shared_store = \"s3://two/b?region=us-east-1\"\n", "s3://one/a/", "s3://two/b/"},
		{"the ID taken out", "shared_store = \"s3://one/a?region=us-east-1\"\nshared_store_id = \"s3://old/\"\n", "shared_store = \"s3://one/a?region=us-east-1\"\n", "s3://old/", "s3://one/a/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, next := loadFile(tc.from), loadFile(tc.to)
			_, restart := LiveOnly(cur.Changed(next.Loaded))
			kept, err := cur.keep(next, restart)
			if err != nil {
				t.Fatal(err)
			}
			if v := pending(kept, "shared-store-id"); v.Value != tc.value || !v.HasPending || v.Pending != tc.pending {
				t.Errorf("shared-store-id %q, pending %v %q; want %q in force, %q pending", v.Value, v.HasPending, v.Pending, tc.value, tc.pending)
			}
		})
	}
}
