// Package e2e holds the end-to-end suite: Go tests with client-go against a
// local cluster of the patched control plane with KWOK nodes (`make e2e`).
//
// The tests run only when KUBE_GUARD_E2E_KUBECONFIG names the kubeconfig of
// a running local cluster (`make e2e` brings one up, sets it and brings the
// cluster down again); otherwise they are skipped, so `go test ./...` passes
// without a cluster. KUBE_GUARD_E2E_SCHEDULER_URL is the scheduler's secure
// address, whose /metrics the local cluster serves without credentials.
//
// The tests find out from the kube-apiserver's /metrics
// (kubernetes_feature_enabled) whether DisruptionPolicyInPriorityClass is on,
// and skip what does not apply: `make e2e` runs the suite once with the gate
// on and once, on a restarted cluster, with it off.
package e2e
