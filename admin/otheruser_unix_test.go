//go:build unix

package admin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// TestAdminRefusesOtherUser: a process of another user that reaches the
// socket (its mode widened here on purpose) is refused with 403 and a
// message saying why, and the refusal is logged with its uid. It runs a
// client as uid 65534 (nobody), so it needs root and /usr/bin/python3;
// it skips, saying so, without them.
func TestAdminRefusesOtherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run the client as another user")
	}
	// The system's python3: one under root's home is out of nobody's reach.
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs " + python + " for the client run as another user")
	}
	h := newHarness(t, harnessOptions{})
	var logs logbuf.Buffer
	dataDir, _ := socket(t, h.newAPI(t, jsonLogger(&logs), nil, Options{}))
	// Let nobody reach the socket: what a mistaken file mode allows.
	for dir := dataDir; dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(SocketPath(dataDir), 0o666); err != nil {
		t.Fatal(err)
	}
	const client = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
body = b'{"provider":"registry.terraform.io/hashicorp/random"}'
s.sendall(b"POST /v1/versions HTTP/1.1\r\nHost: tfmirror\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
sys.stdout.write(data.decode())
`
	cmd := exec.CommandContext(t.Context(), python, "-c", client, SocketPath(dataDir))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Dir = "/"
	answer, err := cmd.Output()
	if err != nil {
		t.Fatalf("client as uid 65534: %v\n%s", err, answer)
	}
	if !strings.HasPrefix(string(answer), "HTTP/1.1 403") || !strings.Contains(string(answer), "uid 65534") || !strings.Contains(string(answer), "nor root") {
		t.Errorf("answer to uid 65534:\n%s", answer)
	}
	if n := h.origin.TotalHits(); n != 0 {
		t.Errorf("the refused request reached the origin %d times", n)
	}
	refusals := logLines(t, &logs, "admin request refused")
	if len(refusals) != 1 || refusals[0]["caller_uid"] != float64(65534) || refusals[0]["path"] != "/v1/versions" {
		t.Errorf("refusals logged: %v", refusals)
	}
}
