package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The versitygw root account and the bucket the replicas of figure 7
// share.
const (
	s3AccessKey = "tfmirror-bench"
	s3SecretKey = "tfmirror-bench-secret"
	s3Region    = "us-east-1"
	s3Bucket    = "tfmirror-bench"
	// versitygwVersion is the release bench/setup.sh installs (as .ci/run
	// does for the tests).
	versitygwVersion = "v1.8.0"
)

// Figure 7's cold versions of the big provider: one per variant.
const (
	sharedVersion = "5.0.0"
	localVersion  = "5.1.0"
)

// replicas is how many tfmirror processes figure 7 runs per variant.
const replicas = 3

// findVersitygw resolves the -versitygw flag: the given binary, or by
// default versitygw on PATH, else .ci/bin/versitygw (where .ci/run
// installs it) under the working directory.
func findVersitygw(flagValue string) (string, error) {
	const how = "install it with bench/setup.sh (GOBIN=$PWD/.ci/bin go install github.com/versity/versitygw/cmd/versitygw@" +
		versitygwVersion + "), pass -versitygw, or skip figure 7 with -only"
	if flagValue != "" {
		p, err := exec.LookPath(flagValue)
		if err != nil {
			return "", fmt.Errorf("versitygw: %v; %s", err, how)
		}
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	p, err := filepath.Abs(filepath.Join(".ci", "bin", "versitygw"))
	if err == nil {
		if _, err = os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("versitygw not found on PATH nor in .ci/bin (%v); %s", err, how)
}

// s3Proc is a running versitygw with its posix backend in a directory.
type s3Proc struct {
	*process
	endpoint string // http://127.0.0.1:port
}

// startVersitygw runs versitygw on a free loopback port with a new data
// directory under dir, waits until it answers its health check (at most
// 30 seconds) and creates the bucket.
func startVersitygw(ctx context.Context, bin, dir string) (*s3Proc, error) {
	root := filepath.Join(dir, "s3")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "versitygw.log")
	cmd := exec.Command(bin, "--access", s3AccessKey, "--secret", s3SecretKey, "--region", s3Region,
		"--port", addr, "--health", "/health", "--quiet", "posix", root)
	p, err := startProcess("versitygw", cmd, logFile, syscall.SIGKILL)
	if err != nil {
		return nil, err
	}
	s := &s3Proc{process: p, endpoint: "http://" + addr}
	if err := s.waitHealthy(ctx, logFile); err != nil {
		p.stop(syscall.SIGKILL, 0)
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := s3.New(s3.Options{
		Region:       s3Region,
		BaseEndpoint: aws.String(s.endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s3AccessKey, s3SecretKey, ""),
	})
	if _, err := client.CreateBucket(cctx, &s3.CreateBucketInput{Bucket: aws.String(s3Bucket)}); err != nil {
		p.stop(syscall.SIGKILL, 0)
		return nil, fmt.Errorf("creating the bucket: %w", err)
	}
	return s, nil
}

func (s *s3Proc) waitHealthy(ctx context.Context, logFile string) error {
	c := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint+"/health", nil)
		if err != nil {
			return err
		}
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logFile)
			return fmt.Errorf("versitygw exited (%v):\n%s", s.err, log)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("versitygw did not answer on %s within 30s", s.endpoint)
		case <-tick.C:
		}
	}
}

// storeURL is the --shared-store URL of the bucket.
func (s *s3Proc) storeURL() string {
	return fmt.Sprintf("s3://%s/bench?endpoint=%s&region=%s&path_style=true", s3Bucket, s.endpoint, s3Region)
}

// env gives a replica the root credentials and nothing from the user's
// AWS configuration.
func (s *s3Proc) env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s3AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s3SecretKey,
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_REGION=" + s3Region,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// startReplicas starts n `tfmirror serve` processes with the harness's
// flags, each with a new data directory, plus extra flags and environment.
// On failure it stops those it started.
func (e *env) startReplicas(ctx context.Context, name string, n int, extra, env []string) ([]*mirrorProc, error) {
	var ms []*mirrorProc
	for i := range n {
		args := slices.Clone(e.mirrorArgs)
		j := slices.Index(args, "--data-dir")
		if j < 0 || j+1 >= len(args) {
			stopAll(ms)
			return nil, errors.New("the harness's tfmirror flags have no --data-dir")
		}
		args[j+1] = filepath.Join(e.dir, fmt.Sprintf("data-%s-%d", name, i+1))
		m, err := startMirror(ctx, e.bin, e.dir, fmt.Sprintf("replica-%s-%d.log", name, i+1),
			append(args, extra...), append(slices.Clone(e.mirrorEnv), env...))
		if err != nil {
			stopAll(ms)
			return nil, fmt.Errorf("replica %d: %w", i+1, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func stopAll(ms []*mirrorProc) {
	for _, m := range ms {
		m.stop(syscall.SIGTERM, 10*time.Second)
	}
}

// sharedResult is one variant of figure 7.
type sharedResult struct {
	last      time.Duration
	downloads int
}

// Figure 7: three replicas, with and without the shared store, 30 clients
// spread over them asking at once for one uncached archive.
func (e *env) sharedTier(ctx context.Context) error {
	bin, err := findVersitygw(e.cfg.Versitygw)
	if err != nil {
		return err
	}
	progress("figure 7: starting versitygw (%s)", bin)
	store, err := startVersitygw(ctx, bin, e.dir)
	if err != nil {
		return err
	}
	defer store.stop(syscall.SIGTERM, 10*time.Second)

	// The replicas' shared store key, one file for all of them.
	keyFile := filepath.Join(e.dir, "shared-store.key")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return err
	}
	e.big.SetArchiveRate(e.cfg.OriginRate)
	defer e.big.SetArchiveRate(0)
	shared, err := e.replicaFanOut(ctx, "shared", sharedVersion,
		[]string{"--shared-store", store.storeURL(), "--shared-store-key-file", keyFile}, store.env())
	if err != nil {
		return fmt.Errorf("with the shared store: %w", err)
	}
	local, err := e.replicaFanOut(ctx, "local", localVersion, nil, nil)
	if err != nil {
		return fmt.Errorf("without the shared store: %w", err)
	}
	name := fmt.Sprintf("%d replicas, %d clients of one uncached %d MiB archive, origin %s",
		replicas, e.cfg.SharedClients, e.cfg.ArchiveMiB, mbps(float64(e.cfg.OriginRate)))
	e.report.add(row{
		fig: "7a", name: name + ", shared store (versitygw)",
		mirror: fmt.Sprintf("%s, last done %s", downloads(shared.downloads), ms(shared.last)),
		ref:    fmt.Sprintf("without the shared store: %s, last done %s", downloads(local.downloads), ms(local.last)),
		ratio:  ratio(float64(shared.last) / float64(local.last)), target: "1 origin download", met: shared.downloads == 1,
	})
	e.report.add(row{
		fig: "7b", name: name + ", no shared store",
		mirror: fmt.Sprintf("%s, last done %s", downloads(local.downloads), ms(local.last)), ref: "—",
		ratio: "—", target: "report", info: true,
	})
	return nil
}

func downloads(n int) string {
	if n == 1 {
		return "1 origin download"
	}
	return fmt.Sprintf("%d origin downloads", n)
}

// replicaFanOut starts the replicas of one variant of figure 7, lets the
// clients ask them for version's archive (each replica having answered
// its VERSION.json first, as Terraform asks for it before the archive),
// and stops them.
func (e *env) replicaFanOut(ctx context.Context, name, version string, extra, env []string) (sharedResult, error) {
	progress("figure 7 (%s): starting %d replicas", name, replicas)
	reps, err := e.startReplicas(ctx, name, replicas, extra, env)
	if err != nil {
		return sharedResult{}, err
	}
	defer stopAll(reps)
	n := e.cfg.SharedClients
	c := newClient(e.pool, n)
	defer closeIdle(c)
	prefix := e.big.Addr + "/" + bigNS + "/" + bigType + "/"
	var urls, warmURLs []string
	for _, m := range reps {
		if _, err := get(ctx, c, m.url+prefix+version+".json"); err != nil {
			return sharedResult{}, err
		}
		urls = append(urls, m.url+zipPath(e.big.Addr, bigNS, bigType, version))
		warmURLs = append(warmURLs, m.url+prefix+"index.json")
	}
	progress("figure 7 (%s): %d clients over %d replicas downloading an uncached archive, origin at %s",
		name, n, replicas, mbps(float64(e.cfg.OriginRate)))
	before := e.big.ArchiveHits(bigNS, bigType, version, platform)
	last, _, err := coldClientsOver(ctx, c, urls, warmURLs, n, int64(e.cfg.ArchiveMiB)<<20,
		e.big.SHA256(bigNS, bigType, version, platform), true)
	if err != nil {
		return sharedResult{}, err
	}
	hits := e.big.ArchiveHits(bigNS, bigType, version, platform) - before
	progress("  last client done after %s; origin archive downloads %d", ms(last), hits)
	return sharedResult{last: last, downloads: hits}, nil
}
