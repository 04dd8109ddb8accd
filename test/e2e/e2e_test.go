package e2e

import (
	"fmt"
	"os"
	"testing"

	"kube-guard/test/e2e/framework"
)

// cluster is the cluster under test with this package's own helpers
// (descheduler, evacuator, KEP scenarios) on top of the framework's.
type cluster struct {
	*framework.Cluster
}

// setup skips the test, saying why, without a configured cluster.
func setup(t *testing.T) *cluster {
	t.Helper()
	return &cluster{framework.Setup(t)}
}

// setupDescheduler is setup for the descheduler's tests: it skips them
// first, before they make anything, without a descheduler binary
// (KUBE_GUARD_E2E_DESCHEDULER; a release line without a descheduler line has none).
func setupDescheduler(t *testing.T) *cluster {
	t.Helper()
	c := setup(t)
	if os.Getenv("KUBE_GUARD_E2E_DESCHEDULER") == "" {
		t.Skip("KUBE_GUARD_E2E_DESCHEDULER is not set: no descheduler binary (make e2e sets it where the release line has a descheduler)")
	}
	return c
}

// TestMain says once, before the tests skip one by one, why nothing runs
// without a cluster.
func TestMain(m *testing.M) {
	if reason := framework.SkipReason(); reason != "" {
		fmt.Fprintf(os.Stderr, "e2e: every test skips: %s\n", reason)
	}
	os.Exit(m.Run())
}
