//go:build !linux

package admin

import (
	"errors"
	"net"
)

// readPeer: the caller's credentials are read on Linux only (SO_PEERCRED);
// elsewhere every admin request is refused.
func readPeer(*net.UnixConn) (Peer, error) {
	return Peer{}, errors.New("the caller's credentials cannot be read on this system (SO_PEERCRED is Linux's)")
}
