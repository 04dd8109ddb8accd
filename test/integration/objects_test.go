package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// createNamespace creates namespace ns and its default ServiceAccount, which
// ServiceAccount admission needs for pods: no service account controller
// runs in these tests.
func createNamespace(ctx context.Context, t testing.TB, c kubernetes.Interface, ns string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// createReadyNode creates a node with capacity (and as much allocatable),
// Ready, without the not-ready taint that admission puts on new nodes (no
// node lifecycle controller runs to take it off): three requests, create,
// status update, update.
func createReadyNode(ctx context.Context, t testing.TB, c kubernetes.Interface, name string, capacity corev1.ResourceList) *corev1.Node {
	t.Helper()
	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	node, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	node.Spec.Taints = nil
	node, err = c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	return node
}
