package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kube-guard/test/util/controlplane"
)

const schedulerUser = "system:kube-scheduler"

// healthy is how the disruption controller counts a pod: running, Ready,
// not terminating.
func healthy(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// budgetWatch watches the pods a PodDisruptionBudget selects and records
// every moment their healthy count is below min, and every pod that starts
// terminating or is deleted.
type budgetWatch struct {
	mu         sync.Mutex
	pods       map[string]*corev1.Pod
	violations []string
	disrupted  []string
}

func watchBudget(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, selector labels.Selector, min int) *budgetWatch {
	t.Helper()
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	require.NoError(t, err)
	b := &budgetWatch{pods: map[string]*corev1.Pod{}}
	for i := range list.Items {
		b.pods[list.Items[i].Name] = &list.Items[i]
	}
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector.String(), ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			b.mu.Lock()
			old := b.pods[p.Name]
			if ev.Type == watch.Deleted {
				delete(b.pods, p.Name)
			} else {
				b.pods[p.Name] = p
			}
			if old != nil && healthy(old) && (ev.Type == watch.Deleted || !healthy(p)) {
				b.disrupted = append(b.disrupted, p.Name)
			}
			n := 0
			for _, q := range b.pods {
				if healthy(q) {
					n++
				}
			}
			if n < min {
				b.violations = append(b.violations, fmt.Sprintf("%s %s: %d healthy pods, minAvailable %d", ev.Type, p.Name, n, min))
			}
			b.mu.Unlock()
		}
	}()
	return b
}

func (b *budgetWatch) state() (violations, disrupted []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.violations), slices.Clone(b.disrupted)
}

// eventReasons returns the reasons of the events about pod.
func eventReasons(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) ([]string, []string, error) {
	list, err := c.EventsV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("regarding.name", pod.Name).String(),
	})
	if err != nil {
		return nil, nil, err
	}
	var reasons, notes []string
	for _, e := range list.Items {
		reasons = append(reasons, e.Reason)
		notes = append(notes, e.Reason+": "+e.Note)
	}
	return reasons, notes, nil
}

func waitForEvent(ctx context.Context, t *testing.T, c kubernetes.Interface, pod *corev1.Pod, reason string) {
	t.Helper()
	var notes []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		reasons, n, err := eventReasons(ctx, c, pod)
		notes = n
		return err == nil && slices.Contains(reasons, reason), nil
	})
	require.NoError(t, err, "no %s event about %s; events: %q", reason, pod.Name, notes)
}

// setEvictionRule adds or removes pods/eviction in the bootstrap ClusterRole
// system:kube-scheduler (not reconciled at the next start once autoupdate is
// false) and waits until the authorizer answers accordingly.
func setEvictionRule(ctx context.Context, t *testing.T, c kubernetes.Interface, allowed bool) {
	t.Helper()
	role, err := c.RbacV1().ClusterRoles().Get(ctx, "system:kube-scheduler", metav1.GetOptions{})
	require.NoError(t, err)
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "pods/eviction") {
			continue
		}
		rules = append(rules, r)
	}
	if allowed {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}})
	}
	role.Rules = rules
	if role.Annotations == nil {
		role.Annotations = map[string]string{}
	}
	role.Annotations["rbac.authorization.kubernetes.io/autoupdate"] = "false"
	_, err = c.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               schedulerUser,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "skew"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed == allowed, nil
	})
	require.NoError(t, err, "the authorizer does not yet answer allowed=%v for %s create pods/eviction", allowed, schedulerUser)
}

// TestSchedulerSkew runs the patched kube-scheduler with the gate on against
// a patched kube-apiserver with the gate off (a control plane half rolled
// back: the pods keep the thresholds they were admitted with), first without
// the RBAC rule that lets the scheduler evict, then with it. Real processes:
// etcd, kube-apiserver, kube-controller-manager (the disruption controller)
// and kube-scheduler; the node is an API object, so the test plays the
// kubelet (pod status, removal of a terminating pod).
//
// Two pods of a protected PriorityClass (threshold 1000) fill the node under
// a PodDisruptionBudget minAvailable 1; preemptors at priority 500 need the
// room of one pod each. Expected, with a pod watch checking the budget
// throughout:
//   - without pods/eviction: the eviction is forbidden; the preemptor gets a
//     PreemptionEvictionFailed event; no pod is touched;
//   - with the rule back: exactly one pod is evicted (the budget allows one)
//     and the preemptor binds once it is gone;
//   - a second preemptor: the budget allows no more, a PreemptionBlocked
//     event, no pod touched.
func TestSchedulerSkew(t *testing.T) {
	ctx := context.Background()
	etcdURL := controlplane.Etcd(t)
	users := []string{schedulerUser}
	s := controlplane.StartAPIServer(t, controlplane.Options{EtcdURL: etcdURL, FeatureGates: "DisruptionPolicyInPriorityClass=true", Users: users})
	c := s.Client
	ns := "skew"

	createNamespace(ctx, t, c, ns)
	for name, pc := range map[string]schedulingv1.PriorityClass{
		"protected": {Value: 100, AllowDisruptionByPriorityGreaterThanOrEqual: ptr.To[int32](1000)},
		"preemptor": {Value: 500},
	} {
		pc.Name = name
		_, err := c.SchedulingV1().PriorityClasses().Create(ctx, &pc, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	node := createReadyNode(ctx, t, c, "node-1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")})

	selector := labels.SelectorFromSet(labels.Set{"app": "db"})
	for i := range 2 {
		p, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", i), Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{
				PriorityClassName: "protected", NodeName: node.Name,
				Containers: []corev1.Container{{Name: "db", Image: "db", Resources: corev1.ResourceRequirements{Requests: cpu("1")}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, ptr.To[int32](1000), p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual)
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		_, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	_, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: metav1.SetAsLabelSelector(labels.Set{"app": "db"})},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The apiserver rolls back its gate; the stored pods keep their thresholds.
	s.Stop()
	s = controlplane.StartAPIServer(t, controlplane.Options{EtcdURL: etcdURL, FeatureGates: "DisruptionPolicyInPriorityClass=false", Users: users})
	c = s.Client
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		require.Equal(t, ptr.To[int32](1000), p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual, "%s keeps its threshold with the apiserver's gate off", p.Name)
	}
	setEvictionRule(ctx, t, c, false)

	controlplane.StartControllerManager(t, s, "disruption", "")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "db", metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 2 && pdb.Status.DisruptionsAllowed == 1, nil
	})
	require.NoError(t, err, "the disruption controller did not report 2 healthy pods, 1 disruption allowed")
	budget := watchBudget(ctx, t, c, ns, selector, 1)

	controlplane.StartScheduler(t, s, schedulerUser, "DisruptionPolicyInPriorityClass=true")
	newPreemptor := func(name string) *corev1.Pod {
		p, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				PriorityClassName: "preemptor",
				Containers:        []corev1.Container{{Name: "p", Image: "p", Resources: corev1.ResourceRequirements{Requests: cpu("1")}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return p
	}

	// 1. No RBAC rule for pods/eviction: a clear event, nothing touched.
	first := newPreemptor("preemptor-1")
	waitForEvent(ctx, t, c, first, "PreemptionEvictionFailed")
	violations, disrupted := budget.state()
	require.Empty(t, violations, "PodDisruptionBudget violated")
	require.Empty(t, disrupted, "a pod was removed although its eviction was forbidden")
	pods, err = c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	require.NoError(t, err)
	for _, p := range pods.Items {
		require.Nil(t, p.DeletionTimestamp, "%s is terminating", p.Name)
	}

	// 2. The rule back: one eviction, within the budget; the preemptor binds
	// once its victim is gone (the test removes it, as a kubelet would).
	setEvictionRule(ctx, t, c, true)
	var victim string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, disrupted := budget.state()
		if len(disrupted) > 0 {
			victim = disrupted[0]
			return true, nil
		}
		return false, nil
	})
	require.NoError(t, err, "no victim was evicted once the scheduler may evict")
	require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == node.Name, nil
	})
	require.NoError(t, err, "the preemptor did not bind to the room of its victim")
	violations, disrupted = budget.state()
	require.Empty(t, violations, "PodDisruptionBudget violated")
	require.Equal(t, []string{victim}, disrupted, "exactly one victim")
	_, notes, err := eventReasons(ctx, c, first)
	require.NoError(t, err)
	t.Logf("events of %s: %q", first.Name, notes)

	// 3. The budget is spent: the next preemptor is blocked, nothing touched.
	second := newPreemptor("preemptor-2")
	waitForEvent(ctx, t, c, second, "PreemptionBlocked")
	violations, disrupted = budget.state()
	require.Empty(t, violations, "PodDisruptionBudget violated")
	require.Equal(t, []string{victim}, disrupted, "no victim for the blocked preemptor")
	p, err := c.CoreV1().Pods(ns).Get(ctx, second.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, p.Spec.NodeName, "the blocked preemptor is not bound")
}
