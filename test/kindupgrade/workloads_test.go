package kindupgrade

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The workloads' namespace; probes go to namespaces of probePrefix, which
// the snapshots leave out.
const (
	workloadNS  = "adoption"
	probePrefix = "adoption-probe-"
)

func (c *cluster) podTemplate(app, priorityClass string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			PriorityClassName:             priorityClass,
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{{Name: "app", Image: c.image}},
		},
	}
}

func (c *cluster) createNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := c.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, "the default ServiceAccount of "+name, settleTimeout, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

func (c *cluster) priorityClass(t *testing.T, name string, value int32, threshold *int32) *schedulingv1.PriorityClass {
	t.Helper()
	pc, err := c.client.SchedulingV1().PriorityClasses().Create(context.Background(), &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"test": "adoption"}},
		Value:      value, AllowDisruptionByPriorityGreaterThanOrEqual: threshold,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return pc
}

func (c *cluster) deployment(t *testing.T, ns, name, priorityClass string, replicas int32) {
	t.Helper()
	tpl := c.podTemplate(name, priorityClass)
	_, err := c.client.AppsV1().Deployments(ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (c *cluster) statefulSet(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	tpl := c.podTemplate(name, "")
	_, err := c.client.CoreV1().Services(ns).Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: tpl.Labels, Ports: []corev1.ServicePort{{Name: "p", Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.client.AppsV1().StatefulSets(ns).Create(context.Background(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels},
			Template: tpl, PodManagementPolicy: appsv1.ParallelPodManagement},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (c *cluster) daemonSet(t *testing.T, ns, name string) {
	t.Helper()
	tpl := c.podTemplate(name, "")
	_, err := c.client.AppsV1().DaemonSets(ns).Create(context.Background(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (c *cluster) pdb(t *testing.T, ns, app string, minAvailable int) {
	t.Helper()
	v := intstr.FromInt32(int32(minAvailable))
	_, err := c.client.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &v, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// settled waits until every Deployment, StatefulSet and DaemonSet of ns is
// observed by its controller and has all its pods updated and ready, and
// every budget of ns is observed: the controllers of the control plane now
// running agree that the workloads are up to date.
func (c *cluster) settled(t *testing.T, ns string) {
	t.Helper()
	waitFor(t, "the workloads of "+ns+" to be up to date and ready", settleTimeout, func(ctx context.Context) (bool, error) {
		ds, err := c.client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range ds.Items {
			if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas ||
				d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
				return false, fmt.Errorf("deployment %s: %+v", d.Name, d.Status)
			}
		}
		ss, err := c.client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range ss.Items {
			if s.Status.ObservedGeneration != s.Generation || s.Status.UpdatedReplicas != *s.Spec.Replicas ||
				s.Status.ReadyReplicas != *s.Spec.Replicas || s.Status.CurrentRevision != s.Status.UpdateRevision {
				return false, fmt.Errorf("statefulset %s: %+v", s.Name, s.Status)
			}
		}
		dss, err := c.client.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range dss.Items {
			if d.Status.ObservedGeneration != d.Generation || d.Status.DesiredNumberScheduled == 0 ||
				d.Status.UpdatedNumberScheduled != d.Status.DesiredNumberScheduled || d.Status.NumberReady != d.Status.DesiredNumberScheduled {
				return false, fmt.Errorf("daemonset %s: %+v", d.Name, d.Status)
			}
		}
		pdbs, err := c.client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pdbs.Items {
			if p.Status.ObservedGeneration != p.Generation || p.Status.CurrentHealthy != p.Status.ExpectedPods {
				return false, fmt.Errorf("budget %s: %+v", p.Name, p.Status)
			}
		}
		return true, nil
	})
}

// probe shows that the control plane now running schedules and runs new
// pods: a Deployment, a StatefulSet and a DaemonSet in a namespace of their
// own, of priorityClass when not empty, all up to date and ready; it
// returns the namespace, which the caller deletes.
func (c *cluster) probe(t *testing.T, step int, priorityClass string) string {
	t.Helper()
	ns := fmt.Sprintf("%s%d", probePrefix, step)
	c.createNamespace(t, ns)
	c.deployment(t, ns, "probe", priorityClass, 1)
	c.statefulSet(t, ns, "probe-sts", 1)
	c.daemonSet(t, ns, "probe-ds")
	c.settled(t, ns)
	return ns
}

// container is a container of a pod as its kubelet reports it.
type container struct {
	id       string
	restarts int32
}

// snapshot is what must not change when the control plane is replaced: the
// workload pods (every pod but the control plane's mirror pods and those of
// the probes), by namespace/name, with their UIDs, nodes and containers; and
// every ReplicaSet and ControllerRevision, by kind/namespace/name, with
// their UIDs and their hash labels.
type snapshot struct {
	pods       map[string]string // key: uid node
	containers map[string]container
	owned      map[string]string // key: uid hash-label
}

func (c *cluster) snapshot(t *testing.T) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{pods: map[string]string{}, containers: map[string]container{}, owned: map[string]string{}}
	pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Namespace, probePrefix) || slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "Node" }) {
			continue
		}
		key := p.Namespace + "/" + p.Name
		s.pods[key] = string(p.UID) + " " + p.Spec.NodeName
		for _, st := range p.Status.ContainerStatuses {
			s.containers[key+"/"+st.Name] = container{id: st.ContainerID, restarts: st.RestartCount}
		}
	}
	rss, err := c.client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, r := range rss.Items {
		if !strings.HasPrefix(r.Namespace, probePrefix) {
			s.owned["ReplicaSet/"+r.Namespace+"/"+r.Name] = string(r.UID) + " " + r.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		}
	}
	crs, err := c.client.AppsV1().ControllerRevisions("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, r := range crs.Items {
		if !strings.HasPrefix(r.Namespace, probePrefix) {
			s.owned["ControllerRevision/"+r.Namespace+"/"+r.Name] = fmt.Sprintf("%s %s rev %d", r.UID, r.Labels[appsv1.ControllerRevisionHashLabelKey], r.Revision)
		}
	}
	return s
}

// requireSame fails the test when a workload pod was recreated, moved or
// restarted, or a ReplicaSet or ControllerRevision was created, deleted or
// relabelled, between before and now; it says which.
func (c *cluster) requireSame(t *testing.T, step string, before snapshot) {
	t.Helper()
	now := c.snapshot(t)
	diff := func(what string, a, b map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(a)) {
			if b[k] != a[k] {
				t.Errorf("%s: %s %s was %q, is %q", step, what, k, a[k], b[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(b)) {
			if _, ok := a[k]; !ok {
				t.Errorf("%s: %s %s is new (%q)", step, what, k, b[k])
			}
		}
	}
	diff("pod", before.pods, now.pods)
	diff("object", before.owned, now.owned)
	for k, was := range before.containers {
		if is, ok := now.containers[k]; ok && is != was {
			t.Errorf("%s: container %s restarted: was %+v, is %+v", step, k, was, is)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%s: %d workload pods and %d ReplicaSets and ControllerRevisions as before", step, len(now.pods), len(now.owned))
}

// deleteNamespace deletes ns and waits until it is gone.
func (c *cluster) deleteNamespace(t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, c.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}))
	waitFor(t, "namespace "+ns+" to be gone", settleTimeout, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
