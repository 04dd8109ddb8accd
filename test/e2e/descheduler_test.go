package e2e

// End-to-end tests of the patched descheduler's evictions in background
// (descheduler KEP-1397, gate EvictionsInBackground) against the local
// cluster, following the KEP's test plan: a real validating admission
// webhook, served over TLS by the test, takes evictions of annotated pods
// over the way KubeVirt's does (429 and a marker message), and the
// descheduler binary runs as a separate process whose log and /metrics the
// tests read.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-base/metrics/testutil"

	"kube-guard/test/e2e/framework"
	"kube-guard/test/util/controlplane"
)

const (
	evictionRequestAnnotation    = "descheduler.alpha.kubernetes.io/request-evict-only"
	evictionInProgressAnnotation = "descheduler.alpha.kubernetes.io/eviction-in-progress"
	// deschedulableLabel marks the pods the test's PodLifeTime policy selects.
	deschedulableLabel = "kube-guard.io/deschedule"
	// evacuatorAnnotateLabel set to "false" on a pod makes the test webhook
	// take its eviction over (429 and the marker) without ever annotating it
	// eviction-in-progress: a request that is never confirmed.
	evacuatorAnnotateLabel = "kube-guard.io/evacuator-annotate"
	// evacuationMarker is what the webhook answers; the descheduler's default
	// markers match it inside the apiserver's
	// `admission webhook "..." denied the request: ` wrapping.
	evacuationMarker = "Eviction triggered evacuation"
	// profileName is the profile of deschedulerPolicy unless told otherwise.
	profileName = "kep-1397-e2e"
	// deschedulerCycleLog is logged once per descheduling cycle, at its end (--v=1).
	deschedulerCycleLog = "Number of evictions/requests"
	// deschedulerCycleStartLog is logged once per cycle, at its start (--v=3).
	deschedulerCycleStartLog = "Resetting pod evictor counters"

	// The descheduler's metrics of evictions in background.
	evacuationsTotalMetric     = "descheduler_pod_evacuations_total"
	evacuationsInProgressGauge = "descheduler_pod_evacuations_in_progress"
	evacuationsAbandonedMetric = "descheduler_pod_evacuations_abandoned_total"
	podsEvictedTotalMetric     = "descheduler_pods_evicted_total"
	// Results of podsEvictedTotalMetric for requests the evacuation limits refuse.
	nodeEvacuationLimitResult      = "maximum number of evacuations per node reached"
	namespaceEvacuationLimitResult = "maximum number of evacuations per namespace reached"
)

// evacuatorConfig is how the test webhook answers.
type evacuatorConfig struct {
	// deleteAfter is how long after the request the webhook deletes the
	// pod; never when zero.
	deleteAfter time.Duration
	// messagePrefix is put in front of evacuationMarker in the answer, the
	// way some webhooks tag their messages.
	messagePrefix string
}

// evacuator is a validating admission webhook for pods/eviction in one
// namespace. It lets evictions of ordinary pods through; for a pod annotated
// request-evict-only it records the request, annotates the pod
// eviction-in-progress (unless the pod's evacuatorAnnotateLabel is "false"),
// deletes it deleteAfter later and denies the eviction with 429 and
// evacuationMarker.
type evacuator struct {
	client    kubernetes.Interface
	namespace string
	cfg       evacuatorConfig

	mu       sync.Mutex
	requests map[string][]time.Time // eviction requests by pod name, dry-run ones included
	deleted  map[string]time.Time   // when the webhook deleted the pod
	errs     []error
}

// startEvacuator serves the webhook on 127.0.0.1 with a fresh self-signed
// certificate, registers it for the namespace, and waits until the
// apiserver calls it.
func (c *cluster) startEvacuator(t *testing.T, ns string, cfg evacuatorConfig) *evacuator {
	t.Helper()
	e := &evacuator{client: c.Client, namespace: ns, cfg: cfg,
		requests: map[string][]time.Time{}, deleted: map[string]time.Time{}}

	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	listener, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	server := &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(func() { _ = server.Close() })

	name := "evacuator-" + ns + ".kube-guard.io"
	url := fmt.Sprintf("https://%s/evict", listener.Addr().String())
	sideEffects := admissionregistrationv1.SideEffectClassNoneOnDryRun
	failurePolicy := admissionregistrationv1.Fail
	timeout := int32(10)
	_, err = c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: certPEM},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &sideEffects,
			FailurePolicy:           &failurePolicy,
			TimeoutSeconds:          &timeout,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				corev1.LabelMetadataName: ns,
			}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"},
				},
			}},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Deleted before the server stops (cleanups run last-in first-out).
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// The apiserver picks the configuration up asynchronously: evict an
	// annotated probe pod (which no descheduler policy selects) until the
	// webhook answers, and check the answer is what the descheduler sees.
	probe := c.evacuationPod(t, ns, "probe", "", false, false)
	var last error
	c.Poll(t, "the evacuator webhook to intercept evictions", func(ctx context.Context) (bool, error) {
		last = c.Client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: probe.Name, Namespace: ns}})
		return last != nil && strings.Contains(last.Error(), evacuationMarker), nil
	})
	require.True(t, apierrors.IsTooManyRequests(last), "the webhook's answer is not a 429: %v", last)
	require.Contains(t, last.Error(), fmt.Sprintf("admission webhook %q denied the request: %s%s", name, cfg.messagePrefix, evacuationMarker))
	// The probe is now an eviction in progress: remove it so that it takes
	// no slot in the tests' evacuation limits.
	c.DeletePod(t, ns, probe.Name)
	e.mu.Lock()
	delete(e.requests, probe.Name)
	e.mu.Unlock()
	return e
}

func (e *evacuator) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Namespace == e.namespace && req.SubResource == "eviction" {
		if e.intercept(r.Context(), req) {
			resp.Allowed = false
			resp.Result = &metav1.Status{
				Status:  metav1.StatusFailure,
				Code:    http.StatusTooManyRequests,
				Reason:  metav1.StatusReasonTooManyRequests,
				Message: e.cfg.messagePrefix + evacuationMarker + " of pod " + req.Name,
			}
		}
	}
	review.Response = resp
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// intercept takes the eviction of an annotated pod over.
func (e *evacuator) intercept(ctx context.Context, req *admissionv1.AdmissionRequest) bool {
	pod, err := e.client.CoreV1().Pods(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	if err != nil {
		e.fail(fmt.Errorf("webhook: reading pod %s: %w", req.Name, err))
		return false
	}
	if _, ok := pod.Annotations[evictionRequestAnnotation]; !ok {
		return false
	}
	e.mu.Lock()
	e.requests[req.Name] = append(e.requests[req.Name], time.Now())
	e.mu.Unlock()
	if req.DryRun != nil && *req.DryRun {
		return true
	}
	if pod.Labels[evacuatorAnnotateLabel] != "false" {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"evacuator"}}}`, evictionInProgressAnnotation)
		if _, err := e.client.CoreV1().Pods(req.Namespace).Patch(ctx, req.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			e.fail(fmt.Errorf("webhook: annotating pod %s: %w", req.Name, err))
		}
	}
	if e.cfg.deleteAfter > 0 {
		ns, name, uid := req.Namespace, req.Name, pod.UID
		time.AfterFunc(e.cfg.deleteAfter, func() {
			err := e.client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{
				GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &uid},
			})
			if err != nil && !apierrors.IsNotFound(err) {
				e.fail(fmt.Errorf("webhook: deleting pod %s: %w", name, err))
				return
			}
			e.mu.Lock()
			e.deleted[name] = time.Now()
			e.mu.Unlock()
		})
	}
	return true
}

func (e *evacuator) fail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

// requestsFor returns the times of the eviction requests for pod.
func (e *evacuator) requestsFor(pod string) []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.requests[pod]...)
}

// requested returns the number of requests per pod.
func (e *evacuator) requested() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for pod, times := range e.requests {
		out[pod] = len(times)
	}
	return out
}

func (e *evacuator) requireNoErrors(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	require.Empty(t, e.errs, "the webhook failed")
}

// podOption changes a pod evacuationPod creates.
type podOption func(*corev1.Pod)

// neverConfirmed: the webhook takes the pod's eviction over but never
// annotates it eviction-in-progress.
func neverConfirmed(pod *corev1.Pod) { pod.Labels[evacuatorAnnotateLabel] = "false" }

// evictedRightAway: the pod does not ask for eviction in background; the
// webhook lets its eviction through.
func evictedRightAway(pod *corev1.Pod) { delete(pod.Annotations, evictionRequestAnnotation) }

// evacuationPod creates a Running pod that asks for eviction in background,
// on node (any when empty); deschedulable pods are selected by the test's
// policy, inProgress ones already carry the eviction-in-progress annotation
// (as when a drain or the webhook, for another requester, took them over).
// The pod is owned by a ConfigMap: the descheduler does not evict bare pods,
// and no controller recreates a pod a ConfigMap owns.
func (c *cluster) evacuationPod(t *testing.T, ns, name, node string, deschedulable, inProgress bool, opts ...podOption) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	owner, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		owner, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	}
	require.NoError(t, err)
	annotations := map[string]string{evictionRequestAnnotation: ""}
	if inProgress {
		annotations[evictionInProgressAnnotation] = "evacuator"
	}
	spec := framework.PodSpec("", resource.Quantity{})
	spec.NodeName = node
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Annotations: annotations,
			Labels:          map[string]string{deschedulableLabel: fmt.Sprint(deschedulable)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
		},
		Spec: spec,
	}
	for _, opt := range opts {
		opt(pod)
	}
	pod, err = c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return c.WaitPodRunningReady(t, ns, pod.Name)
}

// deschedulerPolicy is a policy of one profile per name (profileName when
// none) that each run PodLifeTime nominating every Running deschedulable pod
// of ns (a state filter, not an age, so that the test does not depend on
// how fast pods start), with extra top-level policy settings.
func deschedulerPolicy(ns, extra string, profiles ...string) string {
	if len(profiles) == 0 {
		profiles = []string{profileName}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n%sprofiles:\n", extra)
	for _, name := range profiles {
		fmt.Fprintf(&b, `- name: %s
  pluginConfig:
  - name: DefaultEvictor
  - name: PodLifeTime
    args:
      states: [Running]
      namespaces:
        include: [%q]
      labelSelector:
        matchLabels:
          %s: "true"
  plugins:
    deschedule:
      enabled: [PodLifeTime]
`, name, ns, deschedulableLabel)
	}
	return b.String()
}

// descheduler is a descheduler process of the patched binary.
type descheduler struct {
	cmd        *exec.Cmd
	log        *syncBuffer
	done       chan error
	metricsURL string
}

// startDescheduler runs the descheduler with policy, EvictionsInBackground
// on (unless extra sets --feature-gates), the test's kubeconfig (unless
// extra sets --kubeconfig) and extra flags; interval 0 runs
// one cycle and exits. It serves its /metrics on a free port of 127.0.0.1.
// It is stopped at cleanup and its log is printed when the test failed.
func (c *cluster) startDescheduler(t *testing.T, policy string, interval time.Duration, extra ...string) *descheduler {
	t.Helper()
	bin := os.Getenv("KUBE_GUARD_E2E_DESCHEDULER")
	if bin == "" {
		t.Skip("KUBE_GUARD_E2E_DESCHEDULER is not set: no descheduler binary (run `make e2e`)")
	}
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte(policy), 0o600))
	port := controlplane.FreePort(t)
	d := &descheduler{log: &syncBuffer{}, done: make(chan error, 1), metricsURL: fmt.Sprintf("https://127.0.0.1:%d", port)}
	args := []string{
		"--policy-config-file=" + policyFile,
		"--descheduling-interval=" + interval.String(),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--v=3",
	}
	if !slices.ContainsFunc(extra, func(arg string) bool { return strings.HasPrefix(arg, "--feature-gates=") }) {
		args = append(args, "--feature-gates=EvictionsInBackground=true")
	}
	if !slices.ContainsFunc(extra, func(arg string) bool { return strings.HasPrefix(arg, "--kubeconfig=") }) {
		args = append(args, "--kubeconfig="+os.Getenv("KUBE_GUARD_E2E_KUBECONFIG"))
	}
	d.cmd = exec.Command(bin, append(args, extra...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	require.NoError(t, d.cmd.Start())
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
		d.done <- nil
		if t.Failed() {
			t.Logf("descheduler log:\n%s", d.log.String())
		}
	})
	return d
}

// wait waits until a one-shot descheduler exits and requires success.
func (d *descheduler) wait(t *testing.T) {
	t.Helper()
	require.NoError(t, d.exit(t), "descheduler failed:\n%s", d.log.String())
}

// exit waits until the descheduler exits and returns how it ended.
func (d *descheduler) exit(t *testing.T) error {
	t.Helper()
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(framework.WaitTimeout):
		t.Fatalf("the descheduler did not exit within %v:\n%s", framework.WaitTimeout, d.log.String())
		return nil
	}
}

// cycles is the number of descheduling cycles the process has finished.
func (d *descheduler) cycles() int {
	return strings.Count(d.log.String(), deschedulerCycleLog)
}

// cyclesStarted is the number of descheduling cycles the process has begun.
func (d *descheduler) cyclesStarted() int {
	return strings.Count(d.log.String(), deschedulerCycleStartLog)
}

// logLines returns the lines of the log that contain every one of substrings.
func (d *descheduler) logLines(substrings ...string) []string {
	var out []string
	for _, line := range strings.Split(d.log.String(), "\n") {
		if !slices.ContainsFunc(substrings, func(s string) bool { return !strings.Contains(line, s) }) {
			out = append(out, line)
		}
	}
	return out
}

// waitCycles waits until the process has run n whole cycles that began
// after since: nothing left to happen before since can be what the test
// then observes.
func (c *cluster) waitCycles(t *testing.T, d *descheduler, since time.Time, n int) {
	t.Helper()
	base := -1
	c.Poll(t, fmt.Sprintf("%d descheduling cycles after %s", n, since.Format(time.StampMilli)), func(context.Context) (bool, error) {
		if base < 0 {
			if time.Now().Before(since) {
				return false, nil
			}
			// The cycle under way, if any, may have begun before since.
			base = d.cycles() + 1
		}
		return d.cycles() >= base+n, nil
	})
}

// deschedulerMetrics returns the descheduler's /metrics, waiting until it serves them.
func (c *cluster) deschedulerMetrics(t *testing.T, d *descheduler) string {
	t.Helper()
	return c.pollMetrics(t, d, "the descheduler's /metrics", func(string) bool { return true })
}

// pollMetrics waits, up to framework.WaitTimeout, until the descheduler's /metrics
// satisfy ok, and returns them; the test fails with the last ones otherwise.
func (c *cluster) pollMetrics(t *testing.T, d *descheduler, what string, ok func(body string) bool) string {
	t.Helper()
	var body string
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), framework.PollInterval, framework.WaitTimeout, true, func(context.Context) (bool, error) {
		if body, last = framework.FetchMetrics(d.metricsURL); last != nil {
			return false, nil
		}
		return ok(body), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v); metrics:\n%s", what, err, last, evacuationMetrics(body))
	}
	return body
}

// evacuationMetrics returns the lines of the descheduler's metrics of
// evictions in background, for failure messages.
func evacuationMetrics(body string) string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, "pod_evacuations") || strings.HasPrefix(line, podsEvictedTotalMetric) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// syncBuffer is a bytes.Buffer safe for a process writing while tests read.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ io.Writer = &syncBuffer{}

// TestDeschedulerEvacuationInBackground: the webhook takes the eviction over
// and deletes the pod T later; the pod is gone after T and not before, the
// descheduler, running cycles all along, asks only once, and its metrics
// count one request in background, in progress until the pod is gone.
func TestDeschedulerEvacuationInBackground(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-background")
	const deleteAfter = 6 * time.Second
	hook := c.startEvacuator(t, ns, evacuatorConfig{deleteAfter: deleteAfter})
	pod := c.evacuationPod(t, ns, "vm", "", true, false)

	d := c.startDescheduler(t, deschedulerPolicy(ns, ""), time.Second)
	c.Poll(t, "the descheduler to request the eviction of "+pod.Name, func(context.Context) (bool, error) {
		return len(hook.requestsFor(pod.Name)) > 0, nil
	})
	requestedAt := hook.requestsFor(pod.Name)[0]
	cyclesAtRequest := d.cycles()

	background := map[string]string{"result": "background", "strategy": "PodLifeTime", "profile": profileName}
	var body string
	c.Poll(t, "the metrics to show the eviction in background in progress", func(ctx context.Context) (bool, error) {
		if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return false, fmt.Errorf("pod %s is gone (%v) and the metrics never showed its eviction in progress:\n%s", pod.Name, err, evacuationMetrics(body))
		}
		var err error
		if body, err = framework.FetchMetrics(d.metricsURL); err != nil {
			return false, nil
		}
		return framework.MetricSum(body, evacuationsTotalMetric, background) == 1 &&
			framework.MetricSum(body, evacuationsInProgressGauge, nil) == 1 &&
			len(framework.MetricSamples(body, evacuationsInProgressGauge, nil)) == 1, nil
	})

	var goneAt time.Time
	c.Poll(t, "the webhook to delete "+pod.Name, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			goneAt = time.Now()
			return true, nil
		}
		return false, err
	})
	hook.requireNoErrors(t)
	require.GreaterOrEqual(t, goneAt.Sub(requestedAt), deleteAfter,
		"the pod was gone %v after the request, before the webhook's delay %v: the eviction was not left to the webhook", goneAt.Sub(requestedAt), deleteAfter)
	require.GreaterOrEqual(t, d.cycles()-cyclesAtRequest, 2,
		"the descheduler ran fewer than 2 cycles while the eviction was in progress: the test proves nothing about repeated requests\n%s", d.log.String())
	require.Len(t, hook.requestsFor(pod.Name), 1, "the descheduler asked more than once for an eviction in progress")
	require.Equal(t, map[string]int{pod.Name: 1}, hook.requested())

	body = c.pollMetrics(t, d, "the in-progress gauge to drop to 0 once the pod is gone", func(body string) bool {
		return len(framework.MetricSamples(body, evacuationsInProgressGauge, nil)) == 1 && framework.MetricSum(body, evacuationsInProgressGauge, nil) == 0
	})
	require.Equal(t, 1.0, framework.MetricSum(body, evacuationsTotalMetric, nil),
		"one request made, in background; metrics:\n%s", evacuationMetrics(body))
	require.Equal(t, 1.0, framework.MetricSum(body, evacuationsTotalMetric, background), "metrics:\n%s", evacuationMetrics(body))
}

// TestDeschedulerEvacuationLimitReached: with evacuations already in
// progress on a node, a cycle makes only as many new requests as the
// per-node evacuation limit leaves, and a restarted descheduler (its cache
// rebuilt from the pods' annotations) makes none.
func TestDeschedulerEvacuationLimitReached(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-limit")
	hook := c.startEvacuator(t, ns, evacuatorConfig{})
	node := c.Nodes[0].Name
	for _, name := range []string{"running-1", "running-2"} {
		c.evacuationPod(t, ns, name, node, true, true)
	}
	for _, name := range []string{"new-1", "new-2", "new-3"} {
		c.evacuationPod(t, ns, name, node, true, false)
	}
	policy := deschedulerPolicy(ns, "maxNoOfPodsEvacuationsPerNode: 3\n")

	c.startDescheduler(t, policy, 0).wait(t)
	hook.requireNoErrors(t)
	requested := hook.requested()
	require.Len(t, requested, 1, "with 2 evacuations in progress and a limit of 3, one new request was expected: %v", requested)
	for pod, n := range requested {
		require.True(t, strings.HasPrefix(pod, "new-"), "an eviction already in progress was requested again: %s", pod)
		require.Equal(t, 1, n)
	}

	c.startDescheduler(t, policy, 0).wait(t)
	hook.requireNoErrors(t)
	require.Equal(t, requested, hook.requested(), "a restarted descheduler made new requests although 3 evacuations are in progress")
}

// TestDeschedulerEvacuationTTL: maxEvacuationRequestTTL applies only to
// requests the webhook never confirmed. The webhook answers 429 with the
// marker for both pods but annotates only "migrating": "unconfirmed" is
// abandoned after the TTL (log, metric) and requested again, not before;
// "migrating", annotated eviction-in-progress, is never requested again
// however long it stays in progress.
func TestDeschedulerEvacuationTTL(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-ttl")
	hook := c.startEvacuator(t, ns, evacuatorConfig{})
	unconfirmed := c.evacuationPod(t, ns, "unconfirmed", "", true, false, neverConfirmed)
	migrating := c.evacuationPod(t, ns, "migrating", "", true, false)
	const ttl = 3 * time.Second

	d := c.startDescheduler(t, deschedulerPolicy(ns, fmt.Sprintf("maxEvacuationRequestTTL: %s\n", ttl)), time.Second)
	c.Poll(t, "a second eviction request for "+unconfirmed.Name, func(context.Context) (bool, error) {
		return len(hook.requestsFor(unconfirmed.Name)) >= 2, nil
	})
	times := hook.requestsFor(unconfirmed.Name)
	require.GreaterOrEqual(t, times[1].Sub(times[0]), ttl,
		"the unconfirmed request was made again %v after the first one, before the TTL %v", times[1].Sub(times[0]), ttl)
	require.NotEmpty(t, d.logLines("abandoning it"), "the descheduler did not report the abandoned request")

	// The TTL of "migrating" (requested in the same cycle as "unconfirmed")
	// has passed too: give the descheduler a few more cycles.
	c.waitCycles(t, d, time.Now(), 2)
	hook.requireNoErrors(t)
	require.Len(t, hook.requestsFor(migrating.Name), 1,
		"the eviction of %s, annotated in progress, was requested again after the TTL", migrating.Name)
	require.Empty(t, d.logLines("abandoning it", migrating.Name), "the descheduler abandoned an eviction annotated in progress")
	got, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), unconfirmed.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, unconfirmed.UID, got.UID, "the pod was replaced: the test wants the same pod requested twice")

	body := c.deschedulerMetrics(t, d)
	abandoned := framework.MetricSamples(body, evacuationsAbandonedMetric, nil)
	require.NotEmpty(t, abandoned, "no %s; metrics:\n%s", evacuationsAbandonedMetric, evacuationMetrics(body))
	for _, s := range abandoned {
		require.Equal(t, testutil.Metric{"__name__": evacuationsAbandonedMetric, "strategy": "PodLifeTime", "profile": profileName}, s.Metric,
			"%s is labelled by strategy and profile only; metrics:\n%s", evacuationsAbandonedMetric, evacuationMetrics(body))
	}
	require.GreaterOrEqual(t, framework.MetricSum(body, evacuationsAbandonedMetric, nil), 1.0, "metrics:\n%s", evacuationMetrics(body))
}

// TestDeschedulerEvacuationInProgressKeepsSlot: pods annotated
// eviction-in-progress by someone else (a drain: the descheduler never got
// a 429 for them) keep their slot in the namespace's evacuation limit long
// after maxEvacuationRequestTTL: over several cycles after the TTL, only the
// one request the limit left at the start is ever made, and the refusals
// are counted in pods_evicted_total.
func TestDeschedulerEvacuationInProgressKeepsSlot(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-drain")
	hook := c.startEvacuator(t, ns, evacuatorConfig{})
	for _, name := range []string{"drained-1", "drained-2"} {
		c.evacuationPod(t, ns, name, "", true, true)
	}
	for _, name := range []string{"new-1", "new-2", "new-3"} {
		c.evacuationPod(t, ns, name, "", true, false)
	}
	const ttl = 2 * time.Second
	policy := deschedulerPolicy(ns, fmt.Sprintf("maxNoOfPodsEvacuationsPerNamespace: 3\nmaxEvacuationRequestTTL: %s\n", ttl))

	started := time.Now()
	d := c.startDescheduler(t, policy, time.Second)
	c.waitCycles(t, d, started.Add(2*ttl), 3)
	hook.requireNoErrors(t)
	requested := hook.requested()
	require.Len(t, requested, 1, "with 2 evacuations in progress and a limit of 3, one request in all was expected: %v", requested)
	for pod, n := range requested {
		require.True(t, strings.HasPrefix(pod, "new-"), "a pod annotated in progress was requested after the TTL: %s", pod)
		require.Equal(t, 1, n, "%s was requested again", pod)
	}
	require.Empty(t, d.logLines("abandoning it"), "the descheduler abandoned an eviction annotated in progress")

	body := c.deschedulerMetrics(t, d)
	require.Equal(t, 3.0, framework.MetricSum(body, evacuationsInProgressGauge, nil), "evacuations in progress; metrics:\n%s", evacuationMetrics(body))
	require.Zero(t, framework.MetricSum(body, evacuationsAbandonedMetric, nil), "metrics:\n%s", evacuationMetrics(body))
	require.GreaterOrEqual(t, framework.MetricSum(body, podsEvictedTotalMetric, map[string]string{"result": namespaceEvacuationLimitResult}), 1.0,
		"the namespace limit refused requests every cycle; metrics:\n%s", evacuationMetrics(body))
}

// TestDeschedulerEvacuationMarkerAfterWebhookPrefix: with no
// evictionMessagePrefixes configured, a 429 whose message contains the
// marker anywhere ("[evacuator] Eviction triggered evacuation of pod vm",
// a webhook's own tag in front) is an eviction in background: requested
// once, not every cycle, although the webhook never annotates the pod.
func TestDeschedulerEvacuationMarkerAfterWebhookPrefix(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-prefix")
	hook := c.startEvacuator(t, ns, evacuatorConfig{messagePrefix: "[evacuator] "})
	pod := c.evacuationPod(t, ns, "vm", "", true, false, neverConfirmed)

	d := c.startDescheduler(t, deschedulerPolicy(ns, ""), time.Second)
	c.Poll(t, "the descheduler to request the eviction of "+pod.Name, func(context.Context) (bool, error) {
		return len(hook.requestsFor(pod.Name)) > 0, nil
	})
	c.waitCycles(t, d, time.Now(), 3)
	hook.requireNoErrors(t)
	require.Len(t, hook.requestsFor(pod.Name), 1, "the eviction in background was requested again: the marker after the webhook's prefix was not recognised")
	require.Empty(t, d.logLines("Error evicting pod"), "the answer was taken for an error")
	body := c.deschedulerMetrics(t, d)
	require.Equal(t, 1.0, framework.MetricSum(body, evacuationsTotalMetric, map[string]string{"result": "background"}), "metrics:\n%s", evacuationMetrics(body))
	require.Zero(t, framework.MetricSum(body, evacuationsTotalMetric, map[string]string{"result": "error"}), "metrics:\n%s", evacuationMetrics(body))
}

// TestDeschedulerEvacuationDryRun: a one-shot --dry-run (one cycle, then
// exit) reports the eviction of an ordinary pod in that one cycle: the dry
// run starts from the whole cluster (descheduler dry-run/0001; v0.36's first dry-run
// cycle often ran on an empty copy and reported nothing). No eviction request
// reaches the webhook, no pod goes, and a pod whose eviction is in progress
// is not reported evicted. Two runs, as v0.36's race lost most of them.
func TestDeschedulerEvacuationDryRun(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-dryrun")
	hook := c.startEvacuator(t, ns, evacuatorConfig{})
	vm := c.evacuationPod(t, ns, "vm", "", true, false)
	migrating := c.evacuationPod(t, ns, "migrating", "", true, true)
	plain := c.evacuationPod(t, ns, "plain", "", true, false, evictedRightAway)

	for run := range 2 {
		d := c.startDescheduler(t, deschedulerPolicy(ns, ""), 0, "--dry-run")
		d.wait(t)
		require.Equal(t, 1, d.cycles(), "run %d: one cycle", run)
		require.NotEmpty(t, d.logLines("Evicted pod in dry run mode", fmt.Sprintf("pod=%q", ns+"/"+plain.Name)),
			"run %d: the one cycle of a dry run did not report the ordinary pod's eviction:\n%s", run, d.log.String())
		require.Empty(t, d.logLines("Evicted pod", fmt.Sprintf("pod=%q", ns+"/"+migrating.Name)),
			"run %d: a pod whose eviction is in progress was evicted in dry run", run)
	}
	hook.requireNoErrors(t)
	require.Empty(t, hook.requested(), "eviction requests reached the webhook in dry run")
	for _, pod := range []*corev1.Pod{vm, migrating, plain} {
		got, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		require.NoError(t, err, "pod %s went in dry run", pod.Name)
		require.Equal(t, pod.UID, got.UID)
	}
}

// TestDeschedulerEvacuationTwoProfiles: two profiles nominate the same
// pods; each pod is requested once, by the first profile, over several
// cycles.
func TestDeschedulerEvacuationTwoProfiles(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-profiles")
	hook := c.startEvacuator(t, ns, evacuatorConfig{})
	for _, name := range []string{"vm-1", "vm-2"} {
		c.evacuationPod(t, ns, name, "", true, false)
	}

	d := c.startDescheduler(t, deschedulerPolicy(ns, "", "first", "second"), time.Second)
	c.Poll(t, "the descheduler to request both evictions", func(context.Context) (bool, error) {
		return len(hook.requested()) == 2, nil
	})
	c.waitCycles(t, d, time.Now(), 3)
	hook.requireNoErrors(t)
	require.Equal(t, map[string]int{"vm-1": 1, "vm-2": 1}, hook.requested())

	body := c.deschedulerMetrics(t, d)
	require.Equal(t, 2.0, framework.MetricSum(body, evacuationsTotalMetric, nil), "metrics:\n%s", evacuationMetrics(body))
	require.Equal(t, 2.0, framework.MetricSum(body, evacuationsTotalMetric, map[string]string{"result": "background", "profile": "first"}),
		"metrics:\n%s", evacuationMetrics(body))
	require.Equal(t, 2.0, framework.MetricSum(body, evacuationsInProgressGauge, nil), "metrics:\n%s", evacuationMetrics(body))
}

// TestDeschedulerEvacuationGateDisabled: with EvictionsInBackground off the 429
// with the marker is an ordinary error, the pod is requested again every
// cycle (v0.36), and no metric of evictions in background is exported; a
// policy that sets the settings of evictions in background is refused at
// start-up with an error naming the gate.
func TestDeschedulerEvacuationGateDisabled(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-gate-off")
	hook := c.startEvacuator(t, ns, evacuatorConfig{})
	pod := c.evacuationPod(t, ns, "vm", "", true, false)
	const gateOff = "--feature-gates=EvictionsInBackground=false"

	d := c.startDescheduler(t, deschedulerPolicy(ns, ""), time.Second, gateOff)
	c.Poll(t, "3 eviction requests for "+pod.Name, func(context.Context) (bool, error) {
		return len(hook.requestsFor(pod.Name)) >= 3, nil
	})
	hook.requireNoErrors(t)
	require.NotEmpty(t, d.logLines("Error evicting pod", pod.Name), "the 429 was not reported as an error")
	body := c.pollMetrics(t, d, "pods_evicted_total to count the errors", func(body string) bool {
		return framework.MetricSum(body, podsEvictedTotalMetric, map[string]string{"result": "error"}) >= 1
	})
	require.NotContains(t, body, "descheduler_pod_evacuations", "metrics of evictions in background exported with the gate off:\n%s", evacuationMetrics(body))

	for _, setting := range []string{
		"maxNoOfPodsEvacuationsPerNode: 2\n",
		"maxEvacuationRequestTTL: 1m\n",
		"evictionMessagePrefixes: [\"Eviction triggered\"]\n",
	} {
		d := c.startDescheduler(t, deschedulerPolicy(ns, setting), 0, gateOff)
		require.Error(t, d.exit(t), "the descheduler started with %q and the gate off", strings.TrimSpace(setting))
		var errorLines []string // klog's error lines; the "Updated" featureGates line names the gate too
		for _, line := range d.logLines("EvictionsInBackground") {
			if strings.HasPrefix(line, "E") {
				errorLines = append(errorLines, line)
			}
		}
		require.NotEmpty(t, errorLines, "the start-up error does not name the gate:\n%s", d.log.String())
	}
}

// TestDeschedulerEvacuationOneShotRuns: one-shot runs (a CronJob) rebuild
// their state from the pods' annotations each time. The TTL (1ns) is
// shorter than any run: it must not free the slot of a pod annotated in
// progress. On node 0, "migrating-a" is annotated in progress and
// "unconfirmed-a" is taken over but never annotated: every run counts the
// first and requests the second again. On node 1, "migrating-b" plus one
// request (confirmed by the webhook) fill the limit of 2 for good.
func TestDeschedulerEvacuationOneShotRuns(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-oneshot")
	hook := c.startEvacuator(t, ns, evacuatorConfig{})
	nodeA, nodeB := c.Nodes[0].Name, c.Nodes[1].Name
	c.evacuationPod(t, ns, "migrating-a", nodeA, true, true)
	c.evacuationPod(t, ns, "unconfirmed-a", nodeA, true, false, neverConfirmed)
	c.evacuationPod(t, ns, "migrating-b", nodeB, true, true)
	c.evacuationPod(t, ns, "new-b1", nodeB, true, false)
	c.evacuationPod(t, ns, "new-b2", nodeB, true, false)
	policy := deschedulerPolicy(ns, "maxNoOfPodsEvacuationsPerNode: 2\nmaxEvacuationRequestTTL: 1ns\n")

	var confirmed string
	for run := 1; run <= 3; run++ {
		c.startDescheduler(t, policy, 0).wait(t)
		hook.requireNoErrors(t)
		requested := hook.requested()
		require.Equal(t, run, requested["unconfirmed-a"], "run %d: the never confirmed request is made once per run: %v", run, requested)
		require.Zero(t, requested["migrating-a"]+requested["migrating-b"], "run %d: a pod annotated in progress was requested: %v", run, requested)
		require.Equal(t, 1, requested["new-b1"]+requested["new-b2"],
			"run %d: node 1 has 1 evacuation in progress and a limit of 2: one request in all runs: %v", run, requested)
		for _, name := range []string{"new-b1", "new-b2"} {
			if requested[name] > 0 {
				if confirmed == "" {
					confirmed = name
				}
				require.Equal(t, confirmed, name, "run %d: the other pod of node 1 was requested", run)
			}
		}
	}
}

// TestDeschedulerEvacuationNodeLimitSparesOrdinaryPods: nodes 0 and 1 carry a
// NoSchedule taint their pods do not tolerate, so RemovePodsViolatingNodeTaints
// nominates all of them. Node 0 has 2 evacuations in progress, its limit, 4
// more candidates for an eviction in background and an ordinary pod; node 1
// one candidate. Node 0's candidates are refused, reported at most once per
// cycle (in the log and in pods_evicted_total), while its ordinary pod, which
// the evacuation limit does not concern, is evicted, and node 1's pod is
// requested.
func TestDeschedulerEvacuationNodeLimitSparesOrdinaryPods(t *testing.T) {
	c := setupDescheduler(t)
	ns := c.Namespace(t, "kep1397-node-limit")
	hook := c.startEvacuator(t, ns, evacuatorConfig{})
	nodeA, nodeB := c.Nodes[0].Name, c.Nodes[1].Name
	for _, name := range []string{"running-1", "running-2"} {
		c.evacuationPod(t, ns, name, nodeA, true, true)
	}
	for _, name := range []string{"new-1", "new-2", "new-3", "new-4"} {
		c.evacuationPod(t, ns, name, nodeA, true, false)
	}
	other := c.evacuationPod(t, ns, "other", nodeB, true, false)
	plain := c.evacuationPod(t, ns, "plain", nodeA, true, false, evictedRightAway)
	const taint = "kube-guard.io/e2e-evacuation-limit"
	for _, node := range []string{nodeA, nodeB} {
		c.taintNode(t, node, corev1.Taint{Key: taint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	policy := fmt.Sprintf(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsEvacuationsPerNode: 2
profiles:
- name: %s
  pluginConfig:
  - name: DefaultEvictor
  - name: RemovePodsViolatingNodeTaints
    args:
      namespaces:
        include: [%q]
      includedTaints: [%q]
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
`, profileName, ns, taint+"=true")

	d := c.startDescheduler(t, policy, time.Second)
	c.Poll(t, "the descheduler to request the eviction of "+other.Name, func(context.Context) (bool, error) {
		return len(hook.requestsFor(other.Name)) > 0, nil
	})
	c.Poll(t, "the descheduler to evict "+plain.Name+" from the node at its evacuation limit", func(ctx context.Context) (bool, error) {
		got, err := c.Client.CoreV1().Pods(ns).Get(ctx, plain.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && got.UID != plain.UID, err
	})
	c.waitCycles(t, d, time.Now(), 3)
	hook.requireNoErrors(t)
	require.Equal(t, map[string]int{other.Name: 1}, hook.requested(), "node 0 is full: only node 1's pod may be requested")

	// Read the refusals first, the cycles begun last: each refusal belongs
	// to a cycle already begun.
	logged := len(d.logLines("Error evicting pod", "evacuations per node reached"))
	body := c.deschedulerMetrics(t, d)
	refused := framework.MetricSum(body, podsEvictedTotalMetric, map[string]string{"result": nodeEvacuationLimitResult})
	started := d.cyclesStarted()
	assert.LessOrEqual(t, logged, started, "more refusals logged than cycles (%d): each was reported", started)
	assert.GreaterOrEqual(t, refused, 1.0, "no refusal by the node limit counted; metrics:\n%s", evacuationMetrics(body))
	assert.LessOrEqual(t, refused, float64(started), "more refusals counted than cycles (%d): each was counted; metrics:\n%s", started, evacuationMetrics(body))
}

// taintNode adds taint to node until the test ends.
func (c *cluster) taintNode(t *testing.T, name string, taint corev1.Taint) {
	t.Helper()
	update := func(edit func(node *corev1.Node)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			edit(node)
			_, err = c.Client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{})
			return err
		})
	}
	without := func(node *corev1.Node) {
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == taint.Key })
	}
	require.NoError(t, update(func(node *corev1.Node) {
		without(node)
		node.Spec.Taints = append(node.Spec.Taints, taint)
	}))
	t.Cleanup(func() { require.NoError(t, update(without)) })
}
