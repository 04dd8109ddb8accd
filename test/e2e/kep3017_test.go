package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kube-guard/test/e2e/framework"
)

// TestKEP3017UnhealthyPodEvictionPolicy: a PDB whose budget is not healthy
// (one of three running pods is not Ready, minAvailable 3) refuses the
// eviction of the unready pod with IfHealthyBudget and without a policy, and
// allows it with AlwaysAllow; healthy pods stay guarded in every case.
//
// On KWOK nodes a stage keeps the pod Running and not Ready; on real
// kubelets (kind) the pod's own readiness probe fails: agnhost's gRPC health
// server, told through the apiserver's pod proxy to stop serving.
func TestKEP3017UnhealthyPodEvictionPolicy(t *testing.T) {
	c := setup(t)
	ns := c.Namespace(t, "kep3017")
	ifHealthy, alwaysAllow := policyv1.IfHealthyBudget, policyv1.AlwaysAllow
	for _, tc := range []struct {
		name          string
		policy        *policyv1.UnhealthyPodEvictionPolicyType
		evictsUnready bool
	}{
		{"unset", nil, false},
		{"ifhealthybudget", &ifHealthy, false},
		{"alwaysallow", &alwaysAllow, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			app := "app-" + tc.name
			var pods []string
			for i := range 3 {
				name := fmt.Sprintf("%s-%d", app, i)
				c.CreatePod(t, ns, name, map[string]string{"app": app}, c.probedPodSpec(t))
				pods = append(pods, name)
			}
			for _, name := range pods {
				c.WaitPodRunningReady(t, ns, name)
			}
			c.PDB(t, ns, app, app, 3, tc.policy)
			c.WaitPDB(t, ns, app, "three healthy pods", func(s policyv1.PodDisruptionBudgetStatus) bool {
				return s.ExpectedPods == 3 && s.CurrentHealthy == 3
			})

			unready, healthy := pods[0], pods[1]
			c.makeUnready(t, ns, unready)
			c.Poll(t, unready+" to be Running and not Ready", func(ctx context.Context) (bool, error) {
				p, err := c.Client.CoreV1().Pods(ns).Get(ctx, unready, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				return p.Status.Phase == corev1.PodRunning && framework.PodCondition(p, corev1.PodReady) == corev1.ConditionFalse, nil
			})
			c.WaitPDB(t, ns, app, "the budget is unhealthy", func(s policyv1.PodDisruptionBudgetStatus) bool {
				return s.CurrentHealthy == 2 && s.DesiredHealthy == 3 && s.DisruptionsAllowed == 0
			})

			err := c.evict(ns, unready)
			if tc.evictsUnready {
				require.NoError(t, err, "AlwaysAllow evicts the unready pod")
				c.Poll(t, unready+" to be gone", func(ctx context.Context) (bool, error) {
					_, err := c.Client.CoreV1().Pods(ns).Get(ctx, unready, metav1.GetOptions{})
					return apierrors.IsNotFound(err), nil
				})
			} else {
				require.Error(t, err, "the eviction of the unready pod is refused")
				require.True(t, apierrors.IsTooManyRequests(err), "429 Too Many Requests, got %v", err)
				p, err := c.Client.CoreV1().Pods(ns).Get(ctx, unready, metav1.GetOptions{})
				require.NoError(t, err)
				require.Nil(t, p.DeletionTimestamp, "the unready pod is not being deleted")
			}

			err = c.evict(ns, healthy)
			require.Error(t, err, "the healthy pod stays guarded by the budget")
			require.True(t, apierrors.IsTooManyRequests(err), "429 Too Many Requests, got %v", err)
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, healthy, metav1.GetOptions{})
			require.NoError(t, err)
			require.Nil(t, p.DeletionTimestamp, "the healthy pod is not being deleted")
		})
	}
}

// Ports of agnhost grpc-health-checking: the gRPC health service the
// readiness probe asks, and the HTTP server that switches it.
const (
	grpcHealthPort   = 5000
	grpcHealthSwitch = "8080"
)

// probedPodSpec is a pod that is Ready until makeUnready: on KWOK, any pod
// (a stage decides); on real kubelets, agnhost's gRPC health server with a
// readiness probe every second.
func (c *cluster) probedPodSpec(t *testing.T) corev1.PodSpec {
	t.Helper()
	spec := framework.PodSpec("", resource.Quantity{})
	if !c.RealKubelets {
		return spec
	}
	require.NotEmpty(t, c.AgnhostImage, "KUBE_GUARD_E2E_AGNHOST_IMAGE names upstream's agnhost on real kubelets (make kind-e2e sets it)")
	ctr := &spec.Containers[0]
	ctr.Image = c.AgnhostImage
	ctr.Args = []string{"grpc-health-checking", fmt.Sprintf("--port=%d", grpcHealthPort), "--http-port=" + grpcHealthSwitch}
	ctr.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: grpcHealthPort}},
		PeriodSeconds:    1,
		FailureThreshold: 1,
	}
	return spec
}

// makeUnready makes a Running, Ready pod of probedPodSpec not Ready while it
// keeps running: KWOK's stage on a label, or the real probe failing.
func (c *cluster) makeUnready(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if !c.RealKubelets {
		_, err := c.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+framework.ReadyLabel+`":"false"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		return
	}
	body, err := c.Client.CoreV1().Pods(ns).ProxyGet("http", name, grpcHealthSwitch, "/make-not-serving", nil).DoRaw(ctx)
	require.NoError(t, err, "agnhost's /make-not-serving through the pod proxy: %s", body)
}

// evict posts a policy/v1 Eviction for the pod.
func (c *cluster) evict(ns, pod string) error {
	return c.Client.PolicyV1().Evictions(ns).Evict(context.Background(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
	})
}
