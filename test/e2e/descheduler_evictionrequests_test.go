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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"kube-guard/test/e2e/framework"
	"kube-guard/test/util/controlplane"
)

const deschedulerRequester = "descheduler.e2e.kube-guard.io/main"

// withResponder makes a pod declare an eviction responder of its own.
// withoutRequestEvictOnly: the pod does not carry the request-evict-only
// annotation, as a pod of the evacuation mode need not.
func withoutRequestEvictOnly(pod *corev1.Pod) { delete(pod.Annotations, evictionRequestAnnotation) }

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
// EvictionRequest per pod and never evicts a running pod itself, but one
// that carries the request-evict-only annotation and declares no responder
// (KEP-1397's fallback to the eviction API). kube-controller-manager hands a
// pod that declares its own responder to that responder first (the test
// plays it: it removes the pod, then completes) and evicts a pod that
// declares none through the eviction API. A pod whose eviction another
// requester has in progress is left alone. Once finished, the descheduler
// deletes its requests.
func TestDeschedulerEvacuationModeEvictionRequests(t *testing.T) {
	c := setupDescheduler(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep1397-evictionrequests")
	const migrator = "migrator.e2e.kube-guard.io/vm"
	vm := c.evacuationPod(t, ns, "vm", "", true, false, withResponder(migrator))
	c.evacuationPod(t, ns, "web", "", true, false, withoutRequestEvictOnly)
	// legacy asks for eviction in background through the annotation and
	// declares no responder: the descheduler evicts it through the
	// eviction API (no webhook takes it over here: it is evicted).
	c.evacuationPod(t, ns, "legacy", "", true, false)
	busy := c.evacuationPod(t, ns, "busy", "", true, false, withResponder(neverAnswers))
	// Another requester's eviction of busy stays in progress: its responder
	// never answers within the test.
	createEvictionRequest(t, c.Cluster, busy, "someone-else")

	// The descheduler deletes its finished requests: read their last states.
	last := c.watchLifecycleObjects(t, ns)
	d := c.startDescheduler(t, evictionRequestPolicy(ns, ""), time.Second, evictionRequestGates, "--kubeconfig="+c.shippedRBACKubeconfig(t))

	var webRequest string
	c.Poll(t, "the descheduler to request the evictions of vm and web", func(ctx context.Context) (bool, error) {
		byPod, err := requestsOf(ctx, c, ns, deschedulerRequester)
		if err != nil {
			return false, err
		}
		if len(byPod["web"]) == 1 {
			webRequest = byPod["web"][0].Name
		}
		return len(byPod["vm"]) == 1 && webRequest != "", nil
	})

	// web has no responder of its own: kube-controller-manager evicts it.
	c.Poll(t, "web's request to report TargetEvicted", func(context.Context) (bool, error) {
		er, _ := last.get(webRequest)
		return er != nil && meta.IsStatusConditionTrue(er.(*lifecyclev1alpha1.EvictionRequest).Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)), nil
	})

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

	// The migrator moves vm away: it removes the pod and completes right
	// after. kube-controller-manager gives it 5 s to once the pod is gone,
	// so it ends Completed, not Interrupted.
	require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(context.Background(), "vm", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	c.Poll(t, migrator+" to report completion", func(ctx context.Context) (bool, error) {
		ev, err := evictionOf(ctx, c.Cluster, vm)
		if err != nil || ev == nil {
			return false, err
		}
		switch state, _ := responderOf(ev, migrator); state {
		case lifecyclev1alpha1.ResponderStateCompleted:
			return true, nil
		case lifecyclev1alpha1.ResponderStateActive:
		default:
			return false, fmt.Errorf("%s ended %s: its turn ended before it could report its completion", migrator, state)
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
	evicted := d.logLines("Evicted pod")
	require.Len(t, evicted, 1, "the descheduler evicted one pod itself, legacy: %v", evicted)
	require.Contains(t, evicted[0], fmt.Sprintf("pod=%q", ns+"/legacy"))
	require.Empty(t, byPodOf(t, c, ns)["legacy"], "an EvictionRequest for legacy")
	for _, name := range []string{"web", "legacy"} {
		_, err = c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s was evicted: %v", name, err)
	}
}

// byPodOf returns the descheduler's requests in ns by target pod name.
func byPodOf(t *testing.T, c *cluster, ns string) map[string][]lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	byPod, err := requestsOf(context.Background(), c, ns, deschedulerRequester)
	require.NoError(t, err)
	return byPod
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
	c := setupDescheduler(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep1397-evictionrequests-bad")
	for _, tc := range []struct {
		name, requester, gates, want string
	}{
		{"gate off", deschedulerRequester, "EvictionsInBackground=true", "needs the EvacuationByEvictionRequests feature gate"},
		{"reserved requester", "descheduler.sigs.k8s.io/main", "EvictionsInBackground=true,EvacuationByEvictionRequests=true", "are reserved"},
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
const evictionRequestGates = "--feature-gates=EvictionsInBackground=true,EvacuationByEvictionRequests=true"

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
	c := setupDescheduler(t)
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

// TestDeschedulerEvacuationModeRefusesAShortTTL: in the evacuation mode a
// maxEvacuationRequestTTL not longer than KEP-4563's heartbeat deadline
// (20m, after which kube-controller-manager hands the eviction of a pod
// whose responder stopped reporting to the next responder) would withdraw
// such a pod's request before that responder starts, so that the pod is
// never evicted: the descheduler refuses to start, naming the deadline, and
// makes no request. The withdrawal on the TTL itself, and that a request
// whose responder reports progress is never withdrawn, are unit tests of
// the descheduler's evictions package (a fake clock: the TTL is at least
// 20 minutes).
func TestDeschedulerEvacuationModeRefusesAShortTTL(t *testing.T) {
	c := setupDescheduler(t)
	requireEvictionRequestAPI(t, c.Cluster)
	ns := c.Namespace(t, "kep1397-evictionrequests-ttl")
	pod := c.evacuationPod(t, ns, "stuck", "", true, false, withResponder(neverAnswers))
	d := c.startDescheduler(t, evictionRequestPolicy(ns, "maxEvacuationRequestTTL: 4s\n"), time.Second, evictionRequestGates)
	require.Error(t, d.exit(t), "the descheduler started its evacuation mode with a TTL shorter than the handover")
	require.Contains(t, d.log.String(), "maxEvacuationRequestTTL: 4s must be longer than 20m0s with evictionRequests")
	requests, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, requests.Items, "the refused descheduler made requests")
	got, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, pod.UID, got.UID)
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
