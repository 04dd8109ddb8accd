// Package framework is the end-to-end suite's access to the cluster under
// test (test/e2e): the local cluster of the patched control plane with KWOK
// nodes that `make e2e` brings up, or the kind cluster of real kubelets on
// the kube-guard node image that `make kind-e2e` brings up. Tests get it
// with Setup, which skips the test, saying why, when no cluster is
// configured.
//
// Environment:
//
//	KUBE_GUARD_E2E_KUBECONFIG      the cluster (required)
//	KUBE_GUARD_E2E_SCHEDULER_URL   the scheduler's secure address (its /metrics)
//	KUBE_GUARD_E2E_NODE_SELECTOR   the nodes the tests fill (default type=kwok;
//	                               kind: type=kind, its workers)
//	KUBE_GUARD_E2E_POD_IMAGE       the tests' pods' image (default registry.k8s.io/pause:3.10)
//	KUBE_GUARD_E2E_AGNHOST_IMAGE   upstream's agnhost, for probes on real kubelets
//	KUBE_GUARD_E2E_KUBELET_VERSION the kubelets' version TestKindNodesRunTheFork expects (default: the apiserver's)
//	KUBE_GUARD_E2E_GATES           the gates the cluster turns on, NAME=true,... (TestKindNodesRunTheFork)
package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/component-base/metrics/testutil"
	"sigs.k8s.io/yaml"
)

const (
	// ReadyLabel set to "false" keeps a pod Running but not Ready (build/local/kwok-stages.yaml).
	ReadyLabel = "kube-guard.io/ready"
	// NodeIndexLabel is the index every KWOK node of the local cluster, and
	// every worker of the kind cluster, carries.
	NodeIndexLabel = "kube-guard.io/node-index"
	GateName       = "DisruptionPolicyInPriorityClass"
	PollInterval   = 250 * time.Millisecond
	WaitTimeout    = 90 * time.Second
)

// Cluster is the cluster under test.
type Cluster struct {
	Client       kubernetes.Interface
	SchedulerURL string
	// Nodes are the nodes the tests fill (KUBE_GUARD_E2E_NODE_SELECTOR).
	Nodes []corev1.Node
	// NodeCPU is the CPU free on every one of Nodes: allocatable less the
	// requests of the pods already there (a kind node's CoreDNS), the
	// smallest over the nodes. A pod asking for NodeCPU fills a node.
	NodeCPU resource.Quantity
	GateOn  bool
	// RealKubelets: the nodes are kubelets (kind), not KWOK's: probes run
	// and pods are made unready by their probes, not by KWOK's stages.
	RealKubelets bool
	// AgnhostImage is upstream's agnhost (KUBE_GUARD_E2E_AGNHOST_IMAGE).
	AgnhostImage string
}

// PodImage is the image of the tests' pods (KUBE_GUARD_E2E_POD_IMAGE): KWOK
// never pulls it; on kind it is the pause image preloaded into the nodes.
var PodImage = envOr("KUBE_GUARD_E2E_POD_IMAGE", "registry.k8s.io/pause:3.10")

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var (
	clusterOnce sync.Once
	theCluster  *Cluster
	clusterErr  error
)

// SkipReason is why the end-to-end tests cannot run here, or "" when a
// cluster is configured.
func SkipReason() string {
	if os.Getenv("KUBE_GUARD_E2E_KUBECONFIG") == "" {
		return "KUBE_GUARD_E2E_KUBECONFIG is not set, so there is no cluster to test: `make e2e` brings up a local cluster, runs the suite with the gates on and off, and brings it down"
	}
	return ""
}

// Setup skips the test without a configured cluster and returns the cluster.
func Setup(t *testing.T) *Cluster {
	t.Helper()
	if reason := SkipReason(); reason != "" {
		t.Skip(reason)
	}
	clusterOnce.Do(func() { theCluster, clusterErr = connect(os.Getenv("KUBE_GUARD_E2E_KUBECONFIG")) })
	require.NoError(t, clusterErr)
	return theCluster
}

func connect(kubeconfig string) (*Cluster, error) {
	cfg, err := RestConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	selector := envOr("KUBE_GUARD_E2E_NODE_SELECTOR", "type=kwok")
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	if len(nodes.Items) == 0 {
		return nil, fmt.Errorf("the cluster has no nodes matching %q", selector)
	}
	c := &Cluster{Client: client, SchedulerURL: os.Getenv("KUBE_GUARD_E2E_SCHEDULER_URL"), Nodes: nodes.Items,
		AgnhostImage: os.Getenv("KUBE_GUARD_E2E_AGNHOST_IMAGE")}
	for i, n := range nodes.Items {
		if n.Labels["type"] != "kwok" {
			c.RealKubelets = true
		}
		free, err := freeCPU(ctx, client, &n)
		if err != nil {
			return nil, err
		}
		if i == 0 || free.Cmp(c.NodeCPU) < 0 {
			c.NodeCPU = free
		}
	}
	if c.NodeCPU.MilliValue() < 200 {
		return nil, fmt.Errorf("a node has only %s CPU free: the tests need at least 200m on each of %d nodes", c.NodeCPU.String(), len(nodes.Items))
	}
	metrics, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the kube-apiserver's /metrics: %w", err)
	}
	re := regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="` + GateName + `"[^}]*\} 1$`)
	c.GateOn = re.Match(metrics)
	return c, nil
}

// freeCPU is the node's allocatable CPU less the requests of the pods bound
// to it that have not terminated (containers' requests, or the largest init
// container's when larger, plus overhead: what the scheduler counts).
func freeCPU(ctx context.Context, client kubernetes.Interface, node *corev1.Node) (resource.Quantity, error) {
	free := node.Status.Allocatable[corev1.ResourceCPU]
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
	if err != nil {
		return free, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var sum, initMax resource.Quantity
		for _, ctr := range p.Spec.Containers {
			sum.Add(ctr.Resources.Requests[corev1.ResourceCPU])
		}
		for _, ctr := range p.Spec.InitContainers {
			if r := ctr.Resources.Requests[corev1.ResourceCPU]; r.Cmp(initMax) > 0 {
				initMax = r
			}
		}
		if initMax.Cmp(sum) > 0 {
			sum = initMax
		}
		sum.Add(p.Spec.Overhead[corev1.ResourceCPU])
		free.Sub(sum)
	}
	return free, nil
}

// requireGate skips the test unless DisruptionPolicyInPriorityClass is on (want=true) or off.
func (c *Cluster) RequireGate(t *testing.T, want bool) {
	t.Helper()
	if c.GateOn != want {
		t.Skipf("the cluster runs with %s=%t; this test wants %t (make e2e runs both)", GateName, c.GateOn, want)
	}
}

// namespace creates a namespace for the test and deletes it, waiting until
// it is gone, at cleanup, so that the next test finds the nodes empty.
func (c *Cluster) Namespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Pods are admitted only once the namespace's default ServiceAccount exists.
	c.Poll(t, "the default ServiceAccount of "+ns.Name, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
			return
		}
		err := wait.PollUntilContextTimeout(ctx, PollInterval, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("namespace %s was not deleted: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// priorityClass creates a PriorityClass (with a threshold unless nil) and deletes it at cleanup.
func (c *Cluster) PriorityClass(t *testing.T, name string, value int32, threshold *int32) string {
	t.Helper()
	ctx := context.Background()
	name = name + "-" + rand.String(5)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
		AllowDisruptionByPriorityGreaterThanOrEqual: threshold}
	_, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// poll waits, up to WaitTimeout, until cond is true, failing the test otherwise.
func (c *Cluster) Poll(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), PollInterval, WaitTimeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// PodSpec is a pod of one container asking for cpu (none when zero).
func PodSpec(priorityClass string, cpu resource.Quantity) corev1.PodSpec {
	ctr := corev1.Container{Name: "app", Image: PodImage}
	if !cpu.IsZero() {
		ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: cpu}
	}
	return corev1.PodSpec{
		PriorityClassName:             priorityClass,
		Containers:                    []corev1.Container{ctr},
		TerminationGracePeriodSeconds: new(int64),
	}
}

// createPod creates a pod and returns it.
func (c *Cluster) CreatePod(t *testing.T, ns, name string, labels map[string]string, spec corev1.PodSpec) *corev1.Pod {
	t.Helper()
	pod, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return pod
}

// deployment creates a Deployment of replicas pods labelled app=<name> with
// spec, and waits until all of them are updated and Ready.
func (c *Cluster) Deployment(t *testing.T, ns, name string, replicas int32, spec corev1.PodSpec) {
	t.Helper()
	labels := map[string]string{"app": name}
	_, err := c.Client.AppsV1().Deployments(ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.Poll(t, "the "+name+" Deployment to be available", func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == replicas && d.Status.UpdatedReplicas == replicas, nil
	})
}

// deletePod deletes a pod and waits until it is gone.
func (c *Cluster) DeletePod(t *testing.T, ns, name string) {
	t.Helper()
	err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	c.Poll(t, "pod "+ns+"/"+name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// waitPodRunningReady waits until the pod is bound, Running and Ready, and returns it.
func (c *Cluster) WaitPodRunningReady(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	c.Poll(t, "pod "+ns+"/"+name+" to run and be Ready", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && PodCondition(p, corev1.PodReady) == corev1.ConditionTrue, nil
	})
	return pod
}

func PodCondition(pod *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == typ {
			return cond.Status
		}
	}
	return ""
}

// preemptedByScheduler: the pod carries DisruptionTarget=True with reason PreemptionByScheduler.
func PreemptedByScheduler(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue && cond.Reason == corev1.PodReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}

// EvictedByEvictionAPI: the pod carries DisruptionTarget=True with reason
// EvictionByEvictionAPI, the condition the eviction subresource sets.
func EvictedByEvictionAPI(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue && cond.Reason == "EvictionByEvictionAPI" {
			return true
		}
	}
	return false
}

// pdb creates a policy/v1 PodDisruptionBudget on the pods with label app=<app>.
func (c *Cluster) PDB(t *testing.T, ns, name, app string, minAvailable int, policy *policyv1.UnhealthyPodEvictionPolicyType) {
	t.Helper()
	minAv := intstr.FromInt32(int32(minAvailable))
	_, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               &minAv,
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			UnhealthyPodEvictionPolicy: policy,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// waitPDB waits until the disruption controller has observed the PDB's
// current generation and its status satisfies ok.
func (c *Cluster) WaitPDB(t *testing.T, ns, name, what string, ok func(s policyv1.PodDisruptionBudgetStatus) bool) {
	t.Helper()
	var last policyv1.PodDisruptionBudgetStatus
	err := wait.PollUntilContextTimeout(context.Background(), PollInterval, WaitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p.Status
		return p.Status.ObservedGeneration == p.Generation && ok(p.Status), nil
	})
	if err != nil {
		t.Fatalf("waiting for PDB %s/%s: %s: %v (last status: healthy %d, desired %d, expected %d, allowed %d)",
			ns, name, what, err, last.CurrentHealthy, last.DesiredHealthy, last.ExpectedPods, last.DisruptionsAllowed)
	}
}

// PodRecorder follows the pods of a namespace with a watch and remembers
// every state it saw, so that transient states (a DisruptionTarget condition
// just before a deletion) are not missed.
type PodRecorder struct {
	mu        sync.Mutex
	preempted map[string]bool // pod name -> seen with DisruptionTarget PreemptionByScheduler
	evicted   map[string]bool // pod name -> seen with DisruptionTarget EvictionByEvictionAPI
	deleted   map[string]bool
	// evictedFirst: pod name -> seen with the eviction API's DisruptionTarget
	// condition before, or without, the reason of a preemption.
	evictedFirst map[string]bool
	stop         func()
}

func (c *Cluster) RecordPods(t *testing.T, ns, selector string) *PodRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	r := &PodRecorder{preempted: map[string]bool{}, evicted: map[string]bool{}, deleted: map[string]bool{}, evictedFirst: map[string]bool{}, stop: cancel}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			r.mu.Lock()
			if PreemptedByScheduler(pod) {
				r.preempted[pod.Name] = true
			}
			if EvictedByEvictionAPI(pod) {
				r.evicted[pod.Name] = true
				if !r.preempted[pod.Name] {
					r.evictedFirst[pod.Name] = true
				}
			}
			if ev.Type == watch.Deleted {
				r.deleted[pod.Name] = true
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop() })
	return r
}

func (r *PodRecorder) PreemptedPods() []string {
	return r.names(r.preempted)
}

// EvictedPods are the pods seen with the eviction API's DisruptionTarget condition.
func (r *PodRecorder) EvictedPods() []string {
	return r.names(r.evicted)
}

// EvictedFirstPods are the pods seen with the eviction API's
// DisruptionTarget condition before any with the reason of a preemption:
// removed through the eviction API, whatever reason the scheduler gave the
// condition afterwards.
func (r *PodRecorder) EvictedFirstPods() []string {
	return r.names(r.evictedFirst)
}

func (r *PodRecorder) DeletedPods() []string {
	return r.names(r.deleted)
}

// names returns the pod names of one of the recorder's sets, sorted.
func (r *PodRecorder) names(set map[string]bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(set))
}

// schedulerMetrics fetches the scheduler's /metrics (served without credentials by the local cluster).
func (c *Cluster) SchedulerMetrics(t *testing.T) string {
	t.Helper()
	if c.SchedulerURL == "" {
		t.Fatal("KUBE_GUARD_E2E_SCHEDULER_URL is not set")
	}
	body, err := FetchMetrics(c.SchedulerURL)
	require.NoError(t, err)
	return body
}

// FetchMetrics reads the /metrics of a component served over TLS with a
// self-signed certificate and without credentials (the local scheduler, a
// descheduler the tests start).
func FetchMetrics(baseURL string) (string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the component's self-signed serving certificate
	}}
	resp, err := hc.Get(strings.TrimSuffix(baseURL, "/") + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s/metrics: %s: %s", baseURL, resp.Status, body)
	}
	return string(body), nil
}

// MetricSamples returns the samples of the metric name (exactly that name:
// no _bucket/_sum suffix) whose labels include labels.
func MetricSamples(body, name string, labels map[string]string) []*testutil.Sample {
	all := testutil.NewMetrics()
	if err := testutil.ParseMetrics(body, &all); err != nil {
		return nil
	}
	var out []*testutil.Sample
	for _, s := range all[name] {
		match := true
		for k, v := range labels {
			if string(s.Metric[testutil.LabelName(k)]) != v {
				match = false
			}
		}
		if match {
			out = append(out, s)
		}
	}
	return out
}

// MetricSum is the sum of the samples MetricSamples returns (0 when none).
func MetricSum(body, name string, labels map[string]string) float64 {
	var sum float64
	for _, s := range MetricSamples(body, name, labels) {
		sum += float64(s.Value)
	}
	return sum
}

// RestConfig reads the current context of the local cluster's kubeconfig
// (server, CA, client certificate files: what kwokctl writes). It does not
// use clientcmd, which would add dependencies to this module.
func RestConfig(path string) (*rest.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kc clientcmdv1.Config
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var ctx *clientcmdv1.Context
	for i := range kc.Contexts {
		if kc.Contexts[i].Name == kc.CurrentContext {
			ctx = &kc.Contexts[i].Context
		}
	}
	if ctx == nil {
		return nil, fmt.Errorf("%s: no current context %q", path, kc.CurrentContext)
	}
	cfg := &rest.Config{}
	for _, c := range kc.Clusters {
		if c.Name == ctx.Cluster {
			cfg.Host = c.Cluster.Server
			cfg.CAFile = c.Cluster.CertificateAuthority
			cfg.CAData = c.Cluster.CertificateAuthorityData
		}
	}
	for _, u := range kc.AuthInfos {
		if u.Name == ctx.AuthInfo {
			cfg.CertFile, cfg.KeyFile = u.AuthInfo.ClientCertificate, u.AuthInfo.ClientKey
			cfg.CertData, cfg.KeyData = u.AuthInfo.ClientCertificateData, u.AuthInfo.ClientKeyData
			cfg.BearerToken = u.AuthInfo.Token
		}
	}
	if cfg.Host == "" {
		return nil, fmt.Errorf("%s: no server for context %q", path, kc.CurrentContext)
	}
	return cfg, nil
}
