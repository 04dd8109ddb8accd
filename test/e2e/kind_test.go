package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kube-guard/test/e2e/framework"
)

// TestKindNodesRunTheFork: on real kubelets (`make kind-e2e`), every node,
// the control plane's included, is Ready and runs this fork's kubelet with
// the fork's gates on (the kubelet's own /metrics, through the apiserver's
// node proxy), as do the apiserver and the scheduler. Skips on KWOK nodes,
// which have no kubelet.
func TestKindNodesRunTheFork(t *testing.T) {
	c := setup(t)
	if !c.RealKubelets {
		t.Skip("KWOK nodes have no kubelet (make kind-e2e runs this)")
	}
	ctx := context.Background()
	server, err := c.Client.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Regexp(t, `^v1\.\d+\.\d+-guard\.\d+`, server.GitVersion, "the apiserver is the fork's")

	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Greater(t, len(nodes.Items), len(c.Nodes), "a control-plane node besides the workers")
	gateOn := regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="` + framework.GateName + `",stage="[A-Z]*"\} 1$`)
	for _, n := range nodes.Items {
		require.Equal(t, corev1.ConditionTrue, nodeCondition(&n, corev1.NodeReady), "node %s is Ready", n.Name)
		require.Equal(t, server.GitVersion, n.Status.NodeInfo.KubeletVersion, "node %s runs the fork's kubelet", n.Name)
		metrics, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.Name, "proxy", "metrics").DoRaw(ctx)
		require.NoError(t, err, "the kubelet's /metrics on %s", n.Name)
		require.Regexp(t, gateOn, string(metrics), "the kubelet of %s runs with %s on", n.Name, framework.GateName)
	}
	require.Regexp(t, gateOn, c.SchedulerMetrics(t), "the scheduler runs with %s on", framework.GateName)
	require.True(t, c.GateOn, "the apiserver runs with %s on", framework.GateName)
	t.Logf("%d nodes Ready, kubelets %s, gate on in kubelets, scheduler and apiserver", len(nodes.Items),
		strings.TrimSpace(server.GitVersion))
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == typ {
			return cond.Status
		}
	}
	return ""
}
