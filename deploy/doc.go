// Package deploy holds tfmirror's deployment assets, not code: the
// container image (Dockerfile), Kubernetes manifests (kubernetes/, a
// kustomize base), a systemd unit (systemd/), and a Grafana dashboard and
// Prometheus alert rules (monitoring/).
//
// Its tests check the assets against the program they deploy: every
// TFMIRROR_* variable is a real flag of `tfmirror serve`, every metric in
// the dashboard and alerts is one the metrics package registers, and the
// Dockerfile's build command produces a static binary. It does not test
// Docker, Kubernetes or Prometheus themselves.
package deploy
