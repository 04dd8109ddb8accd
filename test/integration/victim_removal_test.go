package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/testutil"

	"kube-guard/test/util/controlplane"
	"kube-guard/test/util/procstat"
)

// removal is how kube-scheduler removes a preemption victim.
type removal struct {
	name string
	// variant is the bench report's variant that removes a protected victim
	// this way: gate-off deletes it, gate-on evicts it (KEP-3280).
	variant string
	remove  func(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error
}

var removals = []removal{
	{
		// Upstream's preemption, and the gate off: the DisruptionTarget
		// condition (a strategic merge patch of the status, as
		// pkg/scheduler/util.PatchPodStatus sends it), then DELETE.
		name: "delete", variant: "gate-off",
		remove: func(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
			if err := patchDisruptionTarget(ctx, c, pod); err != nil {
				return err
			}
			return c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		},
	},
	{
		// The gate on before patch kep-3280/0011 (the KEP-3280 executor) stopped
		// setting the scheduler's condition on victims it evicts: the
		// DisruptionTarget patch, then the eviction, which replaces the
		// condition with its own. Not in the bench report (no variant);
		// for comparison with -bench.
		name: "patch-then-evict",
		remove: func(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
			if err := patchDisruptionTarget(ctx, c, pod); err != nil {
				return err
			}
			return evict(ctx, c, pod)
		},
	},
	{
		// The gate on, for a guarded victim: one eviction with a UID
		// precondition, which sets the eviction API's condition; once it is
		// admitted, the scheduler's condition, with the same patch as
		// upstream's (kep-3280/0028), so that a restarted scheduler
		// recognises the victim as terminating by preemption. A victim
		// already gone answers 404, which the scheduler ignores: with this
		// benchmark's grace period of 0 that is every victim, so the patch
		// costs less here than on a terminating victim; patch-then-evict
		// measures both calls on a live pod.
		name: "evict", variant: "gate-on",
		remove: func(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
			if err := evict(ctx, c, pod); err != nil {
				return err
			}
			if err := patchDisruptionTarget(ctx, c, pod); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		},
	},
}

// patchDisruptionTarget adds the scheduler's DisruptionTarget condition with
// a strategic merge patch of the status, as pkg/scheduler/util.PatchPodStatus
// sends it.
func patchDisruptionTarget(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	newPod := pod.DeepCopy()
	newPod.Status.Conditions = append(newPod.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler,
		Message: "default-scheduler: preempting to accommodate a higher priority pod", LastTransitionTime: metav1.Now(),
	})
	oldData, err := json.Marshal(corev1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newData, err := json.Marshal(corev1.Pod{Status: newPod.Status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, &corev1.Pod{})
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// evict evicts pod with a UID precondition, as the KEP-3280 executor does.
func evict(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return c.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	})
}

// BenchmarkVictimRemoval measures the CPU time the patched kube-apiserver,
// every gate at its default, (and etcd) spend per preemption victim removed, for the two ways
// kube-scheduler removes one: a DELETE after the DisruptionTarget patch
// (upstream, and the gate off), and an eviction (the gate on, for a
// victim guarded by KEP-3280); and, for comparison, the patch followed by
// the eviction, as the gate on did before. Victims are running and ready, four per
// PodDisruptionBudget, as in the scheduler_perf workloads of KEP-3280.
// b.N is the number of victims of each method. The CPU time is read from
// /proc, so the figure is the processes' work, whatever else the machine
// does. The methods take turns (see benchmarkVictimRemoval), so that each
// sees the same processes, at the same age. ns/op is the wall time of the
// removal of one victim by each method, one after the other, and
// <method>-ms/victim that of one method (the requests are sequential: the
// time a removal takes, on an otherwise idle kube-apiserver);
// <method>-etcd-requests/victim counts the kube-apiserver's requests to etcd
// (etcd_requests_total, read before and after each turn; the log has them
// by operation and resource), the round trips a removal waits for:
//
//	go test ./test/integration -run '^$' -bench BenchmarkVictimRemoval -benchtime 400x
//
// With KUBE_GUARD_VICTIM_REMOVAL_OUT=<dir>, it also writes
// <dir>/VictimRemoval_ProtectedVictim-<variant>.json in scheduler_perf's DataItems
// format, for make bench.
// With KUBE_GUARD_VICTIM_REMOVAL_PROFILE=<dir>, it then also removes more
// victims by each method, apart from the measured ones, while it takes a CPU
// profile of the kube-apiserver, and writes <dir>/<method>.pprof:
//
//	KUBE_GUARD_VICTIM_REMOVAL_PROFILE=/tmp/prof go test ./test/integration -run '^$' -bench 'BenchmarkVictimRemoval$' -benchtime 400x
//	go tool pprof -top -cum /tmp/prof/evict.pprof
func BenchmarkVictimRemoval(b *testing.B) {
	benchmarkVictimRemoval(b, controlplane.Options{}, removals, "VictimRemoval/ProtectedVictim", os.Getenv("KUBE_GUARD_VICTIM_REMOVAL_OUT"), os.Getenv("KUBE_GUARD_VICTIM_REMOVAL_PROFILE"))
}

// BenchmarkVictimRemovalFastPath is BenchmarkVictimRemoval with the
// kube-apiserver's eviction fast path on (victimRemovalGates, an opt-in
// proposal): the same removals, the eviction through the budget storage.
// make bench reports it as the workload VictimRemoval/ProtectedVictimFastPath.
func BenchmarkVictimRemovalFastPath(b *testing.B) {
	benchmarkVictimRemoval(b, controlplane.Options{FeatureGates: victimRemovalGates}, removals, "VictimRemoval/ProtectedVictimFastPath", os.Getenv("KUBE_GUARD_VICTIM_REMOVAL_OUT"), "")
}

// BenchmarkVictimRemovalUncachedBudgets is BenchmarkVictimRemoval with the
// kube-apiserver's watch cache of PodDisruptionBudgets turned off. The
// eviction lists the namespace's budgets with a consistent read; served from
// the watch cache, that read waits until the cache has caught up with etcd,
// and for a resource that sees few writes that takes a progress notification
// from etcd, which the kube-apiserver requests at most every 100 ms per
// resource. Turned off, the list is read from etcd. The difference between
// the two benchmarks is what that wait costs an eviction:
//
//	go test ./test/integration -run '^$' -bench 'BenchmarkVictimRemoval' -benchtime 200x
func BenchmarkVictimRemovalUncachedBudgets(b *testing.B) {
	benchmarkVictimRemoval(b, controlplane.Options{ExtraArgs: []string{"--watch-cache-sizes=poddisruptionbudgets.policy#0"}}, removals, "", "", "")
}

// victimRemovalGates are the kube-apiserver's gates in
// BenchmarkVictimRemovalFastPath: the eviction fast path (hack/lib/gates.sh,
// EVICTION_FAST_PATH=1 in kube-guard's clusters): the eviction reads the
// budgets from storage, lists them while it reads the pod, and writes the
// budget's status to etcd, not through the loopback client (all alpha, off
// by default). The gates change nothing of a DELETE.
const victimRemovalGates = "EvictionReadsBudgetsFromStorage=true,EvictionWritesBudgetsToStorage=true,EvictionListsBudgetsWhileReadingPod=true,EvictionWritesConditionWithDeletion=true"

// turns is how many turns each method of benchmarkVictimRemoval takes, each
// removing 1/turns of its victims.
const turns = 8

// profileWindow is how long KUBE_GUARD_VICTIM_REMOVAL_PROFILE profiles the
// kube-apiserver for each method, and profileVictims how many victims that
// method has to remove meanwhile: more than any method removes in the window.
const (
	profileWindow  = 2 * time.Second
	profileVictims = 1500
)

// lane is one sequence of removals that benchmarkLanes measures: a method
// against a kube-apiserver.
type lane struct {
	// name names the lane's figures (<name>-apiserver-cpu-ms/victim) and its
	// victims' namespace; variant is the bench report's variant ("": not
	// written).
	name, variant string
	server        *controlplane.APIServer
	client        kubernetes.Interface
	remove        func(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error
	// parallel is how many removals the lane has in flight at once (0 or 1:
	// one at a time), each in flight on a PodDisruptionBudget of its own
	// (see removeVictims).
	parallel int
}

// benchmarkVictimRemoval runs removals against a kube-apiserver started
// with opts, b.N victims each (see benchmarkLanes). With profileDir set, it
// then writes profileDir/<method>.pprof (see BenchmarkVictimRemoval).
// KUBE_GUARD_VICTIM_REMOVAL_APISERVER=<binary> runs that kube-apiserver
// instead of the default line's, e.g. another line's
// (_output/bin/<line>/kube-apiserver, `make build LINE=<line>`):
//
//	KUBE_GUARD_VICTIM_REMOVAL_APISERVER=$PWD/_output/bin/1.38/kube-apiserver go test ./test/integration -run '^$' -bench 'BenchmarkVictimRemoval(FastPath)?$' -benchtime 400x
func benchmarkVictimRemoval(b *testing.B, opts controlplane.Options, removals []removal, workload, out, profileDir string) {
	b.StopTimer()
	if bin := os.Getenv("KUBE_GUARD_VICTIM_REMOVAL_APISERVER"); bin != "" && opts.Binary == "" {
		opts.Binary = bin
	}
	s := controlplane.StartAPIServer(b, opts)
	c := unlimitedClient(b, s)
	var lanes []lane
	for _, r := range removals {
		lanes = append(lanes, lane{name: r.name, variant: r.variant, server: s, client: c, remove: r.remove})
	}
	benchmarkLanes(b, lanes, workload, out)
	if profileDir != "" && b.N > 1 {
		for _, r := range removals {
			profileRemoval(context.Background(), b, c, r, filepath.Join(profileDir, r.name+".pprof"))
		}
	}
}

// unlimitedClient returns a client of s without a client-side rate limiter,
// so that a removal's time is the work of the processes and not that of a
// limiter.
func unlimitedClient(b *testing.B, s *controlplane.APIServer) kubernetes.Interface {
	cfg := rest.CopyConfig(s.Config)
	cfg.QPS = -1
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(b, err)
	return c
}

// benchmarkLanes runs b.N removals of each lane. The victims of each lane are
// in a namespace of their own, all created before the first is removed. The
// lanes then take turns: in each of the turns, each lane removes its next
// b.N/turns victims, the lane that goes first changing from turn to turn,
// and its CPU time (its kube-apiserver's and etcd's) is the sum over its
// turns. With out set, it writes out/<workload>-<variant>.json for each lane
// with a variant.
func benchmarkLanes(b *testing.B, lanes []lane, workload, out string) {
	b.StopTimer()
	ctx := context.Background()
	victims := make([][]*corev1.Pod, len(lanes))
	for i, l := range lanes {
		victims[i] = createVictims(ctx, b, l.client, victimNamespace(ctx, b, l.client, l.name), b.N)
	}
	api := make([]time.Duration, len(lanes))
	etcd := make([]time.Duration, len(lanes))
	wall := make([]time.Duration, len(lanes))
	requests := make([]map[string]float64, len(lanes))
	for turn := 0; turn < turns; turn++ {
		from, to := turn*b.N/turns, (turn+1)*b.N/turns
		for j := range lanes {
			i := (turn + j) % len(lanes)
			l := lanes[i]
			requestsBefore := etcdRequests(ctx, b, l.client)
			apiBefore, err := procstat.Read(l.server.PID)
			require.NoError(b, err)
			etcdBefore, err := procstat.Read(l.server.EtcdPID)
			require.NoError(b, err)
			b.StartTimer()
			start := time.Now()
			err = removeVictims(ctx, l, victims[i], from, to)
			wall[i] += time.Since(start)
			b.StopTimer()
			require.NoError(b, err, l.name)
			apiAfter, err := procstat.Read(l.server.PID)
			require.NoError(b, err)
			etcdAfter, err := procstat.Read(l.server.EtcdPID)
			require.NoError(b, err)
			api[i] += apiAfter.Self - apiBefore.Self
			etcd[i] += etcdAfter.Self - etcdBefore.Self
			if requests[i] == nil {
				requests[i] = map[string]float64{}
			}
			for key, count := range etcdRequests(ctx, b, l.client) {
				if d := count - requestsBefore[key]; d != 0 {
					requests[i][key] += d
				}
			}
		}
	}

	n := float64(b.N)
	for i, l := range lanes {
		left, err := l.client.CoreV1().Pods(victims[i][0].Namespace).List(ctx, metav1.ListOptions{})
		require.NoError(b, err)
		require.Empty(b, left.Items, "victims left after %s", l.name)
		apiPerVictim := float64(api[i]) / float64(time.Millisecond) / n
		etcdPerVictim := float64(etcd[i]) / float64(time.Millisecond) / n
		b.ReportMetric(apiPerVictim, l.name+"-apiserver-cpu-ms/victim")
		b.ReportMetric(etcdPerVictim, l.name+"-etcd-cpu-ms/victim")
		b.ReportMetric(float64(wall[i])/float64(time.Millisecond)/n, l.name+"-ms/victim")
		total := 0.0
		var perVictim []string
		for _, key := range slices.Sorted(maps.Keys(requests[i])) {
			total += requests[i][key]
			perVictim = append(perVictim, fmt.Sprintf("%s %.2f", key, requests[i][key]/n))
		}
		b.ReportMetric(total/n, l.name+"-etcd-requests/victim")
		b.Logf("%s: etcd requests per victim, by operation and resource: %s", l.name, strings.Join(perVictim, ", "))
		if out != "" && b.N > 1 && l.variant != "" {
			writeVictimRemoval(b, filepath.Join(out, strings.ReplaceAll(workload, "/", "_")+"-"+l.variant+".json"), workload, b.N, map[string]float64{
				"APIServerPerVictim":    apiPerVictim,
				"EtcdPerVictim":         etcdPerVictim,
				"EtcdRequestsPerVictim": total / n,
				"TimePerVictim":         float64(wall[i]) / float64(time.Millisecond) / n,
			})
		}
	}
}

// removeVictims removes victims[from:to] with l.remove: one at a time, or,
// with l.parallel > 1, from l.parallel goroutines, each removing, in order,
// the victims of every l.parallel-th PodDisruptionBudget, so that no two
// removals in flight disrupt the same budget (the eviction would retry on
// the budget's conflict). It returns the first error of each goroutine.
func removeVictims(ctx context.Context, l lane, victims []*corev1.Pod, from, to int) error {
	workers := max(l.parallel, 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := from; i < to; i++ {
				if (i/victimsPerBudget)%workers != w {
					continue
				}
				if err := l.remove(ctx, l.client, victims[i]); err != nil {
					errs[w] = fmt.Errorf("%s: %w", victims[i].Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// guardedRemovalsInFlight is how many removals each lane of
// BenchmarkVictimRemovalUpstream has in flight at once. Each eviction waits
// about 100 ms for the kube-apiserver's consistent list of the namespace's
// budgets from its watch cache (upstream's: it waits for etcd's progress
// notification), idle, while the removal's own CPU time is about a tenth of
// that: sent one at a time, each victim's CPU time also held 100 ms of the
// server's background work (its own controllers, garbage collection), which
// varies from turn to turn and is not the removal's. With eight in flight,
// each victim holds an eighth of that.
const guardedRemovalsInFlight = 8

// BenchmarkVictimRemovalUpstream compares the kube-apiserver's CPU per
// guarded victim with pristine upstream's: the same removal (the gate on's
// for a victim guarded by KEP-3280: the eviction, then the scheduler's
// condition), sent to pristine upstream's kube-apiserver
// (_output/bin/pristine, variant "upstream") and to kube-guard's with every
// gate at its default ("gate-on"), each with an etcd of its own, the two
// taking turns; and kube-guard's DELETE of a victim (upstream's preemption,
// "gate-off"), the price of a removal that does not respect the budget,
// reported beside, sent to a third kube-apiserver (kube-guard's, with its
// own etcd), so that the two compared servers hold the same objects and do
// the same work: on the server of the evictions, the DELETEs' watch events
// and garbage were still being processed in the turns that followed them.
// Each lane has guardedRemovalsInFlight removals in flight at once, on
// distinct budgets.
// make bench reports it as the workload
// VictimRemoval/GuardedVictimAgainstUpstream, whose goal is the
// kube-apiserver's CPU per evicted victim at most that of upstream.
func BenchmarkVictimRemovalUpstream(b *testing.B) {
	b.StopTimer()
	upstream := controlplane.StartAPIServer(b, controlplane.Options{Binary: filepath.Join(controlplane.PristineBinDir(b), "kube-apiserver")})
	fork := controlplane.StartAPIServer(b, controlplane.Options{})
	forkDelete := controlplane.StartAPIServer(b, controlplane.Options{})
	upstreamClient, forkClient, forkDeleteClient := unlimitedClient(b, upstream), unlimitedClient(b, fork), unlimitedClient(b, forkDelete)
	var evict, del removal
	for _, r := range removals {
		switch r.variant {
		case "gate-on":
			evict = r
		case "gate-off":
			del = r
		}
	}
	benchmarkLanes(b, []lane{
		{name: "upstream-evict", variant: "upstream", server: upstream, client: upstreamClient, remove: evict.remove, parallel: guardedRemovalsInFlight},
		{name: "evict", variant: "gate-on", server: fork, client: forkClient, remove: evict.remove, parallel: guardedRemovalsInFlight},
		{name: "delete", variant: "gate-off", server: forkDelete, client: forkDeleteClient, remove: del.remove, parallel: guardedRemovalsInFlight},
	}, "VictimRemoval/GuardedVictimAgainstUpstream", os.Getenv("KUBE_GUARD_VICTIM_REMOVAL_OUT"))
}

// victimNamespace creates a namespace for the victims of method, and the
// default ServiceAccount that ServiceAccount admission needs (no
// controller-manager runs here to create it).
func victimNamespace(ctx context.Context, b testing.TB, c kubernetes.Interface, method string) string {
	b.Helper()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "victims-" + method + "-"}}, metav1.CreateOptions{})
	require.NoError(b, err)
	_, err = c.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(b, err)
	return ns.Name
}

// profileRemoval takes a CPU profile of the kube-apiserver over
// profileWindow while r removes victims of namespaces of their own, and
// writes it to file. The request is bounded: the window plus a minute for
// the answer. The benchmark fails if r runs out of victims before the window
// ends: the profile would then show an idle kube-apiserver.
func profileRemoval(ctx context.Context, b *testing.B, c kubernetes.Interface, r removal, file string) {
	b.Helper()
	// Namespaces of b.N victims each, as measured: an eviction's cost grows
	// with the budgets of its namespace.
	var pods []*corev1.Pod
	for len(pods) < profileVictims {
		pods = append(pods, createVictims(ctx, b, c, victimNamespace(ctx, b, c, r.name+"-profile"), b.N)...)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, profileWindow+time.Minute)
		defer cancel()
		data, err := c.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(profileWindow/time.Second))).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(file, data, 0o644)
		}
		done <- err
	}()
	for i, pod := range pods {
		select {
		case err := <-done:
			require.NoError(b, err, "CPU profile of the kube-apiserver")
			b.Logf("%s: %d victims removed while %s was profiled", r.name, i, file)
			return
		default:
		}
		if err := r.remove(ctx, c, pod); err != nil {
			b.Fatalf("%s %s: %v", r.name, pod.Name, err)
		}
	}
	b.Fatalf("%s: the %d victims were removed before the %s profile ended", r.name, len(pods), profileWindow)
}

// etcdRequests returns the kube-apiserver's requests to etcd so far
// (etcd_requests_total), by operation and resource ("get pods").
func etcdRequests(ctx context.Context, b testing.TB, c kubernetes.Interface) map[string]float64 {
	b.Helper()
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	require.NoError(b, err)
	all := testutil.NewMetrics()
	require.NoError(b, testutil.ParseMetrics(string(body), &all))
	requests := map[string]float64{}
	for _, sample := range all["etcd_requests_total"] {
		requests[string(sample.Metric["operation"])+" "+string(sample.Metric["resource"])] += float64(sample.Value)
	}
	return requests
}

// victimsPerBudget is how many victims of createVictims each
// PodDisruptionBudget selects: victim i is pdb-<i/victimsPerBudget>'s.
const victimsPerBudget = 4

// createVictims creates n running, ready pods in ns, bound to a node,
// victimsPerBudget per PodDisruptionBudget allowing as many disruptions (the
// status the disruption controller would compute: no controller runs here).
func createVictims(ctx context.Context, b testing.TB, c kubernetes.Interface, ns string, n int) []*corev1.Pod {
	b.Helper()
	for i := 0; i < (n+victimsPerBudget-1)/victimsPerBudget; i++ {
		minAvailable := intstr.FromInt32(0)
		pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pdb-%d", i)},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: &minAvailable,
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"pdb": fmt.Sprintf("pdb-%d", i)}},
			},
		}, metav1.CreateOptions{})
		require.NoError(b, err)
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: victimsPerBudget, CurrentHealthy: victimsPerBudget, DesiredHealthy: 0, ExpectedPods: victimsPerBudget}
		_, err = c.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
		require.NoError(b, err)
	}
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		pod, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("victim-%d", i), Labels: map[string]string{"pdb": fmt.Sprintf("pdb-%d", i/victimsPerBudget)}},
			Spec: corev1.PodSpec{
				NodeName:                      "node-1",
				TerminationGracePeriodSeconds: new(int64),
				Containers:                    []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause"}},
			},
		}, metav1.CreateOptions{})
		require.NoError(b, err)
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		pod, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(b, err)
		pods = append(pods, pod)
	}
	return pods
}

// writeVictimRemoval writes data, the result of one method, as a
// scheduler_perf DataItems file, workload VictimRemoval/ProtectedVictim (the
// unit is that of the CPU times; the report knows the others).
func writeVictimRemoval(b *testing.B, file, workload string, n int, data map[string]float64) {
	b.Helper()
	data["Victims"] = float64(n)
	items := map[string]any{
		"version": "v1",
		"dataItems": []any{map[string]any{
			"data":   data,
			"unit":   "ms",
			"labels": map[string]string{"Metric": "VictimRemovalCPU", "Name": workload + "/cpu"},
		}},
	}
	encoded, err := json.MarshalIndent(items, "", "  ")
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(file, append(encoded, '\n'), 0o644))
}
