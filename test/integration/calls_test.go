package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"kube-guard/test/util/controlplane"
)

// The user agents of the calls workload's clients: the workload's requests
// are compared, the observer's (watches that tell the workload when to go
// on) are not.
const (
	workloadAgent = "kube-guard-calls-workload"
	observerAgent = "kube-guard-calls-observer"
)

// callsNamespace is the namespace of the calls workload.
const callsNamespace = "calls"

// etcdPeriodicOperations are the kube-apiserver's etcd requests that a timer
// makes, not a request: the etcd3 store's Stats (listWithCount, the object
// counts behind apiserver_storage_objects) and the keys of its size
// estimation (listOnlyKeys). How many fall into a run depends on how long it
// takes.
var etcdPeriodicOperations = map[string]bool{"listWithCount": true, "listOnlyKeys": true}

// workloadResources are the resources whose etcd requests the workload
// decides; the kube-apiserver's own controllers write others (the default
// namespaces, the kubernetes service and its endpoints) on their timers.
var workloadResources = map[string]bool{"pods": true, "poddisruptionbudgets": true, "nodes": true, "serviceaccounts": true, "priorityclasses": true}

// calls are the requests a control plane made during the calls workload: API
// requests ("user verb resource[/subresource] code", from the audit log) and
// the kube-apiserver's etcd requests ("operation resource", from
// etcd_requests_total), each with how many there were.
type calls struct {
	api  map[string]int
	etcd map[string]float64
}

// TestDefaultGatesMakeUpstreamsCalls runs the same workload against pristine
// upstream's kube-apiserver and kube-scheduler (_output/bin/pristine, `make
// pristine`) and against kube-guard's, each with every feature gate at its
// default and on an etcd of its own, and fails where kube-guard's make other
// API requests or other etcd requests than upstream's: the adoption promise
// that a cluster that turns on no fork gate runs upstream's code paths (see
// docs/gates.md). The workload: evictions of pods with and without a
// PodDisruptionBudget (allowed, refused with 429, a Pending pod, a pod that
// does not exist), a preemption of a pod without a budget, and one of two
// pods under a budget that allows one disruption. Its steps are sequential
// and each waits, through watches served by the watch cache, until the cache
// has what the step wrote.
//
// It runs twice. With the watch cache (as clusters run), the API requests
// must be the same, and so must the etcd requests except the attempts of
// writes (update, delete) and the reads of objects the cache did not hold
// yet (get): a write starts from the cache's copy of its object, and whether
// that copy already has the write made a moment before (inside one request:
// the graceful deletion's update, then the delete) decides whether the etcd
// transaction is tried once or twice, in upstream as in kube-guard. Without
// the watch cache (--watch-cache=false) every write starts from a read of
// etcd, and every count must be the same.
func TestDefaultGatesMakeUpstreamsCalls(t *testing.T) {
	pristine := controlplane.PristineBinDir(t)
	patched := controlplane.BinDir(t)
	for _, tc := range []struct {
		name string
		args []string
		// timed are the etcd operations whose counts depend on the watch
		// cache's timing.
		timed map[string]bool
		// sensitivity also runs kube-guard's kube-apiserver with the
		// eviction fast path on, and requires the comparison to see it.
		sensitivity bool
	}{
		{name: "watch cache", timed: map[string]bool{"update": true, "delete": true, "get": true}},
		{name: "no watch cache", args: []string{"--watch-cache=false"}, sensitivity: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var upstream, fork calls
			ok := t.Run("upstream", func(t *testing.T) {
				upstream = callsOf(t, filepath.Join(pristine, "kube-apiserver"), filepath.Join(pristine, "kube-scheduler"), "", tc.args)
			})
			ok = t.Run("kube-guard", func(t *testing.T) {
				fork = callsOf(t, filepath.Join(patched, "kube-apiserver"), filepath.Join(patched, "kube-scheduler"), "", tc.args)
			}) && ok
			if !ok {
				return
			}
			// Liveness: the workload did what it is meant to exercise, in both.
			for name, c := range map[string]calls{"upstream": upstream, "kube-guard": fork} {
				for _, key := range []string{
					"admin create pods/eviction 201", "admin create pods/eviction 429", "admin create pods/eviction 404",
					"system:apiserver list poddisruptionbudgets 200", "system:apiserver update poddisruptionbudgets/status 200",
					"system:kube-scheduler patch pods/status 200", "system:kube-scheduler delete pods 200", "system:kube-scheduler create pods/binding 201",
				} {
					require.Positive(t, c.api[key], "%s: no %q in the audit log", name, key)
				}
				require.Positive(t, c.etcd["delete pods"], "%s: no etcd delete of pods", name)
				require.Positive(t, c.etcd["update poddisruptionbudgets"], "%s: no etcd update of a budget", name)
			}
			requireSameCalls(t, "API requests (audit log)", toFloat(upstream.api), toFloat(fork.api))
			exact := func(m map[string]float64) map[string]float64 {
				out := map[string]float64{}
				for k, v := range m {
					if op, _, _ := strings.Cut(k, " "); !tc.timed[op] {
						out[k] = v
					}
				}
				return out
			}
			requireSameCalls(t, "etcd requests of kube-apiserver (etcd_requests_total)", exact(upstream.etcd), exact(fork.etcd))
			if len(tc.timed) > 0 {
				t.Logf("etcd requests whose counts depend on the watch cache's timing: upstream %v, kube-guard %v", upstream.etcd, fork.etcd)
			}
			if tc.sensitivity {
				// The comparison sees a gate that changes the calls: with the
				// fast path, the eviction's budget list and status write are
				// storage calls, not loopback requests.
				fast := callsOf(t, filepath.Join(patched, "kube-apiserver"), filepath.Join(patched, "kube-scheduler"), victimRemovalGates, tc.args)
				require.NotEqual(t, upstream.api, fast.api, "the API requests with the eviction fast path on are upstream's: the comparison cannot see a difference")
				require.Zero(t, fast.api["system:apiserver update poddisruptionbudgets/status 200"], "the fast path's eviction writes the budget's status through the loopback client")
				require.NotEqual(t, exact(upstream.etcd), exact(fast.etcd), "the etcd requests with the eviction fast path on are upstream's: the comparison cannot see a difference")
			}
		})
	}
}

func toFloat(m map[string]int) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = float64(v)
	}
	return out
}

// requireSameCalls fails, listing every difference, unless want and got count
// the same requests.
func requireSameCalls(t *testing.T, what string, want, got map[string]float64) {
	t.Helper()
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(want, got))) {
		if want[k] != got[k] {
			diffs = append(diffs, fmt.Sprintf("  %-70s upstream %4.0f  kube-guard %4.0f", k, want[k], got[k]))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("%s differ with every gate at its default:\n%s\nupstream: %v\nkube-guard: %v", what, strings.Join(diffs, "\n"), want, got)
		return
	}
	t.Logf("%s: the same %d kinds, %.0f requests", what, len(want), sum(want))
}

func mergeKeys(a, b map[string]float64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// callsOf starts etcd, apiserver (with an audit log of every request's
// metadata, gates, every other gate at its default, extraArgs) and, during the workload, scheduler,
// runs the calls workload and returns the requests made.
func callsOf(t *testing.T, apiserver, scheduler, gates string, extraArgs []string) calls {
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o644))
	auditLog := filepath.Join(dir, "audit.log")
	s := controlplane.StartAPIServer(t, controlplane.Options{
		Binary:       apiserver,
		FeatureGates: gates,
		Users:        []string{schedulerUser},
		ExtraArgs: append([]string{
			"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog,
			"--audit-log-mode=blocking", "--audit-log-format=json",
		}, extraArgs...),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	workload := clientWithAgent(t, s.Config, workloadAgent)
	// Before the observer's watches: without a watch cache, each starts with
	// a list from etcd that is counted when it ends, at a moment of its own.
	before := etcdRequests(ctx, t, s.Client)
	obs := startObserver(ctx, t, clientWithAgent(t, s.Config, observerAgent))
	runCallsWorkload(ctx, t, workload, obs, func() func() {
		return controlplane.StartSchedulerBinary(t, scheduler, s, schedulerUser, "")
	})
	after := etcdRequests(ctx, t, s.Client)
	s.Stop()

	etcd := map[string]float64{}
	for k, v := range after {
		op, res, _ := strings.Cut(k, " ")
		if d := v - before[k]; d != 0 && !etcdPeriodicOperations[op] && workloadResources[res] {
			etcd[k] = d
		}
	}
	return calls{api: auditedCalls(t, auditLog), etcd: etcd}
}

func clientWithAgent(t *testing.T, cfg *rest.Config, agent string) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = agent
	cfg.QPS = -1 // no client-side rate limiter: no timing in the requests
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// auditEvent is what auditedCalls reads of an audit event.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// auditedCalls counts the API requests of the audit log that the workload
// decides: the workload client's, kube-scheduler's (events excepted: the
// event broadcaster batches by time), and the kube-apiserver's own requests
// on pods and PodDisruptionBudgets (the eviction's loopback requests); not
// the observer's, nor the kube-apiserver's controllers', which run on timers.
// A watch is counted when it starts, every other request when it completes.
func auditedCalls(t *testing.T, file string) map[string]int {
	t.Helper()
	out := map[string]int{}
	forEachAuditedRequest(t, file, func(e auditEvent, resource string, code int) {
		user, res := e.User.Username, e.ObjectRef.Resource
		switch {
		case user == "admin" && strings.HasPrefix(e.UserAgent, workloadAgent):
		case user == schedulerUser && res != "events" && res != "leases":
		case user == "system:apiserver" && (res == "pods" || res == "poddisruptionbudgets"):
		default:
			return
		}
		out[fmt.Sprintf("%s %s %s %d", user, e.Verb, resource, code)]++
	})
	return out
}

// forEachAuditedRequest calls each for every API request of the audit log
// (not /readyz or /metrics), once: a watch when it starts, every other
// request when it completes. resource is the request's
// resource[/subresource], code its response code (0 without one).
func forEachAuditedRequest(t *testing.T, file string, each func(e auditEvent, resource string, code int)) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		if e.ObjectRef == nil {
			continue // /readyz, /metrics
		}
		want := "ResponseComplete"
		if e.Verb == "watch" {
			want = "ResponseStarted"
		}
		if e.Stage != want {
			continue
		}
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		code := 0
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		each(e, res, code)
	}
	require.NoError(t, sc.Err())
}

// observer follows the pods and PodDisruptionBudgets of callsNamespace
// through watches that start from the watch cache (resourceVersion 0: no etcd
// request), so that the workload can wait until the cache holds what it wrote.
type observer struct {
	mu      sync.Mutex
	changed *sync.Cond
	pods    map[string]*corev1.Pod
	budgets map[string]*policyv1.PodDisruptionBudget
	err     error
}

func startObserver(ctx context.Context, t *testing.T, c kubernetes.Interface) *observer {
	t.Helper()
	o := &observer{pods: map[string]*corev1.Pod{}, budgets: map[string]*policyv1.PodDisruptionBudget{}}
	o.changed = sync.NewCond(&o.mu)
	opts := metav1.ListOptions{ResourceVersion: "0", TimeoutSeconds: ptr.To[int64](3600)}
	podWatch, err := c.CoreV1().Pods(callsNamespace).Watch(ctx, opts)
	require.NoError(t, err)
	budgetWatch, err := c.PolicyV1().PodDisruptionBudgets(callsNamespace).Watch(ctx, opts)
	require.NoError(t, err)
	follow := func(w watch.Interface) {
		defer w.Stop()
		for ev := range w.ResultChan() {
			o.mu.Lock()
			switch obj := ev.Object.(type) {
			case *corev1.Pod:
				if ev.Type == watch.Deleted {
					delete(o.pods, obj.Name)
				} else {
					o.pods[obj.Name] = obj
				}
			case *policyv1.PodDisruptionBudget:
				if ev.Type == watch.Deleted {
					delete(o.budgets, obj.Name)
				} else {
					o.budgets[obj.Name] = obj
				}
			case *metav1.Status:
				o.err = apierrors.FromObject(obj)
			}
			o.changed.Broadcast()
			o.mu.Unlock()
		}
	}
	go follow(podWatch)
	go follow(budgetWatch)
	t.Cleanup(func() { podWatch.Stop(); budgetWatch.Stop() })
	go func() {
		<-ctx.Done()
		o.mu.Lock()
		o.changed.Broadcast()
		o.mu.Unlock()
	}()
	return o
}

// wait blocks until cond holds for what the watches have delivered.
func (o *observer) wait(ctx context.Context, t *testing.T, what string, cond func(pods map[string]*corev1.Pod, budgets map[string]*policyv1.PodDisruptionBudget) bool) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for !cond(o.pods, o.budgets) {
		if o.err != nil {
			t.Fatalf("waiting for %s: watch: %v", what, o.err)
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		o.changed.Wait()
	}
}

// seenPod waits until the watch cache holds pod as written (or newer).
func (o *observer) seenPod(ctx context.Context, t *testing.T, pod *corev1.Pod) {
	t.Helper()
	o.wait(ctx, t, "pod "+pod.Name+" at "+pod.ResourceVersion, func(pods map[string]*corev1.Pod, _ map[string]*policyv1.PodDisruptionBudget) bool {
		p, ok := pods[pod.Name]
		return ok && p.UID == pod.UID && !olderThan(p.ResourceVersion, pod.ResourceVersion)
	})
}

// gonePods waits until the watch cache holds none of names.
func (o *observer) gonePods(ctx context.Context, t *testing.T, names ...string) {
	t.Helper()
	o.wait(ctx, t, fmt.Sprintf("pods %v gone", names), func(pods map[string]*corev1.Pod, _ map[string]*policyv1.PodDisruptionBudget) bool {
		for _, n := range names {
			if _, ok := pods[n]; ok {
				return false
			}
		}
		return true
	})
}

// seenBudget waits until the watch cache holds budget as written (or newer).
func (o *observer) seenBudget(ctx context.Context, t *testing.T, budget *policyv1.PodDisruptionBudget) {
	t.Helper()
	o.wait(ctx, t, "budget "+budget.Name, func(_ map[string]*corev1.Pod, budgets map[string]*policyv1.PodDisruptionBudget) bool {
		b, ok := budgets[budget.Name]
		return ok && !olderThan(b.ResourceVersion, budget.ResourceVersion)
	})
}

// olderThan compares etcd revisions (resourceVersions of one etcd).
func olderThan(a, b string) bool {
	return len(a) < len(b) || (len(a) == len(b) && a < b)
}

// runCallsWorkload is the workload of TestDefaultGatesMakeUpstreamsCalls,
// with c (the admin), waiting with o; startScheduler starts kube-scheduler,
// which runs for the two preemptions.
func runCallsWorkload(ctx context.Context, t *testing.T, c kubernetes.Interface, o *observer, startScheduler func() func()) {
	t.Helper()
	ns := callsNamespace
	createNamespace(ctx, t, c, ns)
	for name, value := range map[string]int32{"low": 100, "high": 1000} {
		_, err := c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	node := createReadyNode(ctx, t, c, "node-1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")})

	newPod := func(name, class, app, cpu, nodeName string) *corev1.Pod {
		p, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{
				PriorityClassName: class, NodeName: nodeName,
				// Deleted at once: no kubelet runs to finish a graceful deletion.
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "c", Image: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		o.seenPod(ctx, t, p)
		return p
	}
	running := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		p, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
		o.seenPod(ctx, t, p)
	}
	// newBudget creates a budget over app with the status the disruption
	// controller would write for healthy pods (no controller runs).
	newBudget := func(app string, minAvailable, healthy int32) {
		b, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: app},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(minAvailable)), Selector: metav1.SetAsLabelSelector(labels.Set{"app": app})},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		b.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: b.Generation, CurrentHealthy: healthy, DesiredHealthy: minAvailable,
			ExpectedPods: healthy, DisruptionsAllowed: healthy - minAvailable,
		}
		b, err = c.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, b, metav1.UpdateOptions{})
		require.NoError(t, err)
		o.seenBudget(ctx, t, b)
	}
	evict := func(name string) error {
		return c.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	deletePods := func(names ...string) {
		for _, n := range names {
			require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{}))
		}
		o.gonePods(ctx, t, names...)
	}

	// Evictions, no scheduler running.
	for _, name := range []string{"free-0", "budget-0", "budget-1", "budget-2"} {
		app, _, _ := strings.Cut(name, "-")
		running(newPod(name, "low", app, "100m", node.Name))
	}
	newPod("pending-0", "low", "budget", "100m", "")
	newBudget("budget", 2, 3)
	require.NoError(t, evict("free-0"), "eviction of a pod without a budget")
	o.gonePods(ctx, t, "free-0")
	require.NoError(t, evict("budget-0"), "eviction within the budget")
	o.gonePods(ctx, t, "budget-0")
	o.wait(ctx, t, "the budget's decrement", func(_ map[string]*corev1.Pod, budgets map[string]*policyv1.PodDisruptionBudget) bool {
		return budgets["budget"].Status.DisruptionsAllowed == 0
	})
	err := evict("budget-1")
	require.True(t, apierrors.IsTooManyRequests(err), "eviction beyond the budget: got %v, want 429", err)
	require.NoError(t, evict("pending-0"), "eviction of a Pending pod")
	o.gonePods(ctx, t, "pending-0")
	err = evict("missing")
	require.True(t, apierrors.IsNotFound(err), "eviction of a pod that does not exist: got %v, want 404", err)
	deletePods("budget-1", "budget-2")

	// Preemptions: kube-scheduler binds four pods that fill the node, then
	// makes room for a pod of higher priority.
	stopScheduler := startScheduler()
	preempt := func(app, preemptorCPU string, victims int) {
		var names []string
		for i := range 4 {
			names = append(names, fmt.Sprintf("%s-%d", app, i))
			newPod(names[i], "low", app, "1", "")
		}
		o.wait(ctx, t, "kube-scheduler binds the "+app+" pods", func(pods map[string]*corev1.Pod, _ map[string]*policyv1.PodDisruptionBudget) bool {
			for _, n := range names {
				if p, ok := pods[n]; !ok || p.Spec.NodeName == "" {
					return false
				}
			}
			return true
		})
		preemptor := newPod(app+"-preemptor", "high", "preemptor", preemptorCPU, "")
		o.wait(ctx, t, "the preemptor of the "+app+" pods bound and its victims gone", func(pods map[string]*corev1.Pod, _ map[string]*policyv1.PodDisruptionBudget) bool {
			left := 0
			for _, n := range names {
				if _, ok := pods[n]; ok {
					left++
				}
			}
			p, ok := pods[preemptor.Name]
			return ok && p.Spec.NodeName != "" && left == len(names)-victims
		})
		var rest []string
		o.mu.Lock()
		for _, n := range append(names, preemptor.Name) {
			if _, ok := o.pods[n]; ok {
				rest = append(rest, n)
			}
		}
		o.mu.Unlock()
		deletePods(rest...)
	}
	preempt("plain", "1", 1)
	// A budget that allows one disruption, and a preemptor that needs two
	// victims: upstream preempts anyway (the violation only ranks candidates).
	newBudget("guarded", 3, 4)
	preempt("guarded", "2", 2)
	stopScheduler()
}
