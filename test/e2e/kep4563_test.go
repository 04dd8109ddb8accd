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

// TestKEP4563EvictionRequestAPIServed: with the EvictionRequestAPI gate on,
// `make local-up` also enables the lifecycle.k8s.io/v1alpha1 group
// (--runtime-config), so EvictionRequests are served and validated:
// a request for a pod is stored, one from a reserved requester domain is
// refused. The tests below show kube-controller-manager acting on them.
func TestKEP4563EvictionRequestAPIServed(t *testing.T) {
	c := setup(t)
	ctx := context.Background()
	requireEvictionRequestAPI(t, c.Cluster)

	resources, err := c.Client.Discovery().ServerResourcesForGroupVersion(lifecyclev1alpha1.SchemeGroupVersion.String())
	require.NoError(t, err, "lifecycle.k8s.io/v1alpha1 is served")
	served := map[string]bool{}
	for _, r := range resources.APIResources {
		served[r.Name] = true
	}
	require.True(t, served["evictionrequests"], "evictionrequests in %v", served)
	require.True(t, served["evictionrequests/status"], "evictionrequests/status in %v", served)

	ns := c.Namespace(t, "kep4563")
	pod := c.CreatePod(t, ns, "target", nil, framework.PodSpec("", resource.Quantity{}))
	requests := c.Client.LifecycleV1alpha1().EvictionRequests(ns)
	request := func(name, requester string) *lifecyclev1alpha1.EvictionRequest {
		return &lifecyclev1alpha1.EvictionRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: lifecyclev1alpha1.EvictionRequestSpec{
				Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
				Requester: requester,
				Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
			},
		}
	}
	created, err := requests.Create(ctx, request("by-e2e", "e2e.kube-guard.io/test"), metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := requests.Get(ctx, created.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, pod.UID, got.Spec.Target.Pod.UID)

	_, err = requests.Create(ctx, request("reserved", "descheduler.k8s.io/test"), metav1.CreateOptions{})
	require.Error(t, err, "a requester under *.k8s.io is reserved")
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	t.Logf("rejected: %v", err)
}

// requireEvictionRequestAPI skips a test on a cluster whose apiserver runs
// with the EvictionRequestAPI gate off.
func requireEvictionRequestAPI(t *testing.T, c *framework.Cluster) {
	t.Helper()
	metrics, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	if !regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="EvictionRequestAPI"[^}]*\} 1$`).Match(metrics) {
		t.Skip("the cluster runs with EvictionRequestAPI off")
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

	createEvictionRequest(t, c.Cluster, a, "drain-a")
	c.Poll(t, "the imperative responder to report a refused eviction", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, a)
		if err != nil || ev == nil {
			return false, err
		}
		state, rs := responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
		return state == lifecyclev1alpha1.ResponderStateActive && strings.Contains(ptr.Deref(rs.Message, ""), "disruption budget"), nil
	})
	require.Empty(t, recorder.DeletedPods(), "pods deleted while the budget allowed nothing")
	require.Empty(t, recorder.EvictedPods(), "pods evicted while the budget allowed nothing")

	pdb, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "pdb", metav1.GetOptions{})
	require.NoError(t, err)
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(1))
	_, err = c.Client.PolicyV1().PodDisruptionBudgets(ns).Update(context.Background(), pdb, metav1.UpdateOptions{})
	require.NoError(t, err)

	waitRequestTargetEvicted(t, c.Cluster, ns, "drain-a")
	require.Equal(t, []string{"a"}, recorder.EvictedPods(), "evicted through the eviction API")
	_, err = c.Client.CoreV1().Pods(ns).Get(context.Background(), "b", metav1.GetOptions{})
	require.NoError(t, err, "the pod nobody asked to evict is still there")
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
// declines, then evicts, and both end Completed.
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
	// The default responder evicts (the pod is held terminating) and reports
	// completion; then the pod may go.
	c.Poll(t, "the default responder to complete", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, vm)
		if err != nil || ev == nil {
			return false, err
		}
		state, _ := responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
		if state == lifecyclev1alpha1.ResponderStateInterrupted || state == lifecyclev1alpha1.ResponderStateCanceled {
			return false, fmt.Errorf("the default responder ended %s", state)
		}
		return state == lifecyclev1alpha1.ResponderStateCompleted, nil
	})
	pod, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "vm", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, pod.DeletionTimestamp, "the default responder completed without evicting the pod")
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
	metrics, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	require.Regexp(t, `(?m)^kubernetes_feature_enabled\{name="EvictionRequestAPI"[^}]*\} 1$`, string(metrics),
		"this test wants EvictionRequestAPI on (make e2e's second cluster)")
	_, err = c.Client.Discovery().ServerResourcesForGroupVersion(lifecyclev1alpha1.SchemeGroupVersion.String())
	require.True(t, apierrors.IsNotFound(err), "this test wants %s not served (make e2e's second cluster): %v", lifecyclev1alpha1.SchemeGroupVersion, err)

	ns := c.Namespace(t, "kep4563-not-served")
	d := c.startDescheduler(t, evictionRequestPolicy(ns, ""), 0, evictionRequestGates)
	require.Error(t, d.exit(t), "the descheduler started its evacuation mode without the API")
	require.Contains(t, d.log.String(), "kube-apiserver does not serve evictionrequests.lifecycle.k8s.io")
	require.Contains(t, d.log.String(), "--runtime-config=lifecycle.k8s.io/v1alpha1=true")

	logs := os.Getenv("KUBE_GUARD_E2E_COMPONENT_LOGS")
	if logs == "" {
		t.Log("KUBE_GUARD_E2E_COMPONENT_LOGS is not set: kube-controller-manager's log is not checked")
		return
	}
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
