package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kube-guard/test/e2e/framework"
)

// TestKEP3838MutableSchedulingDirectives: the scheduling directives of a
// gated pod may only be narrowed; a non-gated pod's not at all; once the
// gate is removed the pod lands on the one matching node (KWOK's, or a kind
// worker: both carry a node index, a zone and a type label).
func TestKEP3838MutableSchedulingDirectives(t *testing.T) {
	c := setup(t)
	ctx := context.Background()
	ns := c.Namespace(t, "kep3838")
	target := len(c.Nodes) - 1
	targetIndex := fmt.Sprint(target)
	zone := fmt.Sprintf("zone-%d", target%2)
	var targetNode string
	for _, n := range c.Nodes {
		if n.Labels[framework.NodeIndexLabel] == targetIndex {
			targetNode = n.Name
		}
	}
	require.NotEmpty(t, targetNode, "a node labelled %s=%s", framework.NodeIndexLabel, targetIndex)

	spec := framework.PodSpec("", resource.Quantity{})
	spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kube-guard.io/e2e"}}
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
		}}},
	}}
	c.CreatePod(t, ns, "gated", nil, spec)

	pods := c.Client.CoreV1().Pods(ns)
	update := func(name string, mutate func(*corev1.Pod)) error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		mutate(p)
		_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
		return err
	}
	requireInvalid := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
		t.Logf("rejected: %v", err)
	}

	t.Run("adding a nodeSelector to a gated pod is accepted", func(t *testing.T) {
		require.NoError(t, update("gated", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{framework.NodeIndexLabel: targetIndex}
		}))
	})
	t.Run("narrowing a nodeAffinity term of a gated pod is accepted", func(t *testing.T) {
		require.NoError(t, update("gated", func(p *corev1.Pod) {
			term := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{
				Key: "type", Operator: corev1.NodeSelectorOpIn, Values: []string{c.Nodes[0].Labels["type"]}})
		}))
	})
	t.Run("relaxing a nodeAffinity term of a gated pod is rejected", func(t *testing.T) {
		requireInvalid(t, update("gated", func(p *corev1.Pod) {
			term := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
			term.MatchExpressions = term.MatchExpressions[1:]
		}))
	})
	t.Run("changing a nodeAffinity term of a gated pod is rejected", func(t *testing.T) {
		requireInvalid(t, update("gated", func(p *corev1.Pod) {
			term := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
			term.MatchExpressions[0].Values = []string{"zone-0", "zone-1"}
		}))
	})
	t.Run("changing a nodeSelector entry of a gated pod is rejected", func(t *testing.T) {
		requireInvalid(t, update("gated", func(p *corev1.Pod) {
			p.Spec.NodeSelector[framework.NodeIndexLabel] = fmt.Sprint((target + 1) % 10)
		}))
	})
	t.Run("adding a nodeSelector to a pod without gates is rejected", func(t *testing.T) {
		c.CreatePod(t, ns, "ungated", nil, framework.PodSpec("", resource.Quantity{}))
		c.WaitPodRunningReady(t, ns, "ungated")
		requireInvalid(t, update("ungated", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{framework.NodeIndexLabel: targetIndex}
		}))
	})
	t.Run("without the gate the pod is scheduled onto the matching node only", func(t *testing.T) {
		p, err := pods.Get(ctx, "gated", metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, p.Spec.NodeName, "a gated pod is not scheduled")
		require.NoError(t, update("gated", func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }))
		p = c.WaitPodRunningReady(t, ns, "gated")
		require.Equal(t, targetNode, p.Spec.NodeName)
	})
}
