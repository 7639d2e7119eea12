package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a subprocess the harness started; stop ends it.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startProcess starts cmd with its output in logFile. On Linux the kernel
// sends the child deathSig should this process die without stopping it
// (procattr_linux.go).
func startProcess(name string, cmd *exec.Cmd, logFile string, deathSig syscall.Signal) (*process, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = procAttr(deathSig)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop sends sig, waits up to grace for the exit, then kills.
func (p *process) stop(sig syscall.Signal, grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// buildMirror compiles ./cmd/tfmirror into dir.
func buildMirror(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "tfmirror")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tfmirror")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tfmirror (run the harness from the repository root): %v\n%s", err, out)
	}
	return bin, nil
}

// mirrorProc is a running `tfmirror serve`.
type mirrorProc struct {
	*process
	addr string // 127.0.0.1:port
	url  string // https://127.0.0.1:port/
}

// startMirror runs `tfmirror serve` on a random loopback port and waits for
// it to log its address.
func startMirror(ctx context.Context, bin, dir, logName string, args []string, env []string) (*mirrorProc, error) {
	logFile := filepath.Join(dir, logName)
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	p, err := startProcess("tfmirror", cmd, logFile, syscall.SIGKILL)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if addr := servingAddr(logFile); addr != "" {
			return &mirrorProc{process: p, addr: addr, url: "https://" + addr + "/"}, nil
		}
		select {
		case <-p.exited:
			log, _ := os.ReadFile(logFile)
			return nil, fmt.Errorf("tfmirror exited (%v):\n%s", p.err, log)
		case <-ctx.Done():
			p.stop(syscall.SIGKILL, 0)
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.stop(syscall.SIGKILL, 0)
	return nil, errors.New("tfmirror did not start serving within 30s")
}

func servingAddr(logFile string) string {
	f, err := os.Open(logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Address string `json:"address"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "tfmirror is serving" {
			return line.Address
		}
	}
	return ""
}

// freePort returns a loopback address that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// nginxConf is the reference server: a static mirror directory over
// HTTPS with the same certificate and protocol version as tfmirror.
const nginxConf = `daemon off;
master_process on;
worker_processes auto;
pid {{dir}}/nginx.pid;
error_log {{dir}}/nginx-error.log warn;
events { worker_connections 4096; }
http {
    include {{mime}};
    default_type application/octet-stream;
    access_log {{dir}}/nginx-access.log;
    client_body_temp_path {{dir}}/nginx-body;
    proxy_temp_path {{dir}}/nginx-proxy;
    fastcgi_temp_path {{dir}}/nginx-fastcgi;
    uwsgi_temp_path {{dir}}/nginx-uwsgi;
    scgi_temp_path {{dir}}/nginx-scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    server {
        listen {{addr}} ssl;
        ssl_certificate {{cert}};
        ssl_certificate_key {{key}};
        ssl_protocols TLSv1.3;
        root {{root}};
        location / { }
    }
}
`

// nginxProc is a running nginx serving root.
type nginxProc struct {
	*process
	url     string
	version string
}

func startNginx(ctx context.Context, bin, dir, root, cert, key string) (*nginxProc, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("nginx not found (%v); install it with bench/setup.sh (apt-get install nginx-light) or pass -nginx", err)
	}
	out, _ := exec.Command(path, "-v").CombinedOutput()
	version := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: "))
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	mime := "/etc/nginx/mime.types"
	if _, err := os.Stat(mime); err != nil {
		return nil, fmt.Errorf("nginx's mime.types: %w", err)
	}
	conf := strings.NewReplacer("{{dir}}", dir, "{{mime}}", mime, "{{addr}}", addr,
		"{{cert}}", cert, "{{key}}", key, "{{root}}", root).Replace(nginxConf)
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "-c", confFile, "-p", dir)
	// SIGTERM makes the master stop its workers too.
	p, err := startProcess("nginx", cmd, filepath.Join(dir, "nginx.out"), syscall.SIGTERM)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-p.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "nginx-error.log"))
			out, _ := os.ReadFile(filepath.Join(dir, "nginx.out"))
			return nil, fmt.Errorf("nginx exited (%v):\n%s%s", p.err, out, log)
		case <-ctx.Done():
			p.stop(syscall.SIGTERM, 5*time.Second)
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop(syscall.SIGTERM, 5*time.Second)
			return nil, fmt.Errorf("nginx did not listen on %s within 10s", addr)
		}
	}
	return &nginxProc{process: p, url: "https://" + addr + "/", version: version}, nil
}

// mem is a process's memory use from /proc/PID/status, in bytes.
type mem struct {
	hwm  int64 // VmHWM: peak resident set size
	rss  int64 // VmRSS
	anon int64 // RssAnon: heap, stacks (what the process allocated)
	file int64 // RssFile: mapped file pages (Badger's memory-mapped files), reclaimable page cache
}

// memStatus reads pid's memory use.
func memStatus(pid int) (mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return mem{}, err
	}
	var m mem
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			m.hwm = n << 10
		case "VmRSS":
			m.rss = n << 10
		case "RssAnon":
			m.anon = n << 10
		case "RssFile":
			m.file = n << 10
		}
	}
	return m, nil
}

// resetPeak resets pid's VmHWM to its current RSS (Linux clear_refs 5).
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
