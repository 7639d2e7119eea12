#!/bin/sh
# Installs what the benchmark harness (go run ./bench) needs besides Go on
# Debian or Ubuntu: nginx (the reference server) and wrk (a second load
# generator for figure 2), and versitygw (the S3-compatible server of
# figure 7) into .ci/bin, where the harness and the tests look for it.
# Figure 6 also needs terraform on PATH.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
else
	SUDO=
fi
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends nginx-light wrk
# The package may start a system nginx on port 80; the harness runs its
# own, so stop that one if the package started it.
if command -v service >/dev/null 2>&1; then
	$SUDO service nginx stop >/dev/null 2>&1 || true
fi
nginx -v
# Pinned, as in .ci/run (keep in step with internal/testrig/s3test.Version and
# versitygwVersion in bench/shared.go); needs Go, not root.
versitygw_version=v1.8.0
if ! [ -x .ci/bin/versitygw ]; then
	GOBIN="$PWD/.ci/bin" go install "github.com/versity/versitygw/cmd/versitygw@$versitygw_version"
fi
command -v terraform >/dev/null 2>&1 || echo "terraform not found: figure 6 needs it (or run with -only 1,2,3,4,5,7)"
