package admin

import (
	"context"
	"fmt"
	"net"
	"net/http"
)

// This file is the admin socket's access control beyond its file mode
// (0600, the data directory's owner): the kernel's word on who is
// calling (SO_PEERCRED), read once per connection, for the audit log and
// to refuse callers that are neither the serving process's user nor root
// (a socket whose mode was widened, or a directory shared by mistake).

// Peer is the process at the other end of an admin socket connection, as
// the kernel reports it when it connected.
type Peer struct {
	UID int
	GID int
	PID int
}

type peerKey struct{}

// peerInfo is what ConnContext found out about a connection's caller.
type peerInfo struct {
	peer Peer
	err  error
}

// connContext stores the credentials of c's caller in ctx, for the
// http.Server's ConnContext. A connection that is no unix socket, or
// whose credentials cannot be read, is marked so: its requests are
// refused.
func connContext(ctx context.Context, c net.Conn) context.Context {
	info := peerInfo{err: fmt.Errorf("%s connection: the caller's credentials are known for unix sockets only", c.LocalAddr().Network())}
	if uc, ok := c.(*net.UnixConn); ok {
		info.peer, info.err = readPeer(uc)
	}
	return context.WithValue(ctx, peerKey{}, info)
}

// peerOf returns the caller of the request whose context is ctx.
func peerOf(ctx context.Context) (Peer, error) {
	info, ok := ctx.Value(peerKey{}).(peerInfo)
	if !ok {
		return Peer{}, fmt.Errorf("the caller's credentials were not read (serve the admin API with API.NewServer)")
	}
	return info.peer, info.err
}

// authorize decides whether peer may use the admin API of a server
// running as serverUID: the server's own user and root may; nobody else,
// whatever the socket's file mode lets through.
func authorize(peer Peer, serverUID int) error {
	if peer.UID == serverUID || peer.UID == 0 {
		return nil
	}
	return fmt.Errorf("admin API refused: the caller (uid %d, pid %d) is neither the user tfmirror serves as (uid %d) nor root; run the command as that user",
		peer.UID, peer.PID, serverUID)
}

// guard refuses requests from callers that authorize refuses, or whose
// credentials are unknown, with 403, and logs them.
func (a *API) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer, err := peerOf(r.Context())
		if err != nil {
			err = fmt.Errorf("admin API refused: %w", err)
		} else {
			err = authorize(peer, a.uid)
		}
		if err != nil {
			a.log.Warn("admin request refused", "path", r.URL.Path, "caller_uid", peer.UID, "caller_pid", peer.PID, "error", err)
			writeJSON(w, http.StatusForbidden, ErrorBody{Error: err.Error()})
			return
		}
		next.ServeHTTP(w, r)
	})
}
