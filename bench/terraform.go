package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Figure 6: `terraform init` of a configuration with several providers,
// directly from an origin with injected latency, through the mirror cold
// and warm, and from nginx serving the directory `terraform providers
// mirror` wrote for the same providers (the static mirror teams would
// otherwise run).
func (e *env) terraformInit(ctx context.Context) error {
	tf, err := exec.LookPath(e.cfg.Terraform)
	if err != nil {
		return fmt.Errorf("terraform not found (%v); pass -terraform or skip figure 6 with -only 1,2,3,4,5", err)
	}
	if out, err := exec.Command(tf, "version").Output(); err == nil {
		e.report.machine.terraform = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	e.tf.SetLatency(e.cfg.TFLatency)
	defer e.tf.SetLatency(0)
	originCA, err := e.tf.CAFile(e.dir)
	if err != nil {
		return err
	}
	direct := filepath.Join(e.dir, "direct.tfrc")
	// The host block replaces service discovery for registry.terraform.io
	// with the fake origin's address.
	if err := os.WriteFile(direct, []byte(fmt.Sprintf(`host %q {
  services = {
    "providers.v1" = %q
  }
}
provider_installation {
  direct {}
}
`, tfHost, e.tf.URL+"/v1/providers/")), 0o644); err != nil {
		return err
	}
	viaMirror := filepath.Join(e.dir, "mirror.tfrc")
	if err := os.WriteFile(viaMirror, []byte(fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.mirror.url)), 0o644); err != nil {
		return err
	}
	viaStatic := filepath.Join(e.dir, "static.tfrc")
	if err := os.WriteFile(viaStatic, []byte(fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.nginx.url)), 0o644); err != nil {
		return err
	}
	c := newClient(e.pool, 1)
	defer closeIdle(c)
	var directT, coldT, warmT, staticT []time.Duration
	for run := range e.cfg.TFRuns {
		version := fmt.Sprintf("1.0.%d", run)
		// The static mirror is written by terraform itself, from the
		// origin, into the directory nginx serves; not timed.
		if _, err := e.terraformRun(ctx, tf, direct, originCA, version, "providers", "mirror", "-platform="+tfPlatform(), e.staticRoot); err != nil {
			return fmt.Errorf("writing the static mirror: %w", err)
		}
		for _, v := range []struct {
			name, conf, ca string
			out            *[]time.Duration
		}{
			{"direct", direct, originCA, &directT},
			{"cold mirror", viaMirror, e.caFile, &coldT},
			{"warm mirror", viaMirror, e.caFile, &warmT},
			{"static mirror (nginx)", viaStatic, e.caFile, &staticT},
		} {
			if v.name == "warm mirror" {
				for i := range e.cfg.TFProviders {
					typ := fmt.Sprintf("tfp%d", i)
					if err := e.waitCached(ctx, c, fmt.Sprintf("%s/%s/%s/terraform-provider-%s_%s_%s_%s.zip",
						tfHost, tfNS, typ, typ, version, runtime.GOOS, runtime.GOARCH)); err != nil {
						return err
					}
				}
			}
			d, err := e.terraformRun(ctx, tf, v.conf, v.ca, version, "init", "-no-color", "-input=false")
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			progress("figure 6: run %d: terraform init %s: %s", run+1, v.name, ms(d))
			*v.out = append(*v.out, d)
		}
	}
	med := func(d []time.Duration) time.Duration { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
	dm, cm, wm, sm := med(directT), med(coldT), med(warmT), med(staticT)
	name := fmt.Sprintf("terraform init, %d providers of %d MiB, origin latency %s (median of %d)",
		e.cfg.TFProviders, e.cfg.TFArchive, e.cfg.TFLatency, e.cfg.TFRuns)
	e.report.add(row{
		fig: "6a", name: name + ", warm mirror",
		mirror: ms(wm), ref: "direct " + ms(dm), ratio: ratio(float64(wm) / float64(dm)),
		target: "< 1x (faster)", met: wm < dm,
	})
	e.report.add(row{
		fig: "6b", name: name + ", cold mirror",
		mirror: ms(cm), ref: "direct " + ms(dm), ratio: ratio(float64(cm) / float64(dm)),
		target: "overhead (report)", met: true, info: true,
	})
	e.report.add(row{
		fig: "6c", name: name + ", warm mirror against a static mirror",
		mirror: ms(wm), ref: "nginx serving `terraform providers mirror` output " + ms(sm), ratio: ratio(float64(wm) / float64(sm)),
		target: "≤ 1.1x", met: float64(wm) <= 1.1*float64(sm),
	})
	return nil
}

// tfPlatform is the platform terraform runs on, as os_arch.
func tfPlatform() string { return runtime.GOOS + "_" + runtime.GOARCH }

// terraformRun runs terraform with args (`init`, or `providers mirror
// DIR`) in a new directory whose configuration requires every benchmark
// provider at version.
func (e *env) terraformRun(ctx context.Context, tf, cliConf, caFile, version string, args ...string) (time.Duration, error) {
	dir, err := os.MkdirTemp(e.dir, "tf-")
	if err != nil {
		return 0, err
	}
	var b strings.Builder
	b.WriteString("terraform {\n  required_providers {\n")
	for i := range e.cfg.TFProviders {
		fmt.Fprintf(&b, "    tfp%d = {\n      source  = \"%s/tfp%d\"\n      version = %q\n    }\n", i, tfNS, i, version)
	}
	b.WriteString("  }\n}\n")
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(b.String()), 0o644); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tf, args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"TF_CLI_CONFIG_FILE=" + cliConf,
		"SSL_CERT_FILE=" + caFile,
		"CHECKPOINT_DISABLE=1",
		"TF_IN_AUTOMATION=1",
	}
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("terraform %s: %v\n%s", args[0], err, out)
	}
	// Only a real installation counts.
	if args[0] == "init" {
		if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", tfHost, tfNS, "tfp0", version)); err != nil {
			return 0, fmt.Errorf("terraform init did not install tfp0 %s: %v\n%s", version, err, out)
		}
	}
	return d, nil
}
