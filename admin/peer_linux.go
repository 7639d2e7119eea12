package admin

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// readPeer reads the credentials of c's caller (SO_PEERCRED): those it
// had when it connected, as the kernel recorded them.
func readPeer(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("reading the caller's credentials (SO_PEERCRED): %w", credErr)
	}
	return Peer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}, nil
}
