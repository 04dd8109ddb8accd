package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kube-guard/test/e2e/framework"
)

const (
	protectedValue = 100
	threshold      = 1000
)

// guarded is a Deployment of one full-node pod per node in a protected
// PriorityClass, with a PDB of minAvailable = the number of nodes.
type guarded struct {
	ns, deployment, pdb string
	pods                []string
}

// fillWithGuarded creates the guarded workload and waits until every replica
// is Ready and the PDB allows no disruption.
func (c *cluster) fillWithGuarded(t *testing.T, ns string) *guarded {
	t.Helper()
	ctx := context.Background()
	pc := c.PriorityClass(t, "protected", protectedValue, new(int32(threshold)))
	replicas := int32(len(c.Nodes))
	c.Deployment(t, ns, "guarded", replicas, framework.PodSpec(pc, c.NodeCPU))
	c.PDB(t, ns, "guarded", "guarded", len(c.Nodes), nil)
	c.WaitPDB(t, ns, "guarded", "all replicas healthy, no disruption allowed", func(s policyv1.PodDisruptionBudgetStatus) bool {
		return s.CurrentHealthy == replicas && s.DisruptionsAllowed == 0
	})
	g := &guarded{ns: ns, deployment: "guarded", pdb: "guarded", pods: c.guardedPods(t, ns)}
	require.Len(t, g.pods, len(c.Nodes))
	// The PriorityClass's threshold was copied into the pods by Priority admission (gate on only).
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, g.pods[0], metav1.GetOptions{})
	require.NoError(t, err)
	if c.GateOn {
		require.NotNil(t, pod.Spec.AllowDisruptionByPriorityGreaterThanOrEqual)
		require.EqualValues(t, threshold, *pod.Spec.AllowDisruptionByPriorityGreaterThanOrEqual)
	}
	return g
}

// guardedPods lists the names of the guarded pods that are not being deleted.
func (c *cluster) guardedPods(t *testing.T, ns string) []string {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=guarded"})
	require.NoError(t, err)
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// waitScheduledPreemptor waits until the preemptor is bound and running.
func (c *cluster) waitScheduledPreemptor(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	return c.WaitPodRunningReady(t, ns, name)
}

// TestKEP3280ProtectedPreemption: with DisruptionPolicyInPriorityClass on, a
// preemptor below the PriorityClass threshold never breaks a PDB that allows
// no disruption; with budget, victims are evicted; at the threshold, the
// preemptor preempts.
func TestKEP3280ProtectedPreemption(t *testing.T) {
	c := setup(t)
	c.RequireGate(t, true)
	ctx := context.Background()
	ns := c.Namespace(t, "kep3280")
	g := c.fillWithGuarded(t, ns)
	below := c.PriorityClass(t, "below-threshold", 500, nil)
	atThreshold := c.PriorityClass(t, "at-threshold", threshold, nil)

	t.Run("below the threshold the preemptor stays pending and nothing is disrupted", func(t *testing.T) {
		rec := c.RecordPods(t, ns, "app=guarded")
		c.CreatePod(t, ns, "preemptor-below", nil, framework.PodSpec(below, c.NodeCPU))
		wantPDB := fmt.Sprintf("%s/%s", ns, g.pdb)
		wantThreshold := fmt.Sprintf("allowDisruptionByPriorityGreaterThanOrEqual=%d", threshold)
		var event string
		c.Poll(t, "a PreemptionBlocked event on the preemptor", func(ctx context.Context) (bool, error) {
			evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=preemptor-below"})
			if err != nil {
				return false, err
			}
			for _, ev := range evs.Items {
				if ev.Reason == "PreemptionBlocked" && ev.Type == corev1.EventTypeWarning {
					event = ev.Message
					return true, nil
				}
			}
			return false, nil
		})
		t.Logf("event: %s", event)
		require.Contains(t, event, wantPDB)
		require.Contains(t, event, wantThreshold)
		var msg string
		c.Poll(t, "the preemptor's PodScheduled=False condition naming the protected PDB", func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "preemptor-below", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
					msg = cond.Message
					return strings.Contains(cond.Message, "protected PodDisruptionBudget"), nil
				}
			}
			return false, nil
		})
		t.Logf("PodScheduled: %s", msg)
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "preemptor-below", metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, p.Spec.NodeName, "the preemptor below the threshold is not bound")
		require.Empty(t, p.Status.NominatedNodeName, "no node is nominated for it")
		require.Equal(t, g.pods, c.guardedPods(t, ns), "no guarded pod was replaced")
		require.Empty(t, rec.PreemptedPods(), "no guarded pod got a DisruptionTarget condition")
		require.Empty(t, rec.EvictedPods(), "no guarded pod got the eviction API's DisruptionTarget condition")
		require.Empty(t, rec.DeletedPods(), "no guarded pod was deleted")
		c.WaitPDB(t, ns, g.pdb, "still all healthy", func(s policyv1.PodDisruptionBudgetStatus) bool {
			return s.CurrentHealthy == int32(len(c.Nodes))
		})
		c.DeletePod(t, ns, "preemptor-below")
	})

	t.Run("below the threshold a victim is evicted when the budget allows it", func(t *testing.T) {
		n := len(c.Nodes)
		c.setMinAvailable(t, ns, g.pdb, n-1)
		c.WaitPDB(t, ns, g.pdb, "one disruption allowed", func(s policyv1.PodDisruptionBudgetStatus) bool {
			return s.DisruptionsAllowed == 1
		})
		disrupted := c.recordDisruptedPods(t, ns, g.pdb)
		rec := c.RecordPods(t, ns, "app=guarded")
		c.CreatePod(t, ns, "preemptor-budget", nil, framework.PodSpec(below, c.NodeCPU))
		c.waitScheduledPreemptor(t, ns, "preemptor-budget")
		c.Poll(t, "the victim to be gone", func(ctx context.Context) (bool, error) {
			return len(rec.DeletedPods()) == 1, nil
		})
		victims := rec.DeletedPods()
		require.Equal(t, victims, rec.EvictedFirstPods(), "the victim carried the eviction API's DisruptionTarget condition (EvictionByEvictionAPI) before any the scheduler set")
		// Once the eviction is admitted, the scheduler gives the condition
		// the reason of a preemption, unless the victim is already gone.
		require.Subset(t, victims, rec.PreemptedPods(), "the scheduler gave the reason of a preemption only to the victim it evicted")
		c.Poll(t, "the PDB's status.disruptedPods to have listed the victim (it went through the eviction API)", func(ctx context.Context) (bool, error) {
			return disrupted.seen(victims[0]), nil
		})
		// Free the node again for the next case: the Deployment's replacement takes it.
		c.DeletePod(t, ns, "preemptor-budget")
		c.setMinAvailable(t, ns, g.pdb, n)
		c.WaitPDB(t, ns, g.pdb, "all healthy again, no disruption allowed", func(s policyv1.PodDisruptionBudgetStatus) bool {
			return s.CurrentHealthy == int32(n) && s.DisruptionsAllowed == 0
		})
	})

	t.Run("at the threshold the preemptor preempts", func(t *testing.T) {
		rec := c.RecordPods(t, ns, "app=guarded")
		c.CreatePod(t, ns, "preemptor-at", nil, framework.PodSpec(atThreshold, c.NodeCPU))
		pod := c.waitScheduledPreemptor(t, ns, "preemptor-at")
		c.Poll(t, "a victim to be gone", func(ctx context.Context) (bool, error) {
			return len(rec.DeletedPods()) >= 1, nil
		})
		require.Subset(t, rec.PreemptedPods(), rec.DeletedPods(), "every victim carried DisruptionTarget PreemptionByScheduler")
		t.Logf("preemptor on %s, victims %v", pod.Spec.NodeName, rec.DeletedPods())
	})
}

// TestKEP3280GateOff: with DisruptionPolicyInPriorityClass off, preemption is
// upstream's: a preemptor below the threshold preempts and breaks the PDB.
func TestKEP3280GateOff(t *testing.T) {
	c := setup(t)
	c.RequireGate(t, false)
	ns := c.Namespace(t, "kep3280-off")
	g := c.fillWithGuarded(t, ns)
	below := c.PriorityClass(t, "below-threshold", 500, nil)
	rec := c.RecordPods(t, ns, "app=guarded")
	c.CreatePod(t, ns, "preemptor-below", nil, framework.PodSpec(below, c.NodeCPU))
	c.waitScheduledPreemptor(t, ns, "preemptor-below")
	c.Poll(t, "the victim to be gone", func(ctx context.Context) (bool, error) {
		return len(rec.DeletedPods()) == 1, nil
	})
	require.Equal(t, rec.DeletedPods(), rec.PreemptedPods(), "the victim carried DisruptionTarget PreemptionByScheduler")
	n := int32(len(c.Nodes))
	c.WaitPDB(t, ns, g.pdb, "the budget is violated: fewer healthy pods than minAvailable", func(s policyv1.PodDisruptionBudgetStatus) bool {
		return s.CurrentHealthy == n-1 && s.DesiredHealthy == n && s.DisruptionsAllowed == 0
	})
}

func (c *cluster) setMinAvailable(t *testing.T, ns, name string, n int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"minAvailable":%d}}`, n)
	_, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// disruptedRecorder remembers every pod a PDB's status.disruptedPods listed
// (the eviction API adds a pod there; a plain DELETE does not).
type disruptedRecorder struct {
	seenCh chan string
	seenM  map[string]bool
}

func (c *cluster) recordDisruptedPods(t *testing.T, ns, name string) *disruptedRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	require.NoError(t, err)
	r := &disruptedRecorder{seenCh: make(chan string, 100), seenM: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*policyv1.PodDisruptionBudget); ok {
				for pod := range p.Status.DisruptedPods {
					r.seenCh <- pod
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop() })
	return r
}

func (r *disruptedRecorder) seen(pod string) bool {
	for {
		select {
		case p := <-r.seenCh:
			r.seenM[p] = true
		default:
			return r.seenM[pod]
		}
	}
}

// TestKEP3280SchedulerRole: the bootstrap role of kube-scheduler may create
// pods/eviction with the gate on, and may never
// write a PodDisruptionBudget's status: only the disruption controller and
// the eviction subresource write it. `kubectl auth can-i update
// poddisruptionbudgets/status --as=system:kube-scheduler` asks the same.
func TestKEP3280SchedulerRole(t *testing.T) {
	c := setup(t)
	ctx := context.Background()
	canI := func(verb, resource, subresource string) bool {
		t.Helper()
		sar, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:kube-scheduler",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: map[string]string{"pods": "", "poddisruptionbudgets": "policy"}[resource], Resource: resource, Subresource: subresource, Namespace: "default"},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return sar.Status.Allowed
	}
	require.False(t, canI("update", "poddisruptionbudgets", "status"), "system:kube-scheduler may update poddisruptionbudgets/status")
	require.False(t, canI("patch", "poddisruptionbudgets", "status"), "system:kube-scheduler may patch poddisruptionbudgets/status")
	if c.GateOn {
		// With the gate off the role is upstream's on a new cluster; a
		// cluster that ran with the gate on keeps the rule (the
		// reconciliation of bootstrap roles never removes one).
		require.True(t, canI("create", "pods", "eviction"), "system:kube-scheduler may not create pods/eviction with the gate on")
	}
}
