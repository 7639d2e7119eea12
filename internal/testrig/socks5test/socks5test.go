// Package socks5test is a SOCKS5 proxy on loopback for tests (RFC 1928,
// with the username/password method of RFC 1929, CONNECT only): it asks
// for a user and password when given one, and answers every connection
// request with the reply it is given, connecting to the target when
// that reply is "succeeded"; or, when told to, it breaks the protocol.
package socks5test

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Replies to a connection request (RFC 1928, section 6).
const (
	Succeeded       byte = 0x00
	NotAllowed      byte = 0x02 // connection not allowed by ruleset
	HostUnreachable byte = 0x04
)

// Ways the proxy breaks the protocol (Options.Break).
const (
	// Garbage answers the greeting with what is not SOCKS5 (an HTTP
	// proxy's answer).
	Garbage = "garbage"
	// CloseAfterGreeting closes the connection once it has read the
	// greeting, without an answer.
	CloseAfterGreeting = "close"
)

// Options are the proxy's.
type Options struct {
	// User and Pass are the credentials the proxy asks for; with User
	// empty it asks for none.
	User, Pass string
	// Reply answers every connection request.
	Reply byte
	// Route, when set, gives the address to connect to for the
	// host:port a request names (a fake origin's for a public name).
	Route func(hostport string) string
	// Break, when set (Garbage, CloseAfterGreeting), breaks the protocol
	// after the greeting instead of answering it.
	Break string
}

// Server is a running proxy, stopped at the test's end.
type Server struct {
	// Addr is the host:port it listens on.
	Addr string

	opts       Options
	handshakes atomic.Int32

	mu      sync.Mutex
	targets []string
	conns   map[net.Conn]bool
}

// Start starts a proxy on loopback; the test's cleanup stops it, its
// connections closed.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), opts: opts, conns: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			wg.Go(func() { s.serve(c) })
		}
	})
	return s
}

// Handshakes is how many connections got as far as choosing an
// authentication method: the requests sent to the proxy.
func (s *Server) Handshakes() int { return int(s.handshakes.Load()) }

// Targets are the host:port of every connection request, in order.
func (s *Server) Targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.targets...)
}

func (s *Server) serve(c net.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil || hdr[0] != 5 {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return
	}
	s.handshakes.Add(1)
	switch s.opts.Break {
	case Garbage:
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
		return
	case CloseAfterGreeting:
		return
	}
	method := byte(0x00)
	if s.opts.User != "" {
		method = 0x02
	}
	if !bytes.Contains(methods, []byte{method}) {
		c.Write([]byte{5, 0xff}) // no acceptable methods
		return
	}
	c.Write([]byte{5, method})
	if method == 0x02 {
		user, pass, ok := readUserPass(c)
		if !ok {
			return
		}
		if user != s.opts.User || pass != s.opts.Pass {
			c.Write([]byte{1, 1})
			return
		}
		c.Write([]byte{1, 0})
	}
	target, ok := readConnect(c)
	if !ok {
		return
	}
	s.mu.Lock()
	s.targets = append(s.targets, target)
	s.mu.Unlock()
	reply := func(code byte) { c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0}) }
	if s.opts.Reply != Succeeded {
		reply(s.opts.Reply)
		return
	}
	if s.opts.Route != nil {
		target = s.opts.Route(target)
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		reply(0x05) // connection refused
		return
	}
	defer up.Close()
	reply(Succeeded)
	c.SetDeadline(time.Time{})
	done := make(chan struct{})
	go func() { io.Copy(up, c); up.Close(); close(done) }()
	io.Copy(c, up)
	c.Close()
	<-done
}

// readUserPass reads a username/password request (RFC 1929).
func readUserPass(c net.Conn) (user, pass string, ok bool) {
	var v [2]byte
	if _, err := io.ReadFull(c, v[:]); err != nil || v[0] != 1 {
		return "", "", false
	}
	u := make([]byte, v[1])
	if _, err := io.ReadFull(c, u); err != nil {
		return "", "", false
	}
	var l [1]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return "", "", false
	}
	p := make([]byte, l[0])
	if _, err := io.ReadFull(c, p); err != nil {
		return "", "", false
	}
	return string(u), string(p), true
}

// readConnect reads a CONNECT request and returns its host:port.
func readConnect(c net.Conn) (string, bool) {
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != 5 || req[1] != 1 {
		return "", false
	}
	var host string
	switch req[3] {
	case 1:
		ip := make([]byte, 4)
		if _, err := io.ReadFull(c, ip); err != nil {
			return "", false
		}
		host = net.IP(ip).String()
	case 4:
		ip := make([]byte, 16)
		if _, err := io.ReadFull(c, ip); err != nil {
			return "", false
		}
		host = net.IP(ip).String()
	case 3:
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return "", false
		}
		name := make([]byte, l[0])
		if _, err := io.ReadFull(c, name); err != nil {
			return "", false
		}
		host = string(name)
	default:
		return "", false
	}
	var port [2]byte
	if _, err := io.ReadFull(c, port[:]); err != nil {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port[0])<<8|int(port[1]))), true
}
