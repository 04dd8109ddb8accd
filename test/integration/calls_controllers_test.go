package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"kube-guard/test/util/controlplane"
)

// controllersOfCalls are the kube-controller-manager controllers that the
// controller workload exercises; the others run on timers (node lifecycle,
// namespaces, service accounts) or need what the test cluster lacks.
const controllersOfCalls = "deployment-controller,replicaset-controller,daemonset-controller,statefulset-controller,disruption-controller,garbage-collector-controller"

// controllerCalls is what a control plane served and asked for during the
// controller workload: the kinds of kube-controller-manager's API requests
// ("verb resource[/subresource] code", from the audit log), and the names of
// the metric families each binary serves, with the gates its
// kubernetes_feature_enabled series name.
type controllerCalls struct {
	kcm     map[string]int
	metrics map[string]sets.Set[string]
	gates   map[string]sets.Set[string]
}

// TestDefaultGatesControllerCallsAndMetrics runs the controller workload (a
// Deployment scaled down and deleted, a DaemonSet, a StatefulSet and a
// PodDisruptionBudget, with kube-scheduler binding the pods) against
// pristine upstream's kube-apiserver, kube-scheduler and
// kube-controller-manager (_output/bin/pristine) and against kube-guard's,
// each with every feature gate at its default and on an etcd of its own, and
// fails where kube-guard's kube-controller-manager makes a kind of API
// request upstream's does not make (or the reverse), or where a binary
// serves a metric family that upstream's does not serve (or the reverse).
// The one difference allowed: kubernetes_feature_enabled has a series for
// each gate the patches add (build/kubernetes/gates), and for no other.
//
// kube-controller-manager's requests are compared by kind, not by count:
// its controllers resync and requeue on their own clocks. The counts of the
// kube-apiserver's and kube-scheduler's requests are compared by
// TestDefaultGatesMakeUpstreamsCalls.
func TestDefaultGatesControllerCallsAndMetrics(t *testing.T) {
	pristine := controlplane.PristineBinDir(t)
	patched := controlplane.BinDir(t)
	var upstream, fork controllerCalls
	ok := t.Run("upstream", func(t *testing.T) { upstream = controllerCallsOf(t, pristine, "", nil, "") })
	ok = t.Run("kube-guard", func(t *testing.T) { fork = controllerCallsOf(t, patched, "", nil, "") }) && ok
	if !ok {
		return
	}
	// Liveness: the controllers did what the workload is meant to exercise.
	for name, c := range map[string]controllerCalls{"upstream": upstream, "kube-guard": fork} {
		for _, key := range []string{
			"create replicasets 201", "delete replicasets 200", "create controllerrevisions 201", "delete controllerrevisions 200",
			"create pods 201", "delete pods 200", "update poddisruptionbudgets/status 200",
		} {
			require.Positive(t, c.kcm[key], "%s: kube-controller-manager made no %q", name, key)
		}
	}
	t.Logf("kube-controller-manager's requests (upstream): %v", upstream.kcm)
	requireSameKinds(t, "kube-controller-manager's API requests (audit log)", sets.KeySet(upstream.kcm), sets.KeySet(fork.kcm))

	forkGates := sets.New[string]()
	gatesFile, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "build", "kubernetes", "gates"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(gatesFile), "\n") {
		if gate, _, _ := strings.Cut(line, "|"); strings.TrimSpace(gate) != "" && !strings.HasPrefix(line, "#") {
			forkGates.Insert(strings.TrimSpace(gate))
		}
	}
	require.NotEmpty(t, forkGates, "build/kubernetes/gates names no gate")
	for _, bin := range []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager"} {
		require.NotEmpty(t, upstream.metrics[bin], "upstream's %s served no metric", bin)
		requireSameMetricFamilies(t, bin, filepath.Join(pristine, bin), filepath.Join(patched, bin), upstream.metrics[bin], fork.metrics[bin])
		require.Empty(t, sets.List(upstream.gates[bin].Difference(fork.gates[bin])), "%s: kube-guard's kubernetes_feature_enabled lacks upstream's gates", bin)
		require.Equal(t, sets.List(forkGates), sets.List(fork.gates[bin].Difference(upstream.gates[bin])), "%s: the gates kubernetes_feature_enabled has beyond upstream's are not the gates the patches add", bin)
	}

	// The comparison sees controllers that make other calls: with the
	// EvictionRequest API served and its controller running,
	// kube-controller-manager lists and watches EvictionRequests.
	var withEvictionRequests controllerCalls
	require.True(t, t.Run("kube-guard with the EvictionRequest controller", func(t *testing.T) {
		withEvictionRequests = controllerCallsOf(t, patched, "EvictionRequestAPI=true", []string{"--runtime-config=lifecycle.k8s.io/v1alpha1=true"}, ",evictionrequest-controller")
	}))
	require.Positive(t, withEvictionRequests.kcm["watch evictionrequests 200"], "kube-controller-manager with the EvictionRequest controller made no watch of evictionrequests")
	require.NotEqual(t, sets.List(sets.KeySet(upstream.kcm)), sets.List(sets.KeySet(withEvictionRequests.kcm)), "the kinds of requests of kube-controller-manager with the EvictionRequest controller are upstream's: the comparison cannot see a difference")
	_, newFamilies := metricFamilyDifferences(t, filepath.Join(pristine, "kube-controller-manager"), filepath.Join(patched, "kube-controller-manager"), upstream.metrics["kube-controller-manager"], withEvictionRequests.metrics["kube-controller-manager"])
	require.NotEmpty(t, newFamilies, "kube-controller-manager with the EvictionRequest controller serves no metric family unknown to upstream's: the comparison cannot see a difference")
	t.Logf("kube-controller-manager with the EvictionRequest controller serves families upstream's does not know: %v", newFamilies)
}

// requireSameKinds fails, listing the differences, unless want and got hold
// the same kinds.
func requireSameKinds(t *testing.T, what string, want, got sets.Set[string]) {
	t.Helper()
	onlyUpstream, onlyFork := sets.List(want.Difference(got)), sets.List(got.Difference(want))
	if len(onlyUpstream)+len(onlyFork) > 0 {
		t.Errorf("%s differ with every gate at its default:\n  only upstream's: %v\n  only kube-guard's: %v", what, onlyUpstream, onlyFork)
		return
	}
	t.Logf("%s: the same %d kinds", what, want.Len())
}

// controllerCallsOf runs the controller workload on a control plane of the
// binaries in binDir, with gates (every other gate at its default) on
// kube-apiserver and kube-controller-manager, apiserverArgs, and
// kube-controller-manager's controllersOfCalls and moreControllers.
func controllerCallsOf(t *testing.T, binDir, gates string, apiserverArgs []string, moreControllers string) controllerCalls {
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o644))
	auditLog := filepath.Join(dir, "audit.log")
	s := controlplane.StartAPIServer(t, controlplane.Options{
		Binary:       filepath.Join(binDir, "kube-apiserver"),
		FeatureGates: gates,
		Users:        []string{schedulerUser},
		ExtraArgs: append([]string{
			"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog,
			"--audit-log-mode=blocking", "--audit-log-format=json",
		}, apiserverArgs...),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	schedulerArgs, schedulerPort := controlplane.ServingArgs(t)
	stopScheduler := controlplane.StartSchedulerBinary(t, filepath.Join(binDir, "kube-scheduler"), s, schedulerUser, "", schedulerArgs...)
	kcmArgs, kcmPort := controlplane.ServingArgs(t)
	stopKCM := controlplane.StartControllerManagerBinary(t, filepath.Join(binDir, "kube-controller-manager"), s, controllersOfCalls+moreControllers, gates, kcmArgs...)

	runControllerWorkload(ctx, t, clientWithAgent(t, s.Config, workloadAgent))

	out := controllerCalls{metrics: map[string]sets.Set[string]{}, gates: map[string]sets.Set[string]{}}
	for bin, scrape := range map[string]func() string{
		"kube-apiserver": func() string {
			body, err := s.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			require.NoError(t, err)
			return string(body)
		},
		"kube-scheduler":          func() string { return scrapeMetrics(ctx, t, schedulerPort) },
		"kube-controller-manager": func() string { return scrapeMetrics(ctx, t, kcmPort) },
	} {
		out.metrics[bin], out.gates[bin] = metricFamilies(t, scrape())
	}
	stopKCM()
	stopScheduler()
	s.Stop()
	out.kcm = controllerManagerCalls(t, auditLog)
	return out
}

// scrapeMetrics returns what https://127.0.0.1:port/metrics answers, once
// the server answers at all.
func scrapeMetrics(ctx context.Context, t *testing.T, port int) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var body string
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%d %s: %v", resp.StatusCode, b, err)
			return false, nil
		}
		body = string(b)
		return true, nil
	})
	require.NoError(t, err, "no metrics from port %d: %v", port, last)
	return body
}

// requireSameMetricFamilies fails where one binary serves a metric family
// that the other binary does not know. A family appears with its first
// sample, and some appear or not depending on when queues ran or on
// sampling, in upstream as in kube-guard (seen: a controller's stale sync
// skips, the scheduler's sampled plugin durations and its in-flight events,
// each in one run of the same binaries and not the next): a family served by
// one binary only is a difference when the other binary's file lacks its
// name (the whole name, or without its first one or two words, which
// component-base takes as namespace and subsystem).
func requireSameMetricFamilies(t *testing.T, bin, upstreamBin, forkBin string, upstream, fork sets.Set[string]) {
	t.Helper()
	onlyUpstream, onlyFork := metricFamilyDifferences(t, upstreamBin, forkBin, upstream, fork)
	if len(onlyUpstream)+len(onlyFork) > 0 {
		t.Errorf("%s's metric families differ with every gate at its default:\n  only upstream's: %v\n  only kube-guard's: %v", bin, onlyUpstream, onlyFork)
		return
	}
	t.Logf("%s's metric families: %d served by both; served by one run only, and known to the other binary: upstream %v, kube-guard %v",
		bin, upstream.Intersection(fork).Len(), sets.List(upstream.Difference(fork)), sets.List(fork.Difference(upstream)))
}

// metricFamilyDifferences returns the families that one binary serves and
// the other binary does not know (see requireSameMetricFamilies).
func metricFamilyDifferences(t *testing.T, upstreamBin, forkBin string, upstream, fork sets.Set[string]) (onlyUpstream, onlyFork []string) {
	t.Helper()
	known := func(file string, family string) bool {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			family = strings.TrimSuffix(family, suffix)
		}
		name := family
		for range 3 {
			if len(name) >= 8 && bytes.Contains(b, []byte(name)) {
				return true
			}
			_, rest, ok := strings.Cut(name, "_")
			if !ok {
				break
			}
			name = rest
		}
		return false
	}
	for _, f := range sets.List(upstream.Difference(fork)) {
		if !known(forkBin, f) {
			onlyUpstream = append(onlyUpstream, f)
		}
	}
	for _, f := range sets.List(fork.Difference(upstream)) {
		if !known(upstreamBin, f) {
			onlyFork = append(onlyFork, f)
		}
	}
	return onlyUpstream, onlyFork
}

// metricFamilies returns the names of the metric families in a /metrics
// answer and the gates its kubernetes_feature_enabled series name.
func metricFamilies(t *testing.T, body string) (sets.Set[string], sets.Set[string]) {
	t.Helper()
	all := testutil.NewMetrics()
	require.NoError(t, testutil.ParseMetrics(body, &all))
	names := sets.New[string]()
	for name := range all {
		names.Insert(name)
	}
	gates := sets.New[string]()
	for _, sample := range all["kubernetes_feature_enabled"] {
		gates.Insert(string(sample.Metric["name"]))
	}
	return names, gates
}

// controllerManagerCalls counts kube-controller-manager's API requests in the
// audit log by kind ("verb resource[/subresource] code"), events and leases
// excepted (batched and renewed on timers), and so are requests answered 404
// or 409: whether a controller's write of an object's status meets the
// object deleted or changed meanwhile depends on when its queue runs (seen:
// "update deployments/status 404" in one run, not in the next). A watch is
// counted when it starts, every other request when it completes.
func controllerManagerCalls(t *testing.T, file string) map[string]int {
	t.Helper()
	out := map[string]int{}
	forEachAuditedRequest(t, file, func(e auditEvent, resource string, code int) {
		if !strings.HasPrefix(e.UserAgent, "kube-controller-manager/") || e.ObjectRef.Resource == "events" || e.ObjectRef.Resource == "leases" ||
			code == http.StatusNotFound || code == http.StatusConflict {
			return
		}
		out[fmt.Sprintf("%s %s %d", e.Verb, resource, code)]++
	})
	return out
}

// runControllerWorkload makes kube-controller-manager's controllers create,
// scale, revise and delete workloads on one Ready node, waiting for each step
// through the API.
func runControllerWorkload(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ns := "controllers"
	createNamespace(ctx, t, c, ns)
	createReadyNode(ctx, t, c, "node-1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")})
	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []corev1.Container{{Name: "c", Image: "c"}},
			},
		}
	}
	selector := func(app string) *metav1.LabelSelector { return metav1.SetAsLabelSelector(labels.Set{"app": app}) }
	pods := func(app string) []corev1.Pod {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		require.NoError(t, err)
		return list.Items
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil }), "waiting for %s", what)
	}
	boundPods := func(app string, n int) func() bool {
		return func() bool {
			ps := pods(app)
			for _, p := range ps {
				if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
					return false
				}
			}
			return len(ps) == n
		}
	}

	_, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: selector("web")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		// Recreate: no pod becomes Ready without a kubelet, which a rolling
		// update would wait for.
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: selector("web"), Template: template("web"),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor("the Deployment's 3 pods bound", boundPods("web", 3))
	if rs, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err == nil && len(rs.Items) > 0 {
		// The name's hash is of the pod template with every field
		// (docs/gates.md): it differs from upstream's where PodSpec does.
		t.Logf("the Deployment's ReplicaSet: %s", rs.Items[0].Name)
	}
	waitFor("the budget's status of the Deployment's pods", func() bool {
		b, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		return b.Status.ExpectedPods == 3
	})
	_, err = c.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: selector("agent"), Template: template("agent")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		// Parallel: OrderedReady would wait for a pod to be Ready.
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: selector("db"), Template: template("db"),
			ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor("the DaemonSet's pod", func() bool { return len(pods("agent")) == 1 })
	waitFor("the StatefulSet's 2 pods bound", boundPods("db", 2))

	// A new template: a new ReplicaSet, then the old one scaled to 0.
	d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	d.Spec.Template.Labels["rev"] = "2"
	d.Spec.Replicas = ptr.To[int32](1)
	_, err = c.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor("the Deployment's new ReplicaSet alone", func() bool {
		ps := pods("web")
		return len(ps) == 1 && ps[0].Labels["rev"] == "2"
	})

	// Deleted by the garbage collector, with what they own.
	for _, del := range []func() error{
		func() error { return c.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}) },
		func() error { return c.AppsV1().DaemonSets(ns).Delete(ctx, "agent", metav1.DeleteOptions{}) },
		func() error { return c.AppsV1().StatefulSets(ns).Delete(ctx, "db", metav1.DeleteOptions{}) },
	} {
		require.NoError(t, del())
	}
	waitFor("the garbage collector deleted the ReplicaSets, the ControllerRevisions and every pod", func() bool {
		rs, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		revisions, err := c.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		all, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(rs.Items) == 0 && len(revisions.Items) == 0 && len(all.Items) == 0
	})
}
