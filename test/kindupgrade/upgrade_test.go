package kindupgrade

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const threshold int32 = 1000

// TestUpgradeFromUpstreamAndBack: a platform team adopts kube-guard on a
// running cluster of upstream's control plane and leaves it again
// (docs/kind.md, "From upstream to kube-guard and back"):
//
//  1. upstream: Deployments, a StatefulSet, a DaemonSet, budgets and
//     PriorityClasses run;
//  2. kube-guard, every gate at its default: nothing restarts, no
//     ReplicaSet or ControllerRevision is made, a threshold is dropped as
//     upstream drops an alpha field whose gate is off;
//  3. DisruptionPolicyInPriorityClass on: PriorityClasses with thresholds,
//     and pods of them that carry it;
//  4. upstream again: everything reads and runs; a PriorityClass and a pod
//     are written;
//  5. kube-guard with the gate on again: what upstream only read keeps its
//     threshold, what it wrote lost it (docs/kep-3280.md, "Downgrade").
//
// At every step the workloads' pods are the same pods with the same
// containers, the ReplicaSets and ControllerRevisions the same objects, and
// the cluster schedules and runs new pods of every kind of workload.
func TestUpgradeFromUpstreamAndBack(t *testing.T) {
	c := setup(t)
	ctx := context.Background()
	upstream := plane{version: c.upstream}
	forkDefault := plane{version: c.fork}
	forkGateOn := plane{version: c.fork, gates: gate + "=true"}

	// 1. Upstream's control plane, as kubeadm made it.
	step := "1 upstream " + c.upstream
	manifests := c.manifests(t)
	for _, comp := range components {
		waitFor(t, comp+" to run upstream's image without gates", swapTimeout, func(ctx context.Context) (bool, error) {
			pod, err := c.mirror(ctx, comp)
			if err != nil {
				return false, err
			}
			return runs(pod, "registry.k8s.io/"+comp+":"+c.upstream, "", nil), nil
		})
	}
	v, err := c.client.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, c.upstream, v.GitVersion, step)

	require.False(t, c.schedulerMayEvict(t), "%s: upstream's kube-scheduler role", step)
	c.createNamespace(t, workloadNS)
	c.priorityClass(t, "adoption-low", 100, nil)
	c.priorityClass(t, "adoption-high", 10000, nil)
	c.deployment(t, workloadNS, "web", "adoption-low", 3)
	c.pdb(t, workloadNS, "web", 2)
	c.deployment(t, workloadNS, "api", "adoption-high", 2)
	c.pdb(t, workloadNS, "api", 1)
	c.statefulSet(t, workloadNS, "db", 2)
	c.pdb(t, workloadNS, "db", 1)
	c.daemonSet(t, workloadNS, "agent")
	c.settled(t, workloadNS)
	c.deleteNamespace(t, c.probe(t, 1, ""))
	before := c.snapshot(t)
	t.Logf("%s: %d workload pods, %d ReplicaSets and ControllerRevisions", step, len(before.pods), len(before.owned))

	// 2. kube-guard, every gate at its default.
	step = "2 kube-guard " + c.fork + ", gates at their defaults"
	c.replace(t, step, manifests, upstream, forkDefault, before)
	c.deleteNamespace(t, c.probe(t, 2, ""))
	c.requireSame(t, step, before)
	require.False(t, c.schedulerMayEvict(t), "%s: the kube-scheduler role is upstream's with the gate off", step)
	// The gate off: the field is dropped, as upstream drops its alpha fields.
	dropped := c.priorityClass(t, "adoption-dropped", 500, new(threshold))
	require.Nil(t, dropped.AllowDisruptionByPriorityGreaterThanOrEqual, "%s: the gate is off, the threshold is dropped", step)
	require.NoError(t, c.client.SchedulingV1().PriorityClasses().Delete(ctx, dropped.Name, metav1.DeleteOptions{}))

	// 3. The gate on, thresholds set.
	step = "3 kube-guard, " + gate + " on"
	c.replace(t, step, manifests, forkDefault, forkGateOn, before)
	require.True(t, c.schedulerMayEvict(t), "%s: the gate gives kube-scheduler pods/eviction", step)
	for _, name := range []string{"adoption-guarded", "adoption-guarded-edited"} {
		pc := c.priorityClass(t, name, 500, new(threshold))
		require.Equal(t, threshold, *pc.AllowDisruptionByPriorityGreaterThanOrEqual, "%s: PriorityClass %s", step, name)
	}
	c.deployment(t, workloadNS, "guarded", "adoption-guarded", 3)
	c.pdb(t, workloadNS, "guarded", 2)
	c.settled(t, workloadNS)
	// A pod that waits at a scheduling gate (KEP-3838): no scheduler and no
	// kubelet writes it, so upstream only reads it.
	gated := c.podTemplate("guarded-gated", "adoption-guarded")
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kube-guard.io/adoption"}}
	_, err = c.client.CoreV1().Pods(workloadNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "guarded-gated", Labels: gated.Labels}, Spec: gated.Spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	guarded := c.guardedPods(t)
	require.Len(t, guarded, 4)
	for _, p := range guarded {
		require.Equal(t, threshold, *p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual, "%s: pod %s carries its class's threshold", step, p.Name)
	}
	probe := c.probe(t, 3, "adoption-guarded")
	c.requireProbeThreshold(t, step, probe, new(threshold))
	c.deleteNamespace(t, probe)
	before = c.snapshot(t) // with the guarded Deployment's pods and ReplicaSet
	// Who wrote which pod from here on: the resourceVersions of the guarded
	// pods at the end of this step, when upstream first serves them, and at
	// the end of upstream's step.
	atStep3 := resourceVersions(guarded)

	// 4. Back to upstream: it reads everything, knows no threshold, and what
	// it writes loses it.
	step = "4 upstream " + c.upstream + " again"
	c.replace(t, step, manifests, forkGateOn, upstream, before)
	// Upstream's reconciliation of the bootstrap roles adds what they lack
	// and never removes a rule: the gate's rules stay (docs/kep-3280.md).
	require.True(t, c.schedulerMayEvict(t), "%s: upstream keeps the rules the gate added", step)
	for _, name := range []string{"adoption-guarded", "adoption-guarded-edited"} {
		pc, err := c.client.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, pc.AllowDisruptionByPriorityGreaterThanOrEqual, "%s: upstream shows no threshold", step)
		require.Equal(t, int32(500), pc.Value, "%s: PriorityClass %s keeps every other field", step, name)
	}
	now := c.guardedPods(t)
	require.Len(t, now, 4)
	upstreamFirst := resourceVersions(now)
	for _, p := range now {
		require.Nil(t, p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual, "%s: upstream shows no threshold", step)
		require.Equal(t, "adoption-guarded", p.Spec.PriorityClassName, step)
		require.Equal(t, int32(500), *p.Spec.Priority, step)
	}
	// Upstream writes a PriorityClass and a pod: they lose the threshold.
	require.Nil(t, c.labelPriorityClass(t, "adoption-guarded-edited"), step)
	labelled := guarded[0].Name
	if labelled == "guarded-gated" {
		labelled = guarded[1].Name
	}
	c.labelPod(t, workloadNS, labelled)
	c.deleteNamespace(t, c.probe(t, 4, "adoption-guarded"))
	// A pod that did not change since step 3 was only read by upstream; one
	// that changed while upstream served it (the label, a kubelet's status)
	// was written by upstream. A pod written while the kube-apiserver was
	// being replaced, by one or the other, is neither.
	upstreamLast := resourceVersions(c.guardedPods(t))
	unwritten, byUpstream := map[string]bool{}, map[string]bool{}
	for name, rv := range upstreamLast {
		unwritten[name] = rv == atStep3[name]
		byUpstream[name] = rv != upstreamFirst[name]
	}
	require.True(t, byUpstream[labelled], "%s: the labelled pod was written", step)
	require.True(t, unwritten["guarded-gated"], "%s: nothing wrote the gated pod", step)

	// 5. kube-guard with the gate on again.
	step = "5 kube-guard, " + gate + " on, again"
	c.replace(t, step, manifests, upstream, forkGateOn, before)
	kept, err := c.client.SchedulingV1().PriorityClasses().Get(ctx, "adoption-guarded", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, kept.AllowDisruptionByPriorityGreaterThanOrEqual, "%s: a PriorityClass upstream only read keeps its threshold", step)
	require.Equal(t, threshold, *kept.AllowDisruptionByPriorityGreaterThanOrEqual, step)
	lost, err := c.client.SchedulingV1().PriorityClasses().Get(ctx, "adoption-guarded-edited", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, lost.AllowDisruptionByPriorityGreaterThanOrEqual, "%s: a PriorityClass upstream wrote lost its threshold", step)
	require.Equal(t, "true", lost.Labels["adoption-written"], step)
	for _, p := range c.guardedPods(t) {
		got := p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual
		switch {
		case byUpstream[p.Name]:
			require.Nil(t, got, "%s: pod %s, written by upstream, lost its threshold", step, p.Name)
			t.Logf("%s: pod %s, written by upstream, lost its threshold", step, p.Name)
		case unwritten[p.Name]:
			require.NotNil(t, got, "%s: pod %s, only read by upstream, keeps its threshold", step, p.Name)
			require.Equal(t, threshold, *got, step)
			t.Logf("%s: pod %s, only read by upstream, kept its threshold", step, p.Name)
		default:
			shown := "none"
			if got != nil {
				shown = fmt.Sprint(*got)
			}
			t.Logf("%s: pod %s, written while the kube-apiserver was replaced: threshold %s", step, p.Name, shown)
		}
	}
	probe = c.probe(t, 5, "adoption-guarded")
	c.requireProbeThreshold(t, step, probe, new(threshold))
	c.deleteNamespace(t, probe)
	c.requireSame(t, step, before)
	// The gated pod, which kept its threshold, is let go: it is scheduled and
	// runs with it.
	_, err = c.client.CoreV1().Pods(workloadNS).Patch(ctx, "guarded-gated", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitFor(t, "the gated pod to run", settleTimeout, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods(workloadNS).Get(ctx, "guarded-gated", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual == nil || *p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual != threshold {
			return false, fmt.Errorf("%s: the gated pod lost its threshold: %v", step, p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual)
		}
		return p.Status.Phase == corev1.PodRunning, nil
	})
}

// replace changes the control plane from one plane to another (switchTo),
// waits for its kube-controller-manager and kube-scheduler to hold their
// leases and for the workloads to be up to date, and requires them to be
// as in before.
func (c *cluster) replace(t *testing.T, step string, manifests map[string][]byte, from, to plane, before snapshot) {
	t.Helper()
	since := time.Now()
	c.switchTo(t, manifests, from, to)
	c.leaders(t, since)
	c.settled(t, workloadNS)
	c.requireSame(t, step, before)
}

// schedulerMayEvict reports whether the bootstrap ClusterRole
// system:kube-scheduler lets kube-scheduler create pods/eviction, the rule
// DisruptionPolicyInPriorityClass adds to it.
func (c *cluster) schedulerMayEvict(t *testing.T) bool {
	t.Helper()
	role, err := c.client.RbacV1().ClusterRoles().Get(context.Background(), "system:kube-scheduler", metav1.GetOptions{})
	require.NoError(t, err)
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, "pods/eviction") && slices.Contains(r.Verbs, "create") {
			return true
		}
	}
	return false
}

// resourceVersions maps the pods' names to their resourceVersions.
func resourceVersions(pods []corev1.Pod) map[string]string {
	rvs := map[string]string{}
	for _, p := range pods {
		rvs[p.Name] = p.ResourceVersion
	}
	return rvs
}

// guardedPods are the pods of the guarded Deployment and the gated pod.
func (c *cluster) guardedPods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods, err := c.client.CoreV1().Pods(workloadNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app in (guarded, guarded-gated)"})
	require.NoError(t, err)
	return pods.Items
}

// requireProbeThreshold checks the threshold of the probe Deployment's pod.
func (c *cluster) requireProbeThreshold(t *testing.T, step, ns string, want *int32) {
	t.Helper()
	pods, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=probe"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, step)
	require.Equal(t, want, pods.Items[0].Spec.AllowDisruptionByPriorityGreaterThanOrEqual, "%s: a new pod of a guarded class", step)
}

// writtenLabel is the merge patch by which the test writes an object.
var writtenLabel = []byte(`{"metadata":{"labels":{"adoption-written":"true"}}}`)

// labelPriorityClass writes a PriorityClass (a label) through the
// kube-apiserver now running and returns the threshold its answer shows.
func (c *cluster) labelPriorityClass(t *testing.T, name string) *int32 {
	t.Helper()
	pc, err := c.client.SchedulingV1().PriorityClasses().Patch(context.Background(), name, types.MergePatchType, writtenLabel, metav1.PatchOptions{})
	require.NoError(t, err)
	return pc.AllowDisruptionByPriorityGreaterThanOrEqual
}

// labelPod writes a pod (a label) through the kube-apiserver now running.
func (c *cluster) labelPod(t *testing.T, ns, name string) {
	t.Helper()
	_, err := c.client.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, writtenLabel, metav1.PatchOptions{})
	require.NoError(t, err)
}
