package e2e

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kube-guard/test/e2e/framework"
)

// TestKindNodesRunTheFork: on real kubelets (`make kind-e2e`), every node,
// the control plane's included, is Ready and runs this fork's kubelet of the
// line (KUBE_GUARD_E2E_KUBELET_VERSION: another line's where the line
// borrows it) with the cluster's gates on (KUBE_GUARD_E2E_GATES; the
// kubelet's own /metrics, through the apiserver's node proxy), as does the
// scheduler, and the apiserver is the fork's. Skips on KWOK nodes, which
// have no kubelet.
func TestKindNodesRunTheFork(t *testing.T) {
	c := setup(t)
	if !c.RealKubelets {
		t.Skip("KWOK nodes have no kubelet (make kind-e2e runs this)")
	}
	ctx := context.Background()
	server, err := c.Client.Discovery().ServerVersion()
	require.NoError(t, err)
	// A fork version: vX.Y.Z or a pre-release of it (a preview line's),
	// then -guard.<N>.
	forkVersion := `^v1\.\d+\.\d+(-(alpha|beta|rc)\.\d+)?-guard\.\d+`
	require.Regexp(t, forkVersion, server.GitVersion, "the apiserver is the fork's")
	// The kubelet of the line: the apiserver's release unless the line
	// borrows another line's (make kind-e2e says which it built).
	kubelet := os.Getenv("KUBE_GUARD_E2E_KUBELET_VERSION")
	if kubelet == "" {
		kubelet = server.GitVersion
	}
	require.Regexp(t, forkVersion, kubelet, "the line's kubelet is the fork's")
	// The gates the cluster turns on (make kind-e2e passes them; the KEP-3280
	// gate where it does not say).
	gates := []string{framework.GateName}
	if list, ok := os.LookupEnv("KUBE_GUARD_E2E_GATES"); ok {
		gates = nil
		for _, g := range strings.Split(list, ",") {
			if name, value, _ := strings.Cut(g, "="); name != "" && value == "true" {
				gates = append(gates, name)
			}
		}
	}

	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Greater(t, len(nodes.Items), len(c.Nodes), "a control-plane node besides the workers")
	gateOn := func(gate string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="` + gate + `",stage="[A-Z]*"\} 1$`)
	}
	for _, n := range nodes.Items {
		require.Equal(t, corev1.ConditionTrue, nodeCondition(&n, corev1.NodeReady), "node %s is Ready", n.Name)
		require.Equal(t, kubelet, n.Status.NodeInfo.KubeletVersion, "node %s runs the line's kubelet", n.Name)
		metrics, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.Name, "proxy", "metrics").DoRaw(ctx)
		require.NoError(t, err, "the kubelet's /metrics on %s", n.Name)
		for _, gate := range gates {
			require.Regexp(t, gateOn(gate), string(metrics), "the kubelet of %s runs with %s on", n.Name, gate)
		}
	}
	schedulerMetrics := c.SchedulerMetrics(t)
	for _, gate := range gates {
		require.Regexp(t, gateOn(gate), schedulerMetrics, "the scheduler runs with %s on", gate)
	}
	if slices.Contains(gates, framework.GateName) {
		require.True(t, c.GateOn, "the apiserver runs with %s on", framework.GateName)
	}
	t.Logf("%d nodes Ready, apiserver %s, kubelets %s, gates %v on in kubelets and scheduler", len(nodes.Items),
		strings.TrimSpace(server.GitVersion), kubelet, gates)
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == typ {
			return cond.Status
		}
	}
	return ""
}
