package kind

import (
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
