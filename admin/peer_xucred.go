//go:build darwin || freebsd

package admin

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// xucredVersion is the struct xucred version both systems define
// (XUCRED_VERSION in sys/ucred.h).
const xucredVersion = 0

// readPeer reads the credentials of c's caller (LOCAL_PEERCRED): those it
// had when it connected, as the kernel recorded them, and its process id
// where the system gives it (peerPID).
func readPeer(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Xucred
	var credErr error
	pid := 0
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		pid = peerPID(int(fd))
	}); err != nil {
		return Peer{}, err
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("reading the caller's credentials (LOCAL_PEERCRED): %w", credErr)
	}
	if cred.Version != xucredVersion {
		return Peer{}, fmt.Errorf("reading the caller's credentials (LOCAL_PEERCRED): version %d, want %d", cred.Version, xucredVersion)
	}
	p := Peer{UID: int(cred.Uid), PID: pid}
	if cred.Ngroups > 0 {
		p.GID = int(cred.Groups[0])
	}
	return p, nil
}
