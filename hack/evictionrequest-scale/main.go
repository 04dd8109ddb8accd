// Command evictionrequest-scale is the scale benchmark of the EvictionRequest
// controllers (KEP-4563) on the local cluster (`make bench-evictionrequest`,
// hack/make-rules/bench-evictionrequest.sh, which starts the cluster with an
// audit log). It is a benchmark, not a test: it measures, and fails only
// when a guarantee broke.
//
//  1. Happy path: -happy pods without a budget, one EvictionRequest each,
//     created at once; every Eviction must end TargetEvicted with its
//     imperative responder Completed (none Interrupted).
//  2. Blocked: -blocked pods behind a PodDisruptionBudget that allows no
//     disruption, one EvictionRequest each, watched for -blocked-for: no
//     Eviction may end (NoFurtherResponder or otherwise), no responder may
//     be Interrupted, and every Active responder's last report (heartbeat or
//     start) must stay within the API's 20-minute deadline.
//  3. Deletions: -deletions of the blocked pods deleted at once by a client;
//     their Evictions must end TargetEvicted with the imperative responder
//     Completed, not Interrupted (the evictionrequest-controller waits 5 s
//     for the completion).
//
// Then it counts, from the kube-apiserver's audit log, the requests each
// controller of kube-controller-manager made (by user agent) in each phase's
// namespace: per evicted pod, and per blocked Eviction per hour over the
// last -window of the blocked phase. Every request is named by the step of
// the KEP's flow it serves; one the table does not know is reported as such.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"kube-guard/test/e2e/framework"
)

const (
	// heartbeatDeadline is the API's deadline for an Active responder's
	// reports.
	heartbeatDeadline = 20 * time.Minute
	// userAgent is this program's; the controllers' requests are told from
	// it by theirs.
	userAgent = "evictionrequest-scale"
	requester = "scale.kube-guard.io/bench"
)

// controllers are the user-agent suffixes of the two controllers
// (kube-controller-manager's client of each controller appends its name).
var controllers = []string{"evictionrequest-controller", "imperative-eviction-responder-controller"}

// steps names each request of a controller by the step of the KEP's flow it
// serves.
var steps = map[string]string{
	"evictionrequest-controller create evictions":                   "one Eviction per target pod",
	"evictionrequest-controller update evictions/status":            "responders listed and the first activated; the imperative responder's completion once the pod is gone; the final condition (TargetEvicted, or Failed) with the Active responder's end",
	"evictionrequest-controller update evictionrequests/status":     "the Eviction's conditions mirrored into the request, with its observed generation (at the start, and when the Eviction ends)",
	"evictionrequest-controller create events":                      "an event when the Eviction ends, or a responder is interrupted",
	"evictionrequest-controller patch events":                       "the same event again (the event recorder's aggregation)",
	"evictionrequest-controller get pods":                           "quorum read of a target the pod informer does not show",
	"evictionrequest-controller get evictions":                      "read again after a conflicting status write",
	"imperative-eviction-responder-controller create pods/eviction": "the eviction through the eviction API (PodDisruptionBudgets decide)",
	// Upstream's controllers (v1.38, line 1.38) write with server-side
	// apply: a patch where line 1.37's update or create.
	"evictionrequest-controller patch evictions":                       "one Eviction per target pod, applied; its owner references and participant labels applied again when they change",
	"evictionrequest-controller patch evictions/status":                "responders listed and the first activated; the imperative responder's completion once the pod is gone; the final condition (TargetEvicted, or Failed) with the Active responder's end (applied)",
	"evictionrequest-controller patch evictionrequests/status":         "the Eviction's conditions mirrored into the request, with its observed generation (applied)",
	"imperative-eviction-responder-controller patch evictions/status":  "the responder's report: a heartbeat with a refused attempt, the pod terminating with its expected completion (applied)",
	"imperative-eviction-responder-controller update evictions/status": "the responder's report: a heartbeat with a refused attempt (at most every 3 minutes), the pod terminating with its expected completion",
	"imperative-eviction-responder-controller create events":           "the responder's event (KEP: optional, an appropriate number): Evicted, or FailedEviction when a refusal is new",
	"imperative-eviction-responder-controller patch events":            "the same event again (the event recorder's aggregation)",
	"imperative-eviction-responder-controller get pods":                "quorum read of a target the pod informer does not show",
	"imperative-eviction-responder-controller get evictions":           "read again after a conflicting status write",
}

type options struct {
	kubeconfig, auditLog, out string
	command                   string
	happy, blocked, deletions int
	blockedFor, window        time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the local cluster")
	flag.StringVar(&o.auditLog, "audit-log", "", "the kube-apiserver's audit log (JSON lines, level Metadata)")
	flag.StringVar(&o.out, "out", "", "write the results here: <out>.json and <out>.md")
	flag.StringVar(&o.command, "command", "make bench-evictionrequest", "the command the report names")
	flag.IntVar(&o.happy, "happy", 200, "pods evicted at once, without a budget")
	flag.IntVar(&o.blocked, "blocked", 5000, "pods whose eviction a budget blocks")
	flag.IntVar(&o.deletions, "deletions", 200, "blocked pods then deleted at once")
	flag.DurationVar(&o.blockedFor, "blocked-for", 35*time.Minute, "how long the blocked Evictions are watched")
	flag.DurationVar(&o.window, "window", 10*time.Minute, "the last part of the blocked phase counted per hour")
	render := flag.String("render", "", "write <out>.md again from this results file (<out>.json of a run), with this program's names of the KEP's steps")
	flag.Parse()
	if *render != "" {
		if err := rerender(*render, o); err != nil {
			fmt.Fprintln(os.Stderr, "evictionrequest-scale:", err)
			os.Exit(1)
		}
		return
	}
	if o.kubeconfig == "" || o.auditLog == "" || o.out == "" {
		fmt.Fprintln(os.Stderr, "usage: evictionrequest-scale -kubeconfig F -audit-log F -out F [flags]")
		os.Exit(2)
	}
	if o.deletions > o.blocked || o.window > o.blockedFor {
		fmt.Fprintln(os.Stderr, "-deletions must not exceed -blocked, -window must not exceed -blocked-for")
		os.Exit(2)
	}
	res, err := run(context.Background(), o)
	if res != nil {
		if werr := writeJSON(o.out+".json", res); werr != nil {
			err = errors.Join(err, werr)
		}
		if werr := os.WriteFile(o.out+".md", []byte(markdown(res, o.command, err)), 0o644); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "evictionrequest-scale:", err)
		os.Exit(1)
	}
}

// Results is what the benchmark measured.
type Results struct {
	Start, End time.Time
	Options    map[string]string
	// AuditLogFiles is how many files the audit log was read from (the
	// current one and its rotated backups).
	AuditLogFiles int

	HappyPods             int
	HappyEvictedSeconds   float64 // from the first request to the last TargetEvicted
	HappyCompleted        int
	HappyInterrupted      int
	HappyRequests         []Count // per evicted pod
	HappyRequestsPerPod   float64
	HappyRequestsAll      int
	HappyRequesterPerPod  float64 // this program's own requests (EvictionRequest creates)
	BlockedPods           int
	BlockedFinal          map[string]int // Evictions that ended, by condition/reason
	BlockedInterrupted    int
	MaxHeartbeatGap       Duration // the longest time between two reports of one Active responder, as the watch saw them
	MaxHeartbeatAgeAtEnd  Duration
	BlockedRequests       []Count // per blocked Eviction per hour, over the window
	BlockedRequestsHour   float64
	BlockedRequestsAll    []Count // per blocked Eviction over the whole phase
	BlockedStart          time.Time
	BlockedWindowStart    time.Time
	BlockedWindowEnd      time.Time
	DeletedPods           int
	DeletedCompleted      int
	DeletedInterrupted    int
	DeletedEvictedSeconds float64
	Violations            []string
}

// Count is the number of one kind of request, divided as its table says.
type Count struct {
	Request string  // "<controller> <verb> <resource>[/<subresource>]"
	Per     float64 // per pod, or per Eviction per hour
	Total   int
	Step    string // the KEP's step it serves, or "not a step of the KEP's flow"
}

// Duration prints as Go durations do in the JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Round(time.Second).String())
}

func (d *Duration) UnmarshalJSON(data []byte) error {
	var text string
	if err := json.Unmarshal(data, &text); err != nil {
		return err
	}
	parsed, err := time.ParseDuration(text)
	*d = Duration(parsed)
	return err
}

func writeJSON(path string, res *Results) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o options) (*Results, error) {
	cfg, err := framework.RestConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = 500, 1000, userAgent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return nil, err
	}
	if len(nodes.Items) == 0 {
		return nil, errors.New("no KWOK nodes (type=kwok)")
	}
	var nodeNames []string
	for _, n := range nodes.Items {
		nodeNames = append(nodeNames, n.Name)
	}
	res := &Results{Start: time.Now(), Options: map[string]string{
		"happy": fmt.Sprint(o.happy), "blocked": fmt.Sprint(o.blocked), "deletions": fmt.Sprint(o.deletions),
		"blocked-for": o.blockedFor.String(), "window": o.window.String(), "nodes": fmt.Sprint(len(nodeNames)),
	}}
	b := &bench{client: client, nodes: nodeNames}

	// 1. Happy path.
	const happyNS, blockedNS = "scale-happy", "scale-blocked"
	if err := b.namespace(ctx, happyNS); err != nil {
		return res, err
	}
	happy, err := b.pods(ctx, happyNS, "free", o.happy)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := b.requests(ctx, happyNS, happy); err != nil {
		return res, err
	}
	evs, err := b.waitEnded(ctx, happyNS, len(happy), 10*time.Minute)
	if err != nil {
		return res, err
	}
	res.HappyPods = len(happy)
	res.HappyEvictedSeconds = time.Since(t0).Seconds()
	res.HappyCompleted, res.HappyInterrupted = imperativeOutcome(evs)
	for _, ev := range evs {
		if !meta.IsStatusConditionTrue(ev.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) {
			res.Violations = append(res.Violations, fmt.Sprintf("happy path: Eviction %s did not end TargetEvicted", ev.Name))
		}
	}
	if res.HappyInterrupted > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("happy path: %d imperative responders Interrupted", res.HappyInterrupted))
	}
	logf("happy path: %d pods evicted in %.1f s, responders Completed %d, Interrupted %d", len(happy), res.HappyEvictedSeconds, res.HappyCompleted, res.HappyInterrupted)

	// 2. Blocked.
	if err := b.namespace(ctx, blockedNS); err != nil {
		return res, err
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(blockedNS).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "none"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptrTo(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "blocked"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	blocked, err := b.pods(ctx, blockedNS, "blocked", o.blocked)
	if err != nil {
		return res, err
	}
	mon, err := watchEvictions(ctx, client, blockedNS)
	if err != nil {
		return res, err
	}
	defer mon.stop()
	blockedStart := time.Now()
	if err := b.requests(ctx, blockedNS, blocked); err != nil {
		return res, err
	}
	logf("blocked: %d EvictionRequests created in %.0f s; watching for %v", len(blocked), time.Since(blockedStart).Seconds(), o.blockedFor)
	blockedEnd := blockedStart.Add(o.blockedFor)
	tick := time.NewTicker(time.Minute)
	for time.Now().Before(blockedEnd) {
		select {
		case <-tick.C:
		case <-time.After(time.Until(blockedEnd)):
		}
		s := mon.snapshot(time.Now())
		logf("blocked: %d Evictions, %d Active imperative responders, oldest report %v ago, longest gap %v, %d ended, %d interrupted",
			s.evictions, s.active, s.maxAge.Round(time.Second), s.maxGap.Round(time.Second), s.ended, s.interrupted)
	}
	tick.Stop()
	s := mon.snapshot(time.Now())
	res.BlockedPods = len(blocked)
	res.BlockedFinal = s.final
	res.BlockedInterrupted = s.interrupted
	res.MaxHeartbeatGap = Duration(s.maxGap)
	res.MaxHeartbeatAgeAtEnd = Duration(s.maxAge)
	res.BlockedStart = blockedStart
	res.BlockedWindowStart, res.BlockedWindowEnd = blockedEnd.Add(-o.window), blockedEnd
	if s.evictions != len(blocked) || s.active != len(blocked) {
		res.Violations = append(res.Violations, fmt.Sprintf("blocked: %d Evictions, %d with the imperative responder Active, want %d", s.evictions, s.active, len(blocked)))
	}
	if s.ended > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("blocked: %d Evictions ended: %v", s.ended, s.final))
	}
	if s.interrupted > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("blocked: %d responders Interrupted", s.interrupted))
	}
	if s.maxGap >= heartbeatDeadline || s.maxAge >= heartbeatDeadline {
		res.Violations = append(res.Violations, fmt.Sprintf("blocked: a report came %v after the previous one (%v old at the end), the deadline is %v", s.maxGap, s.maxAge, heartbeatDeadline))
	}

	// 3. Deletions of blocked pods, at once.
	deleted := blocked[:o.deletions]
	t1 := time.Now()
	var wg sync.WaitGroup
	var deleteErrs atomic.Int32
	for _, p := range deleted {
		wg.Go(func() {
			if err := client.CoreV1().Pods(blockedNS).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				deleteErrs.Add(1)
			}
		})
	}
	wg.Wait()
	if n := deleteErrs.Load(); n > 0 {
		return res, fmt.Errorf("%d pod deletions failed", n)
	}
	ended, err := mon.waitEnded(ctx, podUIDs(deleted), 5*time.Minute)
	if err != nil {
		return res, err
	}
	res.DeletedPods = len(deleted)
	res.DeletedEvictedSeconds = time.Since(t1).Seconds()
	res.DeletedCompleted, res.DeletedInterrupted = imperativeOutcome(ended)
	if res.DeletedInterrupted > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("deletions: %d imperative responders Interrupted", res.DeletedInterrupted))
	}
	logf("deletions: %d pods deleted at once, their Evictions ended in %.1f s, responders Completed %d, Interrupted %d",
		len(deleted), res.DeletedEvictedSeconds, res.DeletedCompleted, res.DeletedInterrupted)
	res.End = time.Now()

	// The audit log: the apiserver writes it as requests complete; a
	// request of the last phase may still be in its buffer.
	if err := countRequests(o.auditLog, res, happyNS, blockedNS, t0, blockedStart, blockedEnd, o.window); err != nil {
		return res, err
	}
	if len(res.Violations) > 0 {
		return res, fmt.Errorf("%d guarantees broke:\n  %s", len(res.Violations), strings.Join(res.Violations, "\n  "))
	}
	return res, nil
}

func ptrTo[T any](v T) *T { return &v }

type bench struct {
	client kubernetes.Interface
	nodes  []string
}

func (b *bench) namespace(ctx context.Context, name string) error {
	_, err := b.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s exists: the benchmark needs a cluster of its own", name)
	}
	return err
}

// parallel runs fn for 0..n-1 on 32 goroutines and returns the first error.
func parallel(n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// pods creates n running pods labelled app=<app>, spread over the nodes
// (bound directly: the scheduler is not what is measured), and waits until
// every one runs.
func (b *bench) pods(ctx context.Context, ns, app string, n int) ([]*corev1.Pod, error) {
	pods := make([]*corev1.Pod, n)
	err := parallel(n, func(i int) error {
		p, err := b.client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", app, i), Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{
				NodeName:                      b.nodes[i%len(b.nodes)],
				Containers:                    []corev1.Container{{Name: "app", Image: framework.PodImage}},
				TerminationGracePeriodSeconds: ptrTo[int64](30),
			},
		}, metav1.CreateOptions{})
		pods[i] = p
		return err
	})
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%d pods of %s did not all run: %w", n, ns, err)
	}
	logf("%s: %d pods running", ns, n)
	return pods, nil
}

func (b *bench) requests(ctx context.Context, ns string, pods []*corev1.Pod) error {
	return parallel(len(pods), func(i int) error {
		p := pods[i]
		_, err := b.client.LifecycleV1alpha1().EvictionRequests(ns).Create(ctx, &lifecyclev1alpha1.EvictionRequest{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Spec: lifecyclev1alpha1.EvictionRequestSpec{
				Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: p.Name, UID: p.UID}},
				Requester: requester,
				Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
			},
		}, metav1.CreateOptions{})
		return err
	})
}

func final(ev *lifecyclev1alpha1.Eviction) *metav1.Condition {
	for _, t := range []lifecyclev1alpha1.EvictionConditionType{lifecyclev1alpha1.EvictionConditionTargetEvicted, lifecyclev1alpha1.EvictionConditionFailed} {
		if c := meta.FindStatusCondition(ev.Status.Conditions, string(t)); c != nil && c.Status == metav1.ConditionTrue {
			return c
		}
	}
	return nil
}

// waitEnded waits until n Evictions of ns ended and every EvictionRequest
// mirrors the end, and returns the Evictions.
func (b *bench) waitEnded(ctx context.Context, ns string, n int, timeout time.Duration) ([]lifecyclev1alpha1.Eviction, error) {
	var evs []lifecyclev1alpha1.Eviction
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := b.client.LifecycleV1alpha1().Evictions(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ended := 0
		for i := range list.Items {
			if final(&list.Items[i]) != nil {
				ended++
			}
		}
		if ended < n {
			return false, nil
		}
		ers, err := b.client.LifecycleV1alpha1().EvictionRequests(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, er := range ers.Items {
			if !meta.IsStatusConditionTrue(er.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) &&
				!meta.IsStatusConditionTrue(er.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)) {
				return false, nil
			}
		}
		evs = list.Items
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the Evictions of %s did not all end: %w", ns, err)
	}
	return evs, nil
}

func imperativeState(ev *lifecyclev1alpha1.Eviction) lifecyclev1alpha1.ResponderStateType {
	for _, tr := range ev.Status.TargetResponders {
		if tr.Name == lifecyclev1alpha1.EvictionResponderImperativeEviction {
			return tr.State
		}
	}
	return ""
}

func imperativeOutcome(evs []lifecyclev1alpha1.Eviction) (completed, interrupted int) {
	for i := range evs {
		switch imperativeState(&evs[i]) {
		case lifecyclev1alpha1.ResponderStateCompleted:
			completed++
		case lifecyclev1alpha1.ResponderStateInterrupted:
			interrupted++
		}
	}
	return completed, interrupted
}

func podUIDs(pods []*corev1.Pod) map[string]bool {
	uids := map[string]bool{}
	for _, p := range pods {
		uids[string(p.UID)] = true
	}
	return uids
}

// monitor follows the Evictions of a namespace with a watch: every report of
// the imperative responder (heartbeat, or start), the longest time between
// two, and how they end.
type monitor struct {
	mu     sync.Mutex
	last   map[string]lifecyclev1alpha1.Eviction // by name
	report map[string]time.Time                  // the responder's last report, by Eviction name
	maxGap time.Duration
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func watchEvictions(ctx context.Context, client kubernetes.Interface, ns string) (*monitor, error) {
	ctx, cancel := context.WithCancel(ctx)
	m := &monitor{last: map[string]lifecyclev1alpha1.Eviction{}, report: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	// A list, then a watch that starts again from the last version it saw
	// whenever kube-apiserver ends it (it ends each watch after a random
	// time between its --min-request-timeout and twice that: a 35-minute
	// phase outlives one).
	evictions := client.LifecycleV1alpha1().Evictions(ns)
	list, err := evictions.List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	for i := range list.Items {
		m.observe(&list.Items[i])
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			return evictions.Watch(ctx, options)
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(m.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.ResultChan():
				if !ok {
					m.mu.Lock()
					m.err = errors.New("the watch of Evictions closed")
					m.mu.Unlock()
					return
				}
				if e.Type == watch.Error {
					// The RetryWatcher gives up (410 Gone: the
					// version it resumes from is compacted).
					m.mu.Lock()
					m.err = fmt.Errorf("the watch of Evictions ended: %v", apierrors.FromObject(e.Object))
					m.mu.Unlock()
					return
				}
				if e.Type != watch.Added && e.Type != watch.Modified {
					continue
				}
				if ev, ok := e.Object.(*lifecyclev1alpha1.Eviction); ok {
					m.observe(ev)
				}
			}
		}
	}()
	return m, nil
}

func (m *monitor) stop() {
	m.cancel()
	<-m.done
}

func (m *monitor) observe(ev *lifecyclev1alpha1.Eviction) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last[ev.Name] = *ev
	for _, rs := range ev.Status.Responders {
		if rs.Name != lifecyclev1alpha1.EvictionResponderImperativeEviction || rs.StartTime == nil {
			continue
		}
		at := rs.StartTime.Time
		if rs.HeartbeatTime != nil && rs.HeartbeatTime.After(at) {
			at = rs.HeartbeatTime.Time
		}
		prev, seen := m.report[ev.Name]
		if !seen {
			prev = rs.StartTime.Time
		}
		if gap := at.Sub(prev); gap > m.maxGap {
			m.maxGap = gap
		}
		m.report[ev.Name] = at
	}
}

type snapshot struct {
	evictions, active, ended, interrupted int
	final                                 map[string]int
	maxAge, maxGap                        time.Duration
}

func (m *monitor) snapshot(now time.Time) snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := snapshot{evictions: len(m.last), final: map[string]int{}, maxGap: m.maxGap}
	for name, ev := range m.last {
		if c := final(&ev); c != nil {
			s.ended++
			s.final[c.Type+"/"+c.Reason]++
		}
		switch imperativeState(&ev) {
		case lifecyclev1alpha1.ResponderStateActive:
			s.active++
			if at, ok := m.report[name]; ok && now.Sub(at) > s.maxAge {
				s.maxAge = now.Sub(at)
			}
		case lifecyclev1alpha1.ResponderStateInterrupted:
			s.interrupted++
		}
	}
	return s
}

// waitEnded waits until the Evictions of the pods with uids ended, as the
// watch shows them.
func (m *monitor) waitEnded(ctx context.Context, uids map[string]bool, timeout time.Duration) ([]lifecyclev1alpha1.Eviction, error) {
	var ended []lifecyclev1alpha1.Eviction
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.err != nil {
			return false, m.err
		}
		ended = ended[:0]
		for _, ev := range m.last {
			if ev.Spec.Target.Pod != nil && uids[string(ev.Spec.Target.Pod.UID)] && final(&ev) != nil {
				ended = append(ended, ev)
			}
		}
		return len(ended) == len(uids), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%d of %d Evictions of deleted pods ended: %w", len(ended), len(uids), err)
	}
	return ended, nil
}

// auditEvent is what the benchmark reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Stage                    string    `json:"stage"`
	Verb                     string    `json:"verb"`
	UserAgent                string    `json:"userAgent"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	ObjectRef                *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// component returns the controller a user agent names, or "".
func component(userAgent string) string {
	for _, c := range controllers {
		if strings.HasSuffix(userAgent, "/"+c) {
			return c
		}
	}
	return ""
}

// auditLogFiles returns the audit log at path and the backups kube-apiserver
// rotated it into, oldest first: with no --audit-log-maxsize, kube-apiserver
// rotates the log every 100 MB (lumberjack's default) into
// <name>-<time>.<ext> beside it, and a benchmark that reads only the current
// file loses its first phases' requests.
func auditLogFiles(path string) ([]string, error) {
	ext := filepath.Ext(path)
	backups, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-*" + ext)
	if err != nil {
		return nil, err
	}
	sort.Strings(backups) // the time in each name sorts as it reads
	return append(backups, path), nil
}

func countRequests(path string, res *Results, happyNS, blockedNS string, happyStart, blockedStart, blockedEnd time.Time, window time.Duration) error {
	files, err := auditLogFiles(path)
	if err != nil {
		return err
	}
	happy, blockedWindow, blockedAll := map[string]int{}, map[string]int{}, map[string]int{}
	happyRequester := 0
	windowStart := blockedEnd.Add(-window)
	for _, file := range files {
		if err := scanAuditLog(file, func(e auditEvent) {
			countAuditEvent(e, happy, blockedWindow, blockedAll, &happyRequester, happyNS, blockedNS, happyStart, blockedStart, blockedEnd, windowStart)
		}); err != nil {
			return err
		}
	}
	res.AuditLogFiles = len(files)
	return countsInto(res, happy, blockedWindow, blockedAll, happyRequester, window)
}

// scanAuditLog calls f with each completed request of the audit log file
// path.
func scanAuditLog(path string, f func(auditEvent)) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("%s line %d: %w", path, lines, err)
		}
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil {
			continue
		}
		f(e)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if lines == 0 {
		return fmt.Errorf("%s is empty: was the cluster started with an audit policy?", path)
	}
	return nil
}

// countAuditEvent counts one completed request in the phase it belongs to.
func countAuditEvent(e auditEvent, happy, blockedWindow, blockedAll map[string]int, happyRequester *int,
	happyNS, blockedNS string, happyStart, blockedStart, blockedEnd, windowStart time.Time) {
	resource := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		resource += "/" + e.ObjectRef.Subresource
	}
	if e.ObjectRef.Namespace == happyNS && e.UserAgent == userAgent && e.Verb == "create" && resource == "evictionrequests" {
		*happyRequester++
	}
	c := component(e.UserAgent)
	if c == "" {
		return
	}
	key := c + " " + e.Verb + " " + resource
	switch e.ObjectRef.Namespace {
	case happyNS:
		if !e.RequestReceivedTimestamp.Before(happyStart) {
			happy[key]++
		}
	case blockedNS:
		at := e.RequestReceivedTimestamp
		if !at.Before(blockedStart) && at.Before(blockedEnd) {
			blockedAll[key]++
			if !at.Before(windowStart) {
				blockedWindow[key]++
			}
		}
	}
}

// countsInto writes the counts of each phase into res.
func countsInto(res *Results, happy, blockedWindow, blockedAll map[string]int, happyRequester int, window time.Duration) error {
	res.HappyRequests, res.HappyRequestsPerPod, res.HappyRequestsAll = counts(happy, float64(res.HappyPods))
	res.HappyRequesterPerPod = float64(happyRequester) / float64(res.HappyPods)
	perHour := float64(res.BlockedPods) * window.Hours()
	res.BlockedRequests, res.BlockedRequestsHour, _ = counts(blockedWindow, perHour)
	res.BlockedRequestsAll, _, _ = counts(blockedAll, float64(res.BlockedPods))
	return nil
}

// counts divides each count by per and names its step, in a stable order.
func counts(m map[string]int, per float64) ([]Count, float64, int) {
	var out []Count
	sum, total := 0.0, 0
	for k, n := range m {
		step, ok := steps[k]
		if !ok {
			step = "not a step of the KEP's flow"
		}
		out = append(out, Count{Request: k, Per: float64(n) / per, Total: n, Step: step})
		sum += float64(n) / per
		total += n
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Request < out[j].Request })
	return out, sum, total
}

func markdown(res *Results, command string, runErr error) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# EvictionRequest controllers at scale (KEP-4563)")
	p("")
	p("Written by `%s` (`hack/evictionrequest-scale`); do not edit.", command)
	p("")
	p("| | |")
	p("|---|---|")
	p("| date (UTC) | %s, %s |", res.Start.UTC().Format(time.RFC3339), res.End.Sub(res.Start).Round(time.Second))
	p("| settings | %s |", settings(res.Options))
	p("| kube-controller-manager | its default client rate limits (`--kube-api-qps` 20, `--kube-api-burst` 30; a client of its own for each controller) |")
	if res.AuditLogFiles > 1 {
		p("| audit log | read from %d files (kube-apiserver rotated it every 100 MB) |", res.AuditLogFiles)
	}
	if runErr != nil {
		p("| result | **failed**: %s |", strings.ReplaceAll(runErr.Error(), "\n", " "))
	} else {
		p("| result | every guarantee held |")
	}
	p("")
	p("## %d pods evicted at once (no budget)", res.HappyPods)
	p("")
	p("All ended `TargetEvicted` in %.1f s; imperative responders Completed %d, Interrupted %d. The requester made %.2f requests per pod (its EvictionRequest).", res.HappyEvictedSeconds, res.HappyCompleted, res.HappyInterrupted, res.HappyRequesterPerPod)
	p("")
	p("Requests of the controllers per evicted pod: **%.2f** (%d in all)", res.HappyRequestsPerPod, res.HappyRequestsAll)
	p("")
	table(p, res.HappyRequests, "per pod")
	p("")
	p("## %d pods whose eviction a budget blocks", res.BlockedPods)
	p("")
	p("A PodDisruptionBudget with `maxUnavailable: 0`; Evictions ended: %d %v, responders Interrupted: %d; longest time between two reports of one responder (the watch): %v; oldest report at the end: %v (deadline %v).",
		sum(res.BlockedFinal), res.BlockedFinal, res.BlockedInterrupted, time.Duration(res.MaxHeartbeatGap).Round(time.Second), time.Duration(res.MaxHeartbeatAgeAtEnd).Round(time.Second), heartbeatDeadline)
	p("")
	p("Requests of the controllers per blocked Eviction per hour, over the phase's last %s (%s to %s): **%.1f**",
		res.BlockedWindowEnd.Sub(res.BlockedWindowStart), res.BlockedWindowStart.UTC().Format("15:04:05"), res.BlockedWindowEnd.UTC().Format("15:04:05"), res.BlockedRequestsHour)
	p("")
	table(p, res.BlockedRequests, "per Eviction-hour")
	p("")
	p("Over the whole phase (%s), per blocked Eviction:", res.BlockedWindowEnd.Sub(res.BlockedStart).Round(time.Minute))
	p("")
	table(p, res.BlockedRequestsAll, "per Eviction")
	p("")
	p("## %d blocked pods deleted at once", res.DeletedPods)
	p("")
	p("Their Evictions ended in %.1f s; imperative responders Completed %d, Interrupted %d.", res.DeletedEvictedSeconds, res.DeletedCompleted, res.DeletedInterrupted)
	return b.String()
}

func settings(m map[string]string) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("-%s=%s", k, m[k]))
	}
	return "`" + strings.Join(parts, " ") + "`"
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func table(p func(string, ...any), counts []Count, per string) {
	p("| request | %s | in all | the KEP's step |", per)
	p("|---|---:|---:|---|")
	for _, c := range counts {
		p("| `%s` | %.2f | %d | %s |", c.Request, c.Per, c.Total, c.Step)
	}
}

// rerender writes the markdown of a run's results again.
func rerender(path string, o options) error {
	if o.out == "" {
		return errors.New("-render needs -out")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, counts := range [][]Count{res.HappyRequests, res.BlockedRequests, res.BlockedRequestsAll} {
		for i := range counts {
			if step, ok := steps[counts[i].Request]; ok {
				counts[i].Step = step
			}
		}
	}
	var runErr error
	if len(res.Violations) > 0 {
		runErr = fmt.Errorf("%d guarantees broke:\n  %s", len(res.Violations), strings.Join(res.Violations, "\n  "))
	}
	return os.WriteFile(o.out+".md", []byte(markdown(&res, o.command, runErr)), 0o644)
}
