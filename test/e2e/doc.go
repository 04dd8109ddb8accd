// Package e2e holds the end-to-end suite: Go tests with client-go against a
// local cluster of the patched control plane with KWOK nodes (`make e2e`).
//
// The tests run only when KUBE_GUARD_E2E_KUBECONFIG names the kubeconfig of
// a running local cluster (`make e2e` brings one up, sets it and brings the
// cluster down again); otherwise they are skipped, so `go test ./...` passes
// without a cluster. KUBE_GUARD_E2E_SCHEDULER_URL is the scheduler's secure
// address, whose /metrics the local cluster serves without credentials.
//
// The helpers live in the importable package test/e2e/framework (Setup,
// Cluster and its methods, metrics); this package adds its scenarios' own.
//
// The tests find out from the kube-apiserver's /metrics
// (kubernetes_feature_enabled) whether DisruptionPolicyInPriorityClass is on,
// and skip what does not apply (RequireGate). Convention: a test that needs
// that gate off has a name ending in GateOff; `make e2e` runs the whole
// suite on a cluster with the gates on, then only the tests matching
// `GateOff$` on a cluster with DisruptionPolicyInPriorityClass off and
// EvictionRequestAPI on without the runtime-config that serves its API (a
// setup the components must refuse or report). A test that skips where its
// phase should run it fails `make e2e`. No list of tests is kept in a
// script. KUBE_GUARD_E2E_COMPONENT_LOGS, when set, is the directory of the
// control plane's logs.
package e2e
