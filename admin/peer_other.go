//go:build !linux && !darwin && !freebsd

package admin

import (
	"errors"
	"net"
)

// readPeer: the caller's credentials are read on Linux (SO_PEERCRED),
// macOS and FreeBSD (LOCAL_PEERCRED); elsewhere every admin request is
// refused.
func readPeer(*net.UnixConn) (Peer, error) {
	return Peer{}, errors.New("the caller's credentials cannot be read on this system (only Linux, macOS and FreeBSD tell)")
}
