package e2e

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kube-guard/test/e2e/framework"
)

// TestKEP4563EvictionRequestAPIServed: with the EvictionRequestAPI gate on,
// `make local-up` also enables the lifecycle.k8s.io/v1alpha1 group
// (--runtime-config), so EvictionRequests are served and validated:
// a request for a pod is stored, one from a reserved requester domain is
// refused. (What acts on them, the controllers of issue 16, is not there yet.)
func TestKEP4563EvictionRequestAPIServed(t *testing.T) {
	c := setup(t)
	ctx := context.Background()
	metrics, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	require.NoError(t, err)
	if !regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="EvictionRequestAPI"[^}]*\} 1$`).Match(metrics) {
		t.Skip("the cluster runs with EvictionRequestAPI off")
	}

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
