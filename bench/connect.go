package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
)

// connectProxy is an HTTP CONNECT proxy that sends connections for one
// host name to a loopback address and refuses every other. The mirror
// subprocess uses it (HTTPS_PROXY) to reach the fake origin under the name
// registry.terraform.io, which terraform needs: it cannot install through a
// network mirror from a registry host that has a port.
type connectProxy struct {
	ln     net.Listener
	routes map[string]string // "host:443" -> "127.0.0.1:port"
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func startConnectProxy(routes map[string]string) (*connectProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &connectProxy{ln: ln, routes: routes, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *connectProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *connectProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c, true)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			p.handle(c)
		}()
	}
}

func (p *connectProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *connectProxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	target, ok := p.routes[req.Host]
	if req.Method != http.MethodConnect || !ok {
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	p.track(up, true)
	defer p.track(up, false)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, br); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// Close stops the proxy and its tunnels.
func (p *connectProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
