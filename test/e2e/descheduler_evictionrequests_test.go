package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const deschedulerRequester = "descheduler.e2e.kube-guard.io/main"

// withResponder makes a pod declare an eviction responder of its own.
func withResponder(name string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.EvictionResponders = append(pod.Spec.EvictionResponders, corev1.EvictionResponder{Name: name, Priority: ptr.To[int32](10000)})
	}
}

// requestsOf returns the EvictionRequests of ns by requester, by target pod name.
func requestsOf(ctx context.Context, c *cluster, ns, requester string) (map[string][]lifecyclev1alpha1.EvictionRequest, error) {
	list, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]lifecyclev1alpha1.EvictionRequest{}
	for _, er := range list.Items {
		if er.Spec.Requester == requester && er.Spec.Target.Pod != nil {
			out[er.Spec.Target.Pod.Name] = append(out[er.Spec.Target.Pod.Name], er)
		}
	}
	return out, nil
}

// TestDeschedulerEvacuationModeEvictionRequests: the descheduler in the
// evacuation mode (evictionRequests) asks for every eviction with one
// EvictionRequest per pod and never evicts itself. kube-controller-manager
// hands a pod that declares its own responder to that responder first (the
// test plays it: it removes the pod, then completes) and evicts a pod that
// declares none through the eviction API. A pod whose eviction another
// requester has in progress is left alone. Once finished, the descheduler
// deletes its requests.
func TestDeschedulerEvacuationModeEvictionRequests(t *testing.T) {
	c := setup(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep1397-evictionrequests")
	const migrator = "migrator.e2e.kube-guard.io/vm"
	const slowResponder = "slow.e2e.kube-guard.io/never-answers"
	vm := c.evacuationPod(t, ns, "vm", "", true, false, withResponder(migrator))
	c.evacuationPod(t, ns, "web", "", true, false)
	busy := c.evacuationPod(t, ns, "busy", "", true, false, withResponder(slowResponder))
	// Another requester's eviction of busy stays in progress: its responder
	// never answers within the test.
	createEvictionRequest(t, c.Cluster, busy, "someone-else")

	policy := deschedulerPolicy(ns, "evictionRequests:\n  requester: "+deschedulerRequester+"\n")
	d := c.startDescheduler(t, policy, time.Second, "--feature-gates=EvictionsInBackground=true,EvictionRequestAPI=true")

	c.Poll(t, "the descheduler to request the evictions of vm and web", func(ctx context.Context) (bool, error) {
		byPod, err := requestsOf(ctx, c, ns, deschedulerRequester)
		if err != nil {
			return false, err
		}
		return len(byPod["vm"]) == 1 && len(byPod["web"]) == 1, nil
	})

	// web has no responder of its own: kube-controller-manager evicts it.
	waitRequestTargetEvicted(t, c.Cluster, ns, requestName(t, c, ns, "web"))

	// vm's own responder goes first; the pod is still there, so nobody
	// called the eviction API for it.
	c.Poll(t, migrator+" to be active", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, vm)
		if err != nil || ev == nil {
			return false, err
		}
		state, _ := responderOf(ev, migrator)
		return state == lifecyclev1alpha1.ResponderStateActive, nil
	})
	_, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "vm", metav1.GetOptions{})
	require.NoError(t, err, "vm is gone before its own responder acted")
	since := time.Now()
	c.waitCycles(t, d, since, 2)

	// Two more cycles did not ask again or ask for busy.
	byPod, err := requestsOf(context.Background(), c, ns, deschedulerRequester)
	require.NoError(t, err)
	require.Len(t, byPod["vm"], 1, "one request for vm")
	require.Empty(t, byPod["busy"], "busy's eviction is in progress by another requester: the descheduler must not ask for it")

	// The migrator moves vm away: it removes the pod and completes.
	require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(context.Background(), "vm", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	c.Poll(t, migrator+" to report completion", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, vm)
		if err != nil || ev == nil {
			return false, err
		}
		if state, _ := responderOf(ev, migrator); state != lifecyclev1alpha1.ResponderStateActive {
			return true, nil // the pod's deletion ended its turn first
		}
		for i := range ev.Status.Responders {
			if ev.Status.Responders[i].Name == migrator {
				now := metav1.Now()
				ev.Status.Responders[i].HeartbeatTime = &now
				ev.Status.Responders[i].CompletionTime = &now
			}
		}
		_, err = c.Client.LifecycleV1alpha1().Evictions(ns).UpdateStatus(ctx, ev, metav1.UpdateOptions{})
		return err == nil, nil
	})

	// Finished requests are deleted by the descheduler; busy's is not its own.
	c.Poll(t, "the descheduler to delete its finished requests", func(ctx context.Context) (bool, error) {
		byPod, err := requestsOf(ctx, c, ns, deschedulerRequester)
		if err != nil {
			return false, err
		}
		return len(byPod) == 0, nil
	})
	_, err = c.Client.LifecycleV1alpha1().EvictionRequests(ns).Get(context.Background(), "someone-else", metav1.GetOptions{})
	require.NoError(t, err, "another requester's request")
	require.Empty(t, d.logLines("Evicted pod"), "the descheduler evicted a pod itself")
	_, err = c.Client.CoreV1().Pods(ns).Get(context.Background(), "web", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "web was evicted: %v", err)
}

// requestName returns the name of the descheduler's request for pod.
func requestName(t *testing.T, c *cluster, ns, pod string) string {
	t.Helper()
	byPod, err := requestsOf(context.Background(), c, ns, deschedulerRequester)
	require.NoError(t, err)
	require.Len(t, byPod[pod], 1)
	return byPod[pod][0].Name
}

// TestDeschedulerEvacuationModeRefusesBadSetups: the evacuation mode without
// its feature gate, or with a reserved requester, stops the descheduler at
// start-up with an error that says what to change.
func TestDeschedulerEvacuationModeRefusesBadSetups(t *testing.T) {
	c := setup(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep1397-evictionrequests-bad")
	for _, tc := range []struct {
		name, requester, gates, want string
	}{
		{"gate off", deschedulerRequester, "EvictionsInBackground=true", "needs the EvictionRequestAPI feature gate"},
		{"reserved requester", "descheduler.sigs.k8s.io/main", "EvictionsInBackground=true,EvictionRequestAPI=true", "are reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := deschedulerPolicy(ns, "evictionRequests:\n  requester: "+tc.requester+"\n")
			d := c.startDescheduler(t, policy, 0, "--feature-gates="+tc.gates)
			require.Error(t, d.exit(t), "the descheduler started with a bad evacuation mode setup")
			require.True(t, strings.Contains(d.log.String(), tc.want), "log does not say %q:\n%s", tc.want, d.log.String())
		})
	}
}
