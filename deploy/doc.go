// Package deploy holds tfmirror's deployment assets: the container image
// (internal/image, assembled by cmd/tfmirror-image from the release's
// binaries), Kubernetes manifests (kubernetes/base, a
// kustomize base, and kubernetes/shared-store, an overlay of it), a Helm
// chart (helm/tfmirror), a systemd unit (systemd/), and a Grafana dashboard
// and Prometheus alert rules (monitoring/).
//
// Its tests check the assets with the tools' own code and against the
// program they deploy: the chart is rendered by Helm's engine and linted by
// Helm's linter, the kustomizations are built by kustomize's krusty, and
// every object they render is decoded strictly (unknown fields and kinds
// fail) into its Go API type: Kubernetes' own, the Prometheus Operator's
// for ServiceMonitor and PrometheusRule, Gateway API's for HTTPRoute. Every
// TFMIRROR_* variable and flag they set is a real flag of `tfmirror serve`
// whose value it accepts (the binary is built with the release's own
// build command, .goreleaser.yaml's, and run), every file flag points into a mounted Secret or
// ConfigMap (a secret one with a mode no other user reads), no setting of
// a configuration file is shadowed by the image's environment, and probes,
// ports, selectors and security contexts agree. Every metric in the
// dashboard and alerts is one the metrics package registers, with the
// labels they use. It does not test Docker, Kubernetes or Prometheus themselves.
//
// This directory is a Go module of its own (github.com/tfmirror/tfmirror/deploy),
// not part of the main one, because of those tools' libraries: Helm,
// kustomize, k8s.io/api and client-go, the Prometheus Operator's and Gateway
// API's types bring about a hundred modules into go.sum (and some eight
// hundred packages into the test's build). In the main module they would
// be in its go.sum and module graph, downloaded by every build of the
// binary, and, through minimal version selection, would raise
// versions of libraries the tfmirror binary is built with (today x/net,
// x/sys and x/text) for the sake of a test. Here they only build
// these tests; the binary keeps the main module's versions. The module
// uses the main one through a replace directive (../) for the metrics
// package. A go.work is not used: in workspace mode the main module's
// builds would see this module's versions too.
//
// So `go test ./...` at the root does not run these tests: the README's
// test command and .ci/run run `go test -race ./...` here as well.
package deploy
