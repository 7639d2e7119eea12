package proxy

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

type pinger struct{ err error }

func (p pinger) Ping() error { return p.err }

// A shared store that is down degrades the mirror but leaves it ready: it
// still serves its cache and the origins. A cache that cannot be written
// is not ready, whatever the shared store says.
func TestReadyzSharedStore(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	down := func() error { return errors.New("shared store unavailable: connection refused") }
	tests := []struct {
		name       string
		h          http.HandlerFunc
		wantCode   int
		wantStatus string
	}{
		{"no shared store", Readyz(&HealthSource{Store: pinger{}}, log), 200, "ok"},
		{"shared store up", Readyz(&HealthSource{Store: pinger{}, SharedDown: func() error { return nil }}, log), 200, "ok"},
		{"shared store down", Readyz(&HealthSource{Store: pinger{}, SharedDown: down}, log), 200, "degraded"},
		{"cache not writable", Readyz(&HealthSource{Store: pinger{errors.New("disk full")}, SharedDown: down}, log), 503, "unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var body map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.wantCode || body["status"] != tc.wantStatus {
				t.Errorf("%d %v, want %d status %q", rec.Code, body, tc.wantCode, tc.wantStatus)
			}
			if tc.wantStatus == "degraded" && body["shared_store"] == "" {
				t.Error("degraded without saying why")
			}
		})
	}
}
