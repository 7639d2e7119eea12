package s3test

import (
	"errors"
	"net"
	"net/http"
	"testing"
)

// A port another process holds is told apart from other failures to
// start (launch: errPortTaken), which start tries again on another port;
// Start then serves on a port of its own.
func TestPortTakenToldApart(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	s := &Server{t: t, bin: Binary(t), root: t.TempDir(), addr: held.Addr().String()}
	if err := s.launch(); !errors.Is(err, errPortTaken) {
		s.Stop()
		t.Fatalf("versitygw on a port held by another process: %v, want errPortTaken", err)
	}
	srv := Start(t)
	resp, err := http.Get(srv.Endpoint() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || srv.addr == held.Addr().String() {
		t.Errorf("Start: %s on %s", resp.Status, srv.addr)
	}
}
