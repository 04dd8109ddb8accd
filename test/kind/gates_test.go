package kind

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kube-guard/test/util/pins"
)

// TestGatesRuntimeConfig: the local and kind clusters serve KEP-4563's API
// group exactly when their --feature-gates turn EvictionRequestAPI on, read
// as the components read them.
func TestGatesRuntimeConfig(t *testing.T) {
	h := newHarness(t)
	const served = "lifecycle.k8s.io/v1alpha1=true"
	for gates, want := range map[string]string{
		"":                                       "",
		"EvictionRequestAPI=true":                served,
		"EvictionRequestAPI=True":                served,
		"EvictionRequestAPI=1":                   served,
		" EvictionRequestAPI = t ":               served,
		"A=true,EvictionRequestAPI=true,B=false": served,
		"EvictionRequestAPI=false":               "",
		"EvictionRequestAPI=0":                   "",
		"NotEvictionRequestAPI=true":             "",
		"EvictionRequestAPIX=true":               "",
		"EvictionRequestAPI=yes":                 "",
		"AllAlpha=true":                          served,
		"AllAlpha=true,EvictionRequestAPI=false": "",
		"AllAlpha=false,EvictionRequestAPI=true": served,
		"DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true": served,
	} {
		cmd := exec.Command("bash", "-c", `source hack/lib/init.sh && source hack/lib/gates.sh && gates::runtime_config "$1"`, "-", gates)
		cmd.Dir = h.root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%q: %s", gates, out)
		require.Equal(t, want, strings.TrimSpace(string(out)), "gates %q", gates)
	}
}

// TestGatesDefault: the clusters turn on the KEPs' gates only; the eviction
// fast path is one opt-in knob, EVICTION_FAST_PATH=1, and any other value is
// refused.
func TestGatesDefault(t *testing.T) {
	h := newHarness(t)
	gates := func(knob string) (string, error) {
		cmd := exec.Command("bash", "-c", `source hack/lib/init.sh && source hack/lib/gates.sh && echo "${GATES_DEFAULT}"`)
		cmd.Dir = h.root
		cmd.Env = append(os.Environ(), "EVICTION_FAST_PATH="+knob)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := gates("")
	require.NoError(t, err, out)
	require.Equal(t, "DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true", out)
	out, err = gates("0")
	require.NoError(t, err, out)
	require.Equal(t, "DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true", out)
	out, err = gates("1")
	require.NoError(t, err, out)
	require.Equal(t, "DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true,EvictionReadsBudgetsFromStorage=true,EvictionWritesBudgetsToStorage=true,EvictionListsBudgetsWhileReadingPod=true,EvictionWritesConditionWithDeletion=true", out)
	out, err = gates("yes")
	require.Error(t, err, out)
	require.Contains(t, out, "EVICTION_FAST_PATH=yes is neither 0 nor 1")
}

// TestGatesOfEachLine: on every release line (LINE=<line>), the clusters
// turn on the gates its line.env names (CLUSTER_GATES), and
// EVICTION_FAST_PATH=1 adds CLUSTER_GATES_FAST_PATH, or is refused, saying
// so, on a line that has no fast path.
func TestGatesOfEachLine(t *testing.T) {
	h := newHarness(t)
	lines, err := pins.Lines(h.root, "kubernetes")
	require.NoError(t, err)
	require.NotEmpty(t, lines)
	gates := func(line, knob string) (string, error) {
		cmd := exec.Command("bash", "-c", `source hack/lib/init.sh && source hack/lib/gates.sh && echo "${GATES_DEFAULT}"`)
		cmd.Dir = h.root
		cmd.Env = append(os.Environ(), "LINE="+line, "EVICTION_FAST_PATH="+knob)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	for _, line := range lines {
		env := filepath.Join(h.root, "patches", "kubernetes", line, "line.env")
		out, err := exec.Command("bash", "-c", `set -o nounset; source "$1"; printf '%s\n%s\n' "${CLUSTER_GATES}" "${CLUSTER_GATES_FAST_PATH}"`, "-", env).Output()
		require.NoError(t, err, "line %s: %s sets CLUSTER_GATES and CLUSTER_GATES_FAST_PATH", line, env)
		f := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		require.Len(t, f, 2)
		topics, err := os.ReadFile(filepath.Join(h.root, "patches", "kubernetes", line, "topics"))
		require.NoError(t, err)
		if slices.Contains(strings.Fields(string(topics)), "kep-3280") {
			require.Contains(t, f[0], "DisruptionPolicyInPriorityClass=true", "line %s carries KEP-3280", line)
		} else {
			require.NotContains(t, f[0], "DisruptionPolicyInPriorityClass", "line %s does not carry KEP-3280: its components would refuse the gate", line)
		}

		got, err := gates(line, "0")
		require.NoError(t, err, got)
		require.Equal(t, f[0], got, "line %s", line)
		got, err = gates(line, "1")
		if f[1] == "" {
			require.Error(t, err, got)
			require.Contains(t, got, "EVICTION_FAST_PATH=1: release line "+line+" carries no eviction fast path")
		} else {
			require.NoError(t, err, got)
			require.Equal(t, f[0]+","+f[1], got, "line %s", line)
		}
	}
}
