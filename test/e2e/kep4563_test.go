package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"kube-guard/test/e2e/framework"
)

// TestKEP4563ControllerDrivesRequests: kube-controller-manager acts on an
// EvictionRequest (upstream v1.37 only stores it): it makes one Eviction for
// the pod, named pod-1-<pod name> and owned by the request, with the
// participants as labels, activates the pod's own responder first, and
// reports on the request (observedGeneration, Failed=False
// AwaitingEviction). A second request for the same pod joins that Eviction
// instead of making another one.
func TestKEP4563ControllerDrivesRequests(t *testing.T) {
	c := setup(t)
	ctx := context.Background()
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep4563")
	spec := framework.PodSpec("", resource.Quantity{})
	spec.EvictionResponders = []corev1.EvictionResponder{{Name: neverAnswers, Priority: ptr.To[int32](10000)}}
	pod := c.CreatePod(t, ns, "target", nil, spec)
	createEvictionRequest(t, c.Cluster, pod, "drain-target")

	var ev *lifecyclev1alpha1.Eviction
	c.Poll(t, "kube-controller-manager to make the pod's Eviction and report on the request", func(ctx context.Context) (bool, error) {
		var err error
		if ev, err = evictionOf(ctx, c.Cluster, pod); err != nil || ev == nil {
			return false, err
		}
		er, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).Get(ctx, "drain-target", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		failed := meta.FindStatusCondition(er.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed))
		// The Eviction's responder states are a write of their own: wait for
		// the first one to be there too, not only the request's report.
		state, _ := responderOf(ev, neverAnswers)
		return ptr.Deref(er.Status.ObservedGeneration, 0) == er.Generation && failed != nil &&
			failed.Status == metav1.ConditionFalse && failed.Reason == string(lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction) &&
			state != "", nil
	})
	require.Equal(t, "pod-1-target", ev.Name)
	require.Len(t, ev.OwnerReferences, 1)
	require.Equal(t, "drain-target", ev.OwnerReferences[0].Name)
	require.Equal(t, "requester", ev.Labels["e2e.kube-guard.io/drain"])
	require.Equal(t, "responder", ev.Labels[neverAnswers])
	require.Equal(t, "responder", ev.Labels[lifecyclev1alpha1.EvictionResponderImperativeEviction])
	state, own := responderOf(ev, neverAnswers)
	require.Equal(t, lifecyclev1alpha1.ResponderStateActive, state, "the pod's own responder goes first")
	require.NotNil(t, own.StartTime)
	state, _ = responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
	require.Equal(t, lifecyclev1alpha1.ResponderStateInactive, state)

	_, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).Create(ctx, &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "autoscale-target"},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
			Requester: "autoscaler.e2e.kube-guard.io/scale-down",
			Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.Poll(t, "the second request to join the Eviction", func(ctx context.Context) (bool, error) {
		joined, err := c.Client.LifecycleV1alpha1().Evictions(ns).Get(ctx, ev.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(joined.OwnerReferences) == 2 && len(joined.Status.Requesters) == 2, nil
	})
	list, err := c.Client.LifecycleV1alpha1().Evictions(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "one Eviction per pod")
}

// requireEvictionRequestAPI skips a test on a cluster whose apiserver runs
// with the EvictionRequestAPI gate off, or has no such gate (a release line
// older than KEP-4563's API).
func requireEvictionRequestAPI(t *testing.T, c *framework.Cluster) {
	t.Helper()
	switch evictionRequestGate(t, c) {
	case gateUnknown:
		t.Skip("the cluster's kube-apiserver has no EvictionRequestAPI gate: its release line does not carry KEP-4563")
	case gateOff:
		t.Skip("the cluster runs with EvictionRequestAPI off")
	}
}

type gateState int

const (
	gateUnknown gateState = iota
	gateOff
	gateOn
)

// evictionRequestGate reads the EvictionRequestAPI gate from the
// kube-apiserver's kubernetes_feature_enabled metric: on, off, or unknown
// (no such series: the release line has no such gate).
func evictionRequestGate(t *testing.T, c *framework.Cluster) gateState {
	t.Helper()
	metrics, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="EvictionRequestAPI"[^}]*\} ([01])$`).FindSubmatch(metrics)
	switch {
	case m == nil:
		return gateUnknown
	case string(m[1]) == "1":
		return gateOn
	default:
		return gateOff
	}
}

// evictionOf returns the Eviction that kube-controller-manager made for a
// pod, or nil.
func evictionOf(ctx context.Context, c *framework.Cluster, pod *corev1.Pod) (*lifecyclev1alpha1.Eviction, error) {
	list, err := c.Client.LifecycleV1alpha1().Evictions(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if target := list.Items[i].Spec.Target.Pod; target != nil && target.UID == pod.UID {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

func responderOf(ev *lifecyclev1alpha1.Eviction, name string) (lifecyclev1alpha1.ResponderStateType, lifecyclev1alpha1.ResponderStatus) {
	var state lifecyclev1alpha1.ResponderStateType
	for _, tr := range ev.Status.TargetResponders {
		if tr.Name == name {
			state = tr.State
		}
	}
	for _, rs := range ev.Status.Responders {
		if rs.Name == name {
			return state, rs
		}
	}
	return state, lifecyclev1alpha1.ResponderStatus{}
}

func createEvictionRequest(t *testing.T, c *framework.Cluster, pod *corev1.Pod, name string) {
	t.Helper()
	_, err := c.Client.LifecycleV1alpha1().EvictionRequests(pod.Namespace).Create(context.Background(), &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
			Requester: "e2e.kube-guard.io/drain",
			Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func waitRequestTargetEvicted(t *testing.T, c *framework.Cluster, ns, name string) {
	t.Helper()
	c.Poll(t, "EvictionRequest "+name+" to report TargetEvicted", func(ctx context.Context) (bool, error) {
		er, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(er.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)), nil
	})
}

// requestBlockedByBudget makes pods a and b (label app=guarded) in ns, a
// PodDisruptionBudget "pdb" that allows no disruption of them, and the
// EvictionRequest drain-a for a, and waits until the imperative responder
// reports that the budget refused its eviction. It returns a and a recorder
// of the pods, started before the request.
func requestBlockedByBudget(t *testing.T, c *framework.Cluster, ns string) (*corev1.Pod, *framework.PodRecorder) {
	t.Helper()
	labels := map[string]string{"app": "guarded"}
	a := c.CreatePod(t, ns, "a", labels, framework.PodSpec("", resource.Quantity{}))
	c.CreatePod(t, ns, "b", labels, framework.PodSpec("", resource.Quantity{}))
	c.WaitPodRunningReady(t, ns, "a")
	c.WaitPodRunningReady(t, ns, "b")
	c.PDB(t, ns, "pdb", "guarded", 2, nil)
	c.WaitPDB(t, ns, "pdb", "no disruption allowed", func(s policyv1.PodDisruptionBudgetStatus) bool {
		return s.CurrentHealthy == 2 && s.DisruptionsAllowed == 0
	})
	recorder := c.RecordPods(t, ns, "app=guarded")

	createEvictionRequest(t, c, a, "drain-a")
	c.Poll(t, "the imperative responder to report a refused eviction", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c, a)
		if err != nil || ev == nil {
			return false, err
		}
		state, rs := responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
		return state == lifecyclev1alpha1.ResponderStateActive && strings.Contains(ptr.Deref(rs.Message, ""), "disruption budget"), nil
	})
	return a, recorder
}

// allowOneDisruption lowers the minimum of requestBlockedByBudget's budget to
// one of its two pods.
func allowOneDisruption(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	pdb, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "pdb", metav1.GetOptions{})
	require.NoError(t, err)
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(1))
	_, err = c.Client.PolicyV1().PodDisruptionBudgets(ns).Update(context.Background(), pdb, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// TestKEP4563DefaultResponderRespectsTheBudget: kube-controller-manager's
// evictionrequest-controller and imperative eviction responder evict a pod
// named by an EvictionRequest through the eviction API: while the pod's
// PodDisruptionBudget allows nothing, no pod goes and the responder says why;
// once the budget allows one disruption, the pod is evicted (the eviction
// API's DisruptionTarget condition) and the request reports TargetEvicted.
func TestKEP4563DefaultResponderRespectsTheBudget(t *testing.T) {
	c := setup(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep4563-budget")
	_, recorder := requestBlockedByBudget(t, c.Cluster, ns)
	require.Empty(t, recorder.DeletedPods(), "pods deleted while the budget allowed nothing")
	require.Empty(t, recorder.EvictedPods(), "pods evicted while the budget allowed nothing")

	allowOneDisruption(t, c.Cluster, ns)

	waitRequestTargetEvicted(t, c.Cluster, ns, "drain-a")
	require.Equal(t, []string{"a"}, recorder.EvictedPods(), "evicted through the eviction API")
	_, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "b", metav1.GetOptions{})
	require.NoError(t, err, "the pod nobody asked to evict is still there")
}

// TestKEP4563BlockedRequestEndsWhenWithdrawn: a request whose eviction a
// PodDisruptionBudget blocks ends when its requester withdraws it (KEP-4563:
// the Eviction is canceled once every requester's intent is Withdrawn): the
// imperative responder is Canceled, the Eviction and the request report
// Failed at the request's current generation, and no pod is evicted or
// deleted, not even once the budget allows it. This is how the
// descheduler's TTL ends a blocked request.
func TestKEP4563BlockedRequestEndsWhenWithdrawn(t *testing.T) {
	c := setup(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep4563-withdrawn")
	a, recorder := requestBlockedByBudget(t, c.Cluster, ns)

	requests := c.Client.LifecycleV1alpha1().EvictionRequests(ns)
	var generation int64
	c.Poll(t, "the request to be withdrawn", func(ctx context.Context) (bool, error) {
		er, err := requests.Get(ctx, "drain-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		er.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
		updated, err := requests.Update(ctx, er, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		generation = updated.Generation
		return true, nil
	})
	c.Poll(t, "the Eviction to be canceled", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, a)
		if err != nil || ev == nil {
			return false, err
		}
		state, _ := responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
		return state == lifecyclev1alpha1.ResponderStateCanceled &&
			meta.IsStatusConditionTrue(ev.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)), nil
	})
	c.Poll(t, "the withdrawn request to report Failed at its generation", func(ctx context.Context) (bool, error) {
		er, err := requests.Get(ctx, "drain-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ptr.Deref(er.Status.ObservedGeneration, 0) == generation &&
			meta.IsStatusConditionTrue(er.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)), nil
	})

	// The budget allows a disruption now: nothing asks any more, so the
	// responder does not try again. A later request for the other pod,
	// evicted once the budget allows it, shows the responder at work.
	allowOneDisruption(t, c.Cluster, ns)
	b, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "b", metav1.GetOptions{})
	require.NoError(t, err)
	createEvictionRequest(t, c.Cluster, b, "drain-b")
	waitRequestTargetEvicted(t, c.Cluster, ns, "drain-b")
	require.Equal(t, []string{"b"}, recorder.EvictedPods(), "only the pod still asked for is evicted")
	_, err = c.Client.CoreV1().Pods(ns).Get(context.Background(), "a", metav1.GetOptions{})
	require.NoError(t, err, "the pod whose request was withdrawn is still there")
	ev, err := evictionOf(context.Background(), c.Cluster, a)
	require.NoError(t, err)
	require.NotNil(t, ev)
	require.True(t, meta.IsStatusConditionTrue(ev.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)), "the canceled Eviction stays failed")
}

// holdFinalizer keeps an evicted pod terminating until the test releases
// it, as a kubelet holds it for its grace period: kube-controller-manager
// ends the Active responder's turn when the pod is gone, so without the hold
// the default responder may be Interrupted before it reports completion.
const holdFinalizer = "e2e.kube-guard.io/hold"

// releasePod removes holdFinalizer from a pod, if it is still there.
func releasePod(ctx context.Context, c *framework.Cluster, ns, name string) error {
	_, err := c.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// TestKEP4563PodResponderGoesFirst: a pod that declares its own eviction
// responder gets it activated first; the default responder waits until it
// declines, then evicts, stays Active while the pod terminates (held by a
// finalizer, as a kubelet holds it for its grace period) and completes once
// the pod is gone: both end Completed.
func TestKEP4563PodResponderGoesFirst(t *testing.T) {
	c := setup(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep4563-responder")
	const migrator = "migrator.e2e.kube-guard.io/live-migration"
	spec := framework.PodSpec("", resource.Quantity{})
	spec.EvictionResponders = []corev1.EvictionResponder{{Name: migrator, Priority: ptr.To[int32](10000)}}
	vm, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Labels: map[string]string{"app": "vm"}, Finalizers: []string{holdFinalizer}},
		Spec:       spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := releasePod(context.Background(), c.Cluster, ns, "vm"); err != nil {
			t.Errorf("releasing vm: %v", err)
		}
	})
	c.WaitPodRunningReady(t, ns, "vm")

	createEvictionRequest(t, c.Cluster, vm, "drain-vm")
	var ev *lifecyclev1alpha1.Eviction
	c.Poll(t, migrator+" to be the active responder", func(ctx context.Context) (bool, error) {
		var err error
		ev, err = evictionOf(ctx, c.Cluster, vm)
		if err != nil || ev == nil {
			return false, err
		}
		state, _ := responderOf(ev, migrator)
		return state == lifecyclev1alpha1.ResponderStateActive, nil
	})
	state, _ := responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
	require.Equal(t, lifecyclev1alpha1.ResponderStateInactive, state, "the default responder waits for the pod's own")

	// Decline: report completion without evicting.
	c.Poll(t, migrator+" to decline", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, vm)
		if err != nil || ev == nil {
			return false, err
		}
		for i := range ev.Status.Responders {
			if ev.Status.Responders[i].Name == migrator {
				now := metav1.Now()
				ev.Status.Responders[i].HeartbeatTime = &now
				ev.Status.Responders[i].CompletionTime = &now
				ev.Status.Responders[i].Message = ptr.To("no capacity to migrate to")
			}
		}
		_, err = c.Client.LifecycleV1alpha1().Evictions(ns).UpdateStatus(ctx, ev, metav1.UpdateOptions{})
		return err == nil, nil
	})
	// The default responder evicts (the pod is held terminating) and waits
	// for the pod to go. Where a kubelet runs the pod (kind), the kubelet
	// stops the evicted pod's containers and the pod reaches a terminal
	// phase while the finalizer still holds it: the responder is done then
	// too. Any other end before the pod goes is a failure. Judged by the pod
	// itself, not by the responder's message, which each release line's
	// controllers word their own way.
	c.Poll(t, "the default responder to evict and wait", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, vm)
		if err != nil || ev == nil {
			return false, err
		}
		state, status := responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
		message := ptr.Deref(status.Message, "")
		if state == lifecyclev1alpha1.ResponderStateInactive {
			return false, nil
		}
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "vm", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		switch state {
		case lifecyclev1alpha1.ResponderStateActive:
			return pod.DeletionTimestamp != nil, nil
		case lifecyclev1alpha1.ResponderStateCompleted:
			if pod.DeletionTimestamp != nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
				return true, nil
			}
		}
		return false, fmt.Errorf("the default responder ended %s before the pod went: %q", state, message)
	})
	pod, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "vm", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, pod.DeletionTimestamp, "the default responder did not evict the pod")
	require.NoError(t, releasePod(context.Background(), c.Cluster, ns, "vm"))
	waitRequestTargetEvicted(t, c.Cluster, ns, "drain-vm")
	ev, err = evictionOf(context.Background(), c.Cluster, vm)
	require.NoError(t, err)
	require.NotNil(t, ev)
	state, _ = responderOf(ev, migrator)
	require.Equal(t, lifecyclev1alpha1.ResponderStateCompleted, state)
	state, _ = responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
	require.Equal(t, lifecyclev1alpha1.ResponderStateCompleted, state)
}

// TestEvictionRequestAPINotServedGateOff runs on `make e2e`'s second
// cluster, whose components have the EvictionRequestAPI gate on but whose
// kube-apiserver does not serve lifecycle.k8s.io/v1alpha1 (no
// --runtime-config): the descheduler's evacuation mode refuses to start
// and names the flag that is missing, and kube-controller-manager does not
// start the two EvictionRequest controllers, saying why, and keeps running.
func TestEvictionRequestAPINotServedGateOff(t *testing.T) {
	c := setup(t)
	c.RequireGate(t, false)
	gate := evictionRequestGate(t, c.Cluster)
	if gate == gateUnknown {
		t.Skip("the cluster's kube-apiserver has no EvictionRequestAPI gate: its release line does not carry KEP-4563")
	}
	require.Equal(t, gateOn, gate, "this test wants EvictionRequestAPI on (make e2e's second cluster)")
	_, err := c.Client.Discovery().ServerResourcesForGroupVersion(lifecyclev1alpha1.SchemeGroupVersion.String())
	require.True(t, apierrors.IsNotFound(err), "this test wants %s not served (make e2e's second cluster): %v", lifecyclev1alpha1.SchemeGroupVersion, err)

	ns := c.Namespace(t, "kep4563-not-served")
	// A release line without a descheduler line skips this part only.
	t.Run("the descheduler refuses its evacuation mode", func(t *testing.T) {
		d := c.startDescheduler(t, evictionRequestPolicy(ns, ""), 0, evictionRequestGates)
		require.Error(t, d.exit(t), "the descheduler started its evacuation mode without the API")
		require.Contains(t, d.log.String(), "kube-apiserver does not serve evictionrequests.lifecycle.k8s.io")
		require.Contains(t, d.log.String(), "--runtime-config=lifecycle.k8s.io/v1alpha1=true")
	})

	logs := os.Getenv("KUBE_GUARD_E2E_COMPONENT_LOGS")
	require.NotEmpty(t, logs, "KUBE_GUARD_E2E_COMPONENT_LOGS must name the directory of kube-controller-manager.log (make e2e sets it): this test checks what kube-controller-manager says")
	kcmLog := filepath.Join(logs, "kube-controller-manager.log")
	for _, controller := range []string{"evictionrequest-controller", "imperative-eviction-responder-controller"} {
		c.Poll(t, "kube-controller-manager to say why "+controller+" does not start", func(context.Context) (bool, error) {
			b, err := os.ReadFile(kcmLog)
			if err != nil {
				return false, err
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "Not starting controller: the EvictionRequestAPI feature gate is enabled but kube-apiserver does not serve the API") &&
					strings.Contains(line, `controller="`+controller+`"`) {
					return true, nil
				}
			}
			return false, nil
		})
	}
	// kube-controller-manager goes on: its other controllers act, e.g. the
	// disruption controller fills a budget's status.
	c.PDB(t, ns, "pdb", "nothing", 1, nil)
	c.WaitPDB(t, ns, "pdb", "the disruption controller to observe the budget", func(s policyv1.PodDisruptionBudgetStatus) bool {
		return s.ObservedGeneration >= 1
	})
}
