package kind

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.Equal(t, "DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true,EvictionReadsBudgetsFromStorage=true,EvictionWritesBudgetsToStorage=true,EvictionListsBudgetsWhileReadingPod=true", out)
	out, err = gates("yes")
	require.Error(t, err, out)
	require.Contains(t, out, "EVICTION_FAST_PATH=yes is neither 0 nor 1")
}
