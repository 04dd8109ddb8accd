package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A failing go test's output as go test prints it without -v: the test's
// own messages sit between the log lines of the components it started.
const failingGoTest = `I1128 22:31:35.463628   16048 etcd.go:12] starting etcd
--- FAIL: TestProperty (261.68s)
    --- FAIL: TestProperty/async (174.31s)
        feature_gate.go:170: I1128 22:31:35.463628] Updated featureGates={"A":true}
        runtime.go:252: E1128 22:31:36.530298] UnhandledError: namespaces "kube-system" not found
        property_test.go:771: scenario 7: 64 preemption attempts, 12 pods removed
        --- FAIL: TestProperty/async/seed_7 (35.00s)
            property_test.go:774: scenario 7 (replay with SEED=7): 2 violations:
                pod g1-0 deleted by the scheduler
                pod g1-1 deleted by the scheduler
            controller.go:127: I1128 22:31:36.172412] Starting legacy_token_tracking_controller
                a continuation of a log line
        --- PASS: TestProperty/async/seed_8 (30.00s)
FAIL
FAIL	k8s.io/kubernetes/test/integration/scheduler/preemption/disruptionpolicy	262.001s
ok  	k8s.io/kubernetes/pkg/scheduler	3.2s
`

// TestTestlogKeepsTheFailuresOwnMessages: when a go test fails, make test
// keeps its whole output and gathers the failed tests and the lines the tests
// wrote themselves (multi-line messages whole), not the components' logs; a
// passing command adds nothing.
func TestTestlogKeepsTheFailuresOwnMessages(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "input.txt")
	require.NoError(t, os.WriteFile(input, []byte(failingGoTest), 0o644))
	lib := "source hack/lib/testlog.sh\ntestlog::reset\n"

	out, err := bashLib(t, dir, lib+`testlog::run 1.37-kubernetes-unit cat "$1"
test -e "${TESTLOG_FAILURES}" && echo "failures recorded for a passing command"
testlog::print_failures`, input)
	require.NoError(t, err, out)
	require.NotContains(t, out, "failures recorded")
	require.NotContains(t, out, "the failed tests and their messages")

	out, err = bashLib(t, dir, lib+`rc=0
testlog::run 1.37-kubernetes-integration bash -c 'cat "$1"; exit 3' - "$1" >/dev/null || rc=$?
echo "status ${rc}"
testlog::print_failures 2>&1`, input)
	require.NoError(t, err, out)
	require.Contains(t, out, "status 3")
	failures := out[strings.Index(out, "the failed tests and their messages"):]
	for _, want := range []string{
		"=== 1.37-kubernetes-integration failed (exit 3; whole output: ",
		"--- FAIL: TestProperty/async/seed_7 (35.00s)",
		"property_test.go:774: scenario 7 (replay with SEED=7): 2 violations:",
		"                pod g1-0 deleted by the scheduler\n                pod g1-1 deleted by the scheduler\n",
		"property_test.go:771: scenario 7: 64 preemption attempts",
		"FAIL\tk8s.io/kubernetes/test/integration/scheduler/preemption/disruptionpolicy",
	} {
		require.Contains(t, failures, want)
	}
	for _, unwanted := range []string{"UnhandledError", "featureGates", "legacy_token", "a continuation of a log line", "seed_8", "starting etcd", "ok  \t"} {
		require.NotContains(t, failures, unwanted)
	}
	kept, err := os.ReadFile(filepath.Join(dir, "test-logs", "1.37-kubernetes-integration.log"))
	require.NoError(t, err)
	require.Equal(t, failingGoTest, string(kept))
}
