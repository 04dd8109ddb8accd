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
				c.CreatePod(t, ns, name, map[string]string{"app": app}, framework.PodSpec("", resource.Quantity{}))
				pods = append(pods, name)
			}
			for _, name := range pods {
				c.WaitPodRunningReady(t, ns, name)
			}
			c.PDB(t, ns, app, app, 3, tc.policy)
			c.WaitPDB(t, ns, app, "three healthy pods", func(s policyv1.PodDisruptionBudgetStatus) bool {
				return s.ExpectedPods == 3 && s.CurrentHealthy == 3
			})

			// Make one pod NotReady: the KWOK stage keeps it Running, not Ready.
			unready, healthy := pods[0], pods[1]
			_, err := c.Client.CoreV1().Pods(ns).Patch(ctx, unready, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+framework.ReadyLabel+`":"false"}}}`), metav1.PatchOptions{})
			require.NoError(t, err)
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

			err = c.evict(ns, unready)
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

// evict posts a policy/v1 Eviction for the pod.
func (c *cluster) evict(ns, pod string) error {
	return c.Client.PolicyV1().Evictions(ns).Evict(context.Background(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
	})
}
