package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// liveMigrator is the responder name of thirdPartyResponder.
const liveMigrator = "live-migration.e2e.kube-guard.io/vm"

// thirdPartyResponder answers Evictions the way KubeVirt's virt-controller
// does for a VM's pod, written to KEP-4563 and nothing else of kube-guard: it
// watches the Evictions labelled with its name, and when it becomes Active it
// takes over (a heartbeat, an expected completion time, a message), reports
// progress at the API's advised interval while the live migration runs, and,
// once released, starts the VM's pod on another node, deletes the source pod
// and reports completion.
type thirdPartyResponder struct {
	c  *cluster
	ns string

	release chan struct{}
	mu      sync.Mutex
	// tookOver is when it took over each Eviction, by name.
	tookOver map[string]time.Time
	// deleted counts the deletions of source pods it made, by pod UID.
	deleted map[types.UID]int
	errs    []error
}

// heartbeatInterval is the least time between two of its reports (the API
// asks responders for no more than one every 20 seconds).
const heartbeatInterval = 20 * time.Second

func (c *cluster) startThirdPartyResponder(t *testing.T, ns string) *thirdPartyResponder {
	t.Helper()
	r := &thirdPartyResponder{c: c, ns: ns, release: make(chan struct{}), tookOver: map[string]time.Time{}, deleted: map[types.UID]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = liveMigrator })) // every role
	informer := factory.Lifecycle().V1alpha1().Evictions().Informer()
	queue := make(chan string, 100)
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { queue <- obj.(*lifecyclev1alpha1.Eviction).Name },
		UpdateFunc: func(_, obj interface{}) { queue <- obj.(*lifecyclev1alpha1.Eviction).Name },
	})
	require.NoError(t, err)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case name := <-queue:
				r.handle(ctx, name)
			case <-tick.C:
				for _, obj := range informer.GetStore().List() {
					r.handle(ctx, obj.(*lifecyclev1alpha1.Eviction).Name)
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return r
}

// handle acts on the Eviction name while this responder is Active in it.
func (r *thirdPartyResponder) handle(ctx context.Context, name string) {
	evictions := r.c.Client.LifecycleV1alpha1().Evictions(r.ns)
	ev, err := evictions.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			r.fail(err)
		}
		return
	}
	state, own := responderOf(ev, liveMigrator)
	if state != lifecyclev1alpha1.ResponderStateActive || own.CompletionTime != nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	since, took := r.tookOver[name]
	r.mu.Unlock()
	released := false
	select {
	case <-r.release:
		released = true
	default:
	}
	switch {
	case !took:
		r.report(ctx, ev, func(rs *lifecyclev1alpha1.ResponderStatus) {
			rs.ExpectedCompletionTime = ptr.To(metav1.NewTime(now.Add(time.Hour)))
			rs.Message = ptr.To("Live migration of the VM in progress.")
		})
		r.mu.Lock()
		r.tookOver[name] = now
		r.mu.Unlock()
	case released:
		r.migrate(ctx, ev)
	case own.HeartbeatTime == nil || now.Sub(own.HeartbeatTime.Time) >= heartbeatInterval:
		r.report(ctx, ev, func(rs *lifecyclev1alpha1.ResponderStatus) {
			rs.Message = ptr.To(fmt.Sprintf("Live migration of the VM in progress for %s.", now.Sub(since).Round(time.Second)))
		})
	}
}

// migrate starts the VM on another node, deletes the source pod (its UID as
// precondition) and reports completion.
func (r *thirdPartyResponder) migrate(ctx context.Context, ev *lifecyclev1alpha1.Eviction) {
	target := ev.Spec.Target.Pod
	pods := r.c.Client.CoreV1().Pods(r.ns)
	source, err := pods.Get(ctx, target.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && source.UID != target.UID):
	case err != nil:
		r.fail(err)
		return
	case source.DeletionTimestamp == nil:
		migrated := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: target.Name + "-migrated", Labels: map[string]string{deschedulableLabel: "false"}},
			Spec:       *source.Spec.DeepCopy(),
		}
		migrated.Spec.NodeName = ""
		migrated.Spec.EvictionResponders = nil
		migrated.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpNotIn, Values: []string{source.Spec.NodeName},
			}}}},
		}}}
		if _, err := pods.Create(ctx, migrated, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			r.fail(err)
			return
		}
		if err := pods.Delete(ctx, target.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &target.UID}}); err != nil {
			r.fail(err)
			return
		}
		r.mu.Lock()
		r.deleted[target.UID]++
		r.mu.Unlock()
	}
	r.report(ctx, ev, func(rs *lifecyclev1alpha1.ResponderStatus) {
		rs.CompletionTime = rs.HeartbeatTime
		rs.Message = ptr.To("The VM was live-migrated to another node.")
	})
}

// report writes this responder's status entry, with a heartbeat.
func (r *thirdPartyResponder) report(ctx context.Context, ev *lifecyclev1alpha1.Eviction, mutate func(*lifecyclev1alpha1.ResponderStatus)) {
	ev = ev.DeepCopy()
	for i := range ev.Status.Responders {
		if rs := &ev.Status.Responders[i]; rs.Name == liveMigrator {
			rs.HeartbeatTime = ptr.To(metav1.Now())
			mutate(rs)
		}
	}
	if _, err := r.c.Client.LifecycleV1alpha1().Evictions(r.ns).UpdateStatus(ctx, ev, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
		r.fail(err)
	}
}

func (r *thirdPartyResponder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *thirdPartyResponder) state() (map[string]time.Time, map[types.UID]int, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tookOver := map[string]time.Time{}
	for k, v := range r.tookOver {
		tookOver[k] = v
	}
	deleted := map[types.UID]int{}
	for k, v := range r.deleted {
		deleted[k] = v
	}
	return tookOver, deleted, append([]error(nil), r.errs...)
}

// TestDeschedulerEvacuationModeThirdPartyResponder: the descheduler in the
// evacuation mode asks for the eviction of a VM's pod that declares a live
// migration responder written to KEP-4563 (thirdPartyResponder, which answers
// as KubeVirt does). The responder takes over and reports progress; the
// migration outlasts the descheduler's maxEvacuationRequestTTL (the age the
// TTL measures, the request's requested-at annotation, is set back past it),
// and the descheduler keeps its request, neither withdrawing nor asking
// again. Released, the responder moves the VM to another node and deletes
// its pod: the pod is removed exactly once, never through the eviction API
// (the imperative responder is never activated), both the Eviction and the
// request end TargetEvicted, and the descheduler deletes its request.
func TestDeschedulerEvacuationModeThirdPartyResponder(t *testing.T) {
	c := setupDescheduler(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep4563-third-party")
	vm := c.evacuationPod(t, ns, "vm", c.Nodes[0].Name, true, false, withResponder(liveMigrator))
	deletions := c.watchPodDeletions(t, ns)
	// The descheduler deletes its request once finished, and the garbage
	// collector the Eviction with it: the test reads their last states.
	last := c.watchLifecycleObjects(t, ns)
	r := c.startThirdPartyResponder(t, ns)
	const ttl = 21 * time.Minute
	d := c.startDescheduler(t, evictionRequestPolicy(ns, fmt.Sprintf("maxEvacuationRequestTTL: %s\n", ttl)), time.Second, evictionRequestGates)

	var evictionName string
	c.Poll(t, "the live migration responder to take over vm's eviction", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, vm)
		if err != nil || ev == nil {
			return false, err
		}
		evictionName = ev.Name
		tookOver, _, _ := r.state()
		_, ok := tookOver[ev.Name]
		return ok, nil
	})
	first := requestIDs(t, c, ns)
	require.Len(t, first["vm"], 1, "one request for vm: %v", first)

	// The migration outlasts the TTL: set the request's requested-at, from
	// which the TTL counts, back past it.
	erName := requestName(t, c, ns, "vm")
	askedAt := time.Now().Add(-ttl - 5*time.Minute).UTC().Format(time.RFC3339)
	_, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).Patch(context.Background(), erName, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, "descheduler.alpha.kubernetes.io/requested-at", askedAt)), metav1.PatchOptions{})
	require.NoError(t, err)
	c.Poll(t, "the descheduler to keep the request past its TTL", func(context.Context) (bool, error) {
		return len(d.logLines("EvictionRequest past its TTL kept", liveMigrator)) > 0, nil
	})
	c.waitCycles(t, d, time.Now(), 2)
	er, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).Get(context.Background(), erName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, lifecyclev1alpha1.EvictionRequestIntentEviction, er.Spec.Intent, "the descheduler withdrew a request whose responder reports progress")
	require.Equal(t, first, requestIDs(t, c, ns), "the descheduler asked again")

	close(r.release)
	c.Poll(t, "the request to report TargetEvicted", func(context.Context) (bool, error) {
		er, _ := last.get(erName)
		return er != nil && meta.IsStatusConditionTrue(er.(*lifecyclev1alpha1.EvictionRequest).Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)), nil
	})
	var ev *lifecyclev1alpha1.Eviction
	c.Poll(t, "the Eviction to report TargetEvicted", func(context.Context) (bool, error) {
		obj, _ := last.get(evictionName)
		ev, _ = obj.(*lifecyclev1alpha1.Eviction)
		return ev != nil && meta.IsStatusConditionTrue(ev.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)), nil
	})
	state, own := responderOf(ev, liveMigrator)
	require.Equal(t, lifecyclev1alpha1.ResponderStateCompleted, state, "the live migration responder's end state")
	require.Equal(t, "The VM was live-migrated to another node.", ptr.Deref(own.Message, ""))
	// The imperative responder never evicted: it is either never
	// activated, or activated while the deleted pod terminated (a kubelet
	// holds it for its grace period) and completed when it went.
	imperative, imperativeStatus := responderOf(ev, lifecyclev1alpha1.EvictionResponderImperativeEviction)
	if imperative != lifecyclev1alpha1.ResponderStateInactive {
		require.NotContains(t, ptr.Deref(imperativeStatus.Message, ""), "evicted through the eviction API", "the imperative responder evicted the pod")
	}

	c.Poll(t, "the descheduler to delete its finished request", func(ctx context.Context) (bool, error) {
		byPod, err := requestsOf(ctx, c, ns, deschedulerRequester)
		return len(byPod) == 0, err
	})
	_, deleted, errs := r.state()
	require.Empty(t, errs, "the live migration responder's errors")
	require.Equal(t, map[types.UID]int{vm.UID: 1}, deleted, "deletions of vm by its responder")
	require.Equal(t, 1, deletions.count(vm.UID), "deletions of vm seen by a watch")
	require.Empty(t, d.logLines("Evicted pod"), "the descheduler evicted a pod itself")
	_, err = c.Client.CoreV1().Pods(ns).Get(context.Background(), "vm-migrated", metav1.GetOptions{})
	require.NoError(t, err, "the migrated VM's pod")
}

// podDeletions counts, from a watch, the DELETED events of pods by UID.
type podDeletions struct {
	mu    sync.Mutex
	byUID map[types.UID]int
}

func (p *podDeletions) count(uid types.UID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byUID[uid]
}

// watchPodDeletions watches the pods of ns until the test ends.
func (c *cluster) watchPodDeletions(t *testing.T, ns string) *podDeletions {
	t.Helper()
	w, err := c.Client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	p := &podDeletions{byUID: map[types.UID]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			if pod, ok := e.Object.(*corev1.Pod); ok && e.Type == watch.Deleted {
				p.mu.Lock()
				p.byUID[pod.UID]++
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		<-done
	})
	return p
}

// lifecycleObjects holds the last state seen of each EvictionRequest and
// Eviction of a namespace, by name, deleted ones included.
type lifecycleObjects struct {
	mu   sync.Mutex
	last map[string]interface{}
}

func (l *lifecycleObjects) get(name string) (interface{}, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	obj, ok := l.last[name]
	return obj, ok
}

// watchLifecycleObjects follows the EvictionRequests and Evictions of ns
// until the test ends.
func (c *cluster) watchLifecycleObjects(t *testing.T, ns string) *lifecycleObjects {
	t.Helper()
	l := &lifecycleObjects{last: map[string]interface{}{}}
	record := func(obj interface{}) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			l.mu.Lock()
			l.last[o.GetName()] = obj
			l.mu.Unlock()
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	for _, informer := range []cache.SharedIndexInformer{
		factory.Lifecycle().V1alpha1().EvictionRequests().Informer(),
		factory.Lifecycle().V1alpha1().Evictions().Informer(),
	} {
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    record,
			UpdateFunc: func(_, obj interface{}) { record(obj) },
			DeleteFunc: record,
		})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return l
}
