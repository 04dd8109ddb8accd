package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"kube-guard/test/e2e/framework"
	"kube-guard/test/util/controlplane"
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
// evacuation mode (evictionRequests), with the permissions of the RBAC
// manifest it ships and no more, asks for every eviction with one
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
	vm := c.evacuationPod(t, ns, "vm", "", true, false, withResponder(migrator))
	c.evacuationPod(t, ns, "web", "", true, false)
	busy := c.evacuationPod(t, ns, "busy", "", true, false, withResponder(neverAnswers))
	// Another requester's eviction of busy stays in progress: its responder
	// never answers within the test.
	createEvictionRequest(t, c.Cluster, busy, "someone-else")

	d := c.startDescheduler(t, evictionRequestPolicy(ns, ""), time.Second, evictionRequestGates, "--kubeconfig="+c.shippedRBACKubeconfig(t))

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

// evictionRequestGates are the descheduler's gates of the evacuation mode.
const evictionRequestGates = "--feature-gates=EvictionsInBackground=true,EvictionRequestAPI=true"

// neverAnswers is a responder nobody plays: a pod that declares it keeps its
// eviction in progress for the whole test (the controller moves on only
// after 20 minutes without a heartbeat).
const neverAnswers = "slow.e2e.kube-guard.io/never-answers"

// evictionRequestPolicy is deschedulerPolicy in the evacuation mode, with
// extra top-level settings.
func evictionRequestPolicy(ns, extra string) string {
	return deschedulerPolicy(ns, extra+"evictionRequests:\n  requester: "+deschedulerRequester+"\n")
}

// requestIDs returns, by target pod name, the name and UID of each of the
// descheduler's requests in ns.
func requestIDs(t *testing.T, c *cluster, ns string) map[string][]string {
	t.Helper()
	byPod, err := requestsOf(context.Background(), c, ns, deschedulerRequester)
	require.NoError(t, err)
	out := map[string][]string{}
	for pod, ers := range byPod {
		for _, er := range ers {
			out[pod] = append(out[pod], er.Name+"/"+string(er.UID))
		}
	}
	return out
}

// TestDeschedulerEvacuationModeLimitsAndRestarts: in the evacuation mode,
// requests of any requester still in progress count against the per-node
// limit: with two pods of a node already being evicted for someone else
// and a limit of 3, a cycle asks for one pod only. Neither a second
// descheduler process running several cycles nor one that is killed and
// started again makes a second request or a new one: the requests keep
// their names and UIDs.
func TestDeschedulerEvacuationModeLimitsAndRestarts(t *testing.T) {
	c := setup(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep1397-evictionrequests-limit")
	node := c.Nodes[0].Name
	for _, name := range []string{"running-1", "running-2"} {
		pod := c.evacuationPod(t, ns, name, node, true, false, withResponder(neverAnswers))
		createEvictionRequest(t, c.Cluster, pod, "drain-"+name)
	}
	for _, name := range []string{"new-1", "new-2", "new-3"} {
		c.evacuationPod(t, ns, name, node, true, false, withResponder(neverAnswers))
	}
	policy := evictionRequestPolicy(ns, "maxNoOfPodsEvacuationsPerNode: 3\n")

	c.startDescheduler(t, policy, 0, evictionRequestGates).wait(t)
	first := requestIDs(t, c, ns)
	require.Len(t, first, 1, "with 2 evictions in progress on the node and a limit of 3, one new request was expected: %v", first)
	for pod, ids := range first {
		require.True(t, strings.HasPrefix(pod, "new-"), "a pod whose eviction is in progress was asked for: %s", pod)
		require.Len(t, ids, 1, "%s was asked for twice", pod)
	}

	since := time.Now()
	d := c.startDescheduler(t, policy, time.Second, evictionRequestGates)
	c.waitCycles(t, d, since, 3)
	require.Equal(t, first, requestIDs(t, c, ns), "a second descheduler changed the requests")

	// Killed mid-run, then started again.
	require.NoError(t, d.cmd.Process.Kill())
	require.Error(t, d.exit(t), "the killed descheduler exited cleanly")
	since = time.Now()
	d = c.startDescheduler(t, policy, time.Second, evictionRequestGates)
	c.waitCycles(t, d, since, 3)
	require.Equal(t, first, requestIDs(t, c, ns), "the restarted descheduler changed the requests")
	require.Empty(t, d.logLines("Evicted pod"), "the descheduler evicted a pod itself")
	body := c.deschedulerMetrics(t, d)
	require.GreaterOrEqual(t, framework.MetricSum(body, podsEvictedTotalMetric, map[string]string{"result": nodeEvacuationLimitResult}), 1.0,
		"the node limit refused requests every cycle; metrics:\n%s", evacuationMetrics(body))
}

// intentChange is an EvictionRequest of the descheduler's asking for an
// eviction (created, or its intent set back to Eviction) or withdrawing it,
// at the time the test's watch saw it.
type intentChange struct {
	at     time.Time
	name   string
	intent lifecyclev1alpha1.EvictionRequestIntent
}

// intentTimeline watches the descheduler's EvictionRequests of ns and
// records every change of intent. The watch must last the test: if it ends
// early, the test fails.
type intentTimeline struct {
	mu      sync.Mutex
	changes []intentChange
}

func (c *cluster) watchIntents(t *testing.T, ns string) *intentTimeline {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	tl := &intentTimeline{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := map[types.UID]lifecyclev1alpha1.EvictionRequestIntent{}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						t.Errorf("the watch of %s's EvictionRequests ended before the test did", ns)
					}
					return
				}
				er, isRequest := ev.Object.(*lifecyclev1alpha1.EvictionRequest)
				if !isRequest || er.Spec.Requester != deschedulerRequester || ev.Type == watch.Deleted {
					continue
				}
				if last[er.UID] != er.Spec.Intent {
					last[er.UID] = er.Spec.Intent
					tl.mu.Lock()
					tl.changes = append(tl.changes, intentChange{at: time.Now(), name: er.Name, intent: er.Spec.Intent})
					tl.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return tl
}

func (tl *intentTimeline) snapshot() []intentChange {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.changes)
}

// String lists the changes as offsets from the first: "+0.000s Eviction, +4.013s Withdrawn, ...".
func (tl *intentTimeline) String() string {
	changes := tl.snapshot()
	if len(changes) == 0 {
		return "no change"
	}
	parts := make([]string, 0, len(changes))
	for _, ch := range changes {
		parts = append(parts, fmt.Sprintf("+%.3fs %s", ch.at.Sub(changes[0].at).Seconds(), ch.intent))
	}
	return strings.Join(parts, ", ")
}

func (tl *intentTimeline) withdrawals() int {
	n := 0
	for _, ch := range tl.snapshot() {
		if ch.intent == lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
			n++
		}
	}
	return n
}

// TestDeschedulerEvacuationModeTTL: a request still in progress after
// maxEvacuationRequestTTL is withdrawn (an EvacuationAbandoned event on the
// pod, descheduler_pod_evacuations_abandoned_total) and the pod may be
// asked for again, which gives it a whole TTL again: every withdrawal comes
// at least the TTL after the ask before it. The pod, whose responder never
// answers, is never evicted by anyone. The descheduler runs with the RBAC
// it ships (withdrawing and the event need their verbs).
func TestDeschedulerEvacuationModeTTL(t *testing.T) {
	c := setup(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep1397-evictionrequests-ttl")
	pod := c.evacuationPod(t, ns, "stuck", "", true, false, withResponder(neverAnswers))
	const ttl = 4 * time.Second
	timeline := c.watchIntents(t, ns)

	d := c.startDescheduler(t, evictionRequestPolicy(ns, fmt.Sprintf("maxEvacuationRequestTTL: %s\n", ttl)), time.Second,
		evictionRequestGates, "--kubeconfig="+c.shippedRBACKubeconfig(t))
	c.Poll(t, "the request of "+pod.Name+" to be withdrawn twice", func(context.Context) (bool, error) {
		return timeline.withdrawals() >= 2, nil
	})

	// The watch sees each change a moment after it was made; two such
	// delays rarely differ by more than this.
	const watchSkew = 250 * time.Millisecond
	changes := timeline.snapshot()
	var asked time.Time
	withdrawn := 0
	for _, ch := range changes {
		switch ch.intent {
		case lifecyclev1alpha1.EvictionRequestIntentEviction:
			require.True(t, asked.IsZero(), "asked twice without a withdrawal between: %s", timeline)
			asked = ch.at
		case lifecyclev1alpha1.EvictionRequestIntentWithdrawn:
			require.False(t, asked.IsZero(), "withdrawn without an ask before: %s", timeline)
			require.GreaterOrEqual(t, ch.at.Sub(asked), ttl-watchSkew,
				"withdrawn %v after it was asked for, before the TTL %v: %s", ch.at.Sub(asked), ttl, timeline)
			asked = time.Time{}
			withdrawn++
		}
	}
	require.GreaterOrEqual(t, withdrawn, 2)

	got, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err, "the pod was evicted although its responder never answered")
	require.Equal(t, pod.UID, got.UID)
	require.Empty(t, d.logLines("Evicted pod"), "the descheduler evicted a pod itself")

	body := c.pollMetrics(t, d, "two abandoned requests in the metrics", func(body string) bool {
		return framework.MetricSum(body, evacuationsAbandonedMetric, map[string]string{"strategy": "PodLifeTime", "profile": profileName}) >= 2
	})
	require.Zero(t, framework.MetricSum(body, evacuationsTotalMetric, map[string]string{"result": "error"}), "metrics:\n%s", evacuationMetrics(body))
	c.Poll(t, "an EvacuationAbandoned event on "+pod.Name, func(ctx context.Context) (bool, error) {
		events, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(e eventsv1.Event) bool {
			return e.Reason == "EvacuationAbandoned" && e.Regarding.Name == pod.Name && e.Type == corev1.EventTypeWarning
		}), nil
	})
}

// shippedRBACKubeconfig applies the RBAC manifest the patched descheduler
// ships (kubernetes/base/rbac.yaml of its tree: a ClusterRole, a Role, the
// descheduler-sa ServiceAccount and their bindings), removes it at cleanup,
// and returns a kubeconfig that acts as that ServiceAccount: a descheduler
// run with it has exactly the permissions users give theirs.
func (c *cluster) shippedRBACKubeconfig(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	manifest, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "_output", "src", "descheduler", "kubernetes", "base", "rbac.yaml"))
	require.NoError(t, err, "the descheduler's tree is not materialised (make build)")
	const ns = metav1.NamespaceSystem
	var sa string
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &meta))
		switch meta.Kind {
		case "":
			continue
		case "ClusterRole":
			var o rbacv1.ClusterRole
			require.NoError(t, yaml.Unmarshal(doc, &o))
			applyAndClean(t, c.Client.RbacV1().ClusterRoles(), &o)
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			require.NoError(t, yaml.Unmarshal(doc, &o))
			applyAndClean(t, c.Client.RbacV1().ClusterRoleBindings(), &o)
		case "Role":
			var o rbacv1.Role
			require.NoError(t, yaml.Unmarshal(doc, &o))
			applyAndClean(t, c.Client.RbacV1().Roles(ns), &o)
		case "RoleBinding":
			var o rbacv1.RoleBinding
			require.NoError(t, yaml.Unmarshal(doc, &o))
			applyAndClean(t, c.Client.RbacV1().RoleBindings(ns), &o)
		case "ServiceAccount":
			var o corev1.ServiceAccount
			require.NoError(t, yaml.Unmarshal(doc, &o))
			require.Equal(t, ns, o.Namespace)
			applyAndClean(t, c.Client.CoreV1().ServiceAccounts(ns), &o)
			sa = o.Name
		default:
			t.Fatalf("unexpected %s in the descheduler's RBAC manifest", meta.Kind)
		}
	}
	require.NotEmpty(t, sa, "no ServiceAccount in the descheduler's RBAC manifest")
	token, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	config, err := clientcmd.LoadFromFile(os.Getenv("KUBE_GUARD_E2E_KUBECONFIG"))
	require.NoError(t, err)
	current := config.Contexts[config.CurrentContext]
	require.NotNil(t, current, "the kubeconfig has no current context")
	config.AuthInfos = map[string]*clientcmdapi.AuthInfo{sa: {Token: token.Status.Token}}
	config.Contexts = map[string]*clientcmdapi.Context{sa: {Cluster: current.Cluster, AuthInfo: sa}}
	config.CurrentContext = sa
	path := filepath.Join(t.TempDir(), "descheduler-sa.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*config, path))
	return path
}

// objectClient is what applyAndClean needs of a typed client.
type objectClient[T runtime.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// applyAndClean creates obj (it must not exist: the tests that use it do
// not run in parallel) and deletes it at cleanup.
func applyAndClean[T interface {
	runtime.Object
	GetName() string
}](t *testing.T, client objectClient[T], obj T) {
	t.Helper()
	_, err := client.Create(context.Background(), obj, metav1.CreateOptions{})
	require.NoError(t, err, "creating %s", obj.GetName())
	t.Cleanup(func() {
		if err := client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", obj.GetName(), err)
		}
	})
}
