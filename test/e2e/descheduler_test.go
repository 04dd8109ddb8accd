package e2e

// End-to-end tests of the patched descheduler's evictions in background
// (descheduler KEP-1397, gate EvictionsInBackground) against the local
// cluster, following the KEP's test plan: a real validating admission
// webhook, served over TLS by the test, takes evictions of annotated pods
// over the way KubeVirt's does (429 and a marker message), and the
// descheduler binary runs as a separate process.

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
)

const (
	evictionRequestAnnotation    = "descheduler.alpha.kubernetes.io/request-evict-only"
	evictionInProgressAnnotation = "descheduler.alpha.kubernetes.io/eviction-in-progress"
	// deschedulableLabel marks the pods the test's PodLifeTime policy selects.
	deschedulableLabel = "kube-guard.io/deschedule"
	// evacuationMarker is what the webhook answers; the descheduler's default
	// evictionMessagePrefixes ("Eviction triggered") match it inside the
	// apiserver's `admission webhook "..." denied the request: ` wrapping.
	evacuationMarker = "Eviction triggered evacuation"
	// deschedulerCycleLog is logged once per descheduling cycle (--v=1).
	deschedulerCycleLog = "Number of evictions/requests"
)

// evacuator is a validating admission webhook for pods/eviction in one
// namespace. It lets evictions of ordinary pods through; for a pod annotated
// request-evict-only it records the request, annotates the pod
// eviction-in-progress, deletes it deleteAfter later (never when zero) and
// denies the eviction with 429 and evacuationMarker.
type evacuator struct {
	client      kubernetes.Interface
	namespace   string
	deleteAfter time.Duration

	mu       sync.Mutex
	requests map[string][]time.Time // eviction requests by pod name
	deleted  map[string]time.Time   // when the webhook deleted the pod
	errs     []error
}

// startEvacuator serves the webhook on 127.0.0.1 with a fresh self-signed
// certificate, registers it for the namespace, and waits until the
// apiserver calls it.
func (c *cluster) startEvacuator(t *testing.T, ns string, deleteAfter time.Duration) *evacuator {
	t.Helper()
	e := &evacuator{client: c.client, namespace: ns, deleteAfter: deleteAfter,
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
	_, err = c.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{
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
		_ = c.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// The apiserver picks the configuration up asynchronously: evict an
	// annotated probe pod (which no descheduler policy selects) until the
	// webhook answers, and check the answer is what the descheduler sees.
	probe := c.evacuationPod(t, ns, "probe", "", false, false)
	var last error
	c.poll(t, "the evacuator webhook to intercept evictions", func(ctx context.Context) (bool, error) {
		last = c.client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: probe.Name, Namespace: ns}})
		return last != nil && strings.Contains(last.Error(), evacuationMarker), nil
	})
	require.True(t, apierrors.IsTooManyRequests(last), "the webhook's answer is not a 429: %v", last)
	require.Contains(t, last.Error(), fmt.Sprintf("admission webhook %q denied the request: %s", name, evacuationMarker))
	// The probe is now an eviction in progress: remove it so that it takes
	// no slot in the tests' evacuation limits.
	c.deletePod(t, ns, probe.Name)
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
				Message: evacuationMarker + " of pod " + req.Name,
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
	if req.DryRun != nil && *req.DryRun {
		return true
	}
	e.mu.Lock()
	e.requests[req.Name] = append(e.requests[req.Name], time.Now())
	e.mu.Unlock()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"evacuator"}}}`, evictionInProgressAnnotation)
	if _, err := e.client.CoreV1().Pods(req.Namespace).Patch(ctx, req.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.fail(fmt.Errorf("webhook: annotating pod %s: %w", req.Name, err))
	}
	if e.deleteAfter > 0 {
		ns, name, uid := req.Namespace, req.Name, pod.UID
		time.AfterFunc(e.deleteAfter, func() {
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

// evacuationPod creates a Running pod that asks for eviction in background,
// on node (any when empty); deschedulable pods are selected by the test's
// policy, inProgress ones already carry the eviction-in-progress annotation.
// The pod is owned by a ConfigMap: the descheduler does not evict bare pods,
// and no controller recreates a pod a ConfigMap owns.
func (c *cluster) evacuationPod(t *testing.T, ns, name, node string, deschedulable, inProgress bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	owner, err := c.client.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		owner, err = c.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	}
	require.NoError(t, err)
	annotations := map[string]string{evictionRequestAnnotation: ""}
	if inProgress {
		annotations[evictionInProgressAnnotation] = "evacuator"
	}
	spec := podSpec("", resource.Quantity{})
	spec.NodeName = node
	pod, err := c.client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Annotations: annotations,
			Labels:          map[string]string{deschedulableLabel: fmt.Sprint(deschedulable)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
		},
		Spec: spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return c.waitPodRunningReady(t, ns, pod.Name)
}

// deschedulerPolicy is a PodLifeTime policy that nominates every Running
// deschedulable pod of ns (a state filter, not an age, so that the test does
// not depend on how fast pods start), with extra top-level policy settings.
func deschedulerPolicy(ns, extra string) string {
	return fmt.Sprintf(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
%sprofiles:
- name: kep-1397-e2e
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
`, extra, ns, deschedulableLabel)
}

// descheduler is a descheduler process of the patched binary.
type descheduler struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
}

// startDescheduler runs the descheduler with policy and
// EvictionsInBackground on; interval 0 runs one cycle and exits. It is
// stopped at cleanup and its log is printed when the test failed.
func (c *cluster) startDescheduler(t *testing.T, policy string, interval time.Duration) *descheduler {
	t.Helper()
	bin := os.Getenv("KUBE_GUARD_E2E_DESCHEDULER")
	if bin == "" {
		t.Skip("KUBE_GUARD_E2E_DESCHEDULER is not set: no descheduler binary (run `make e2e`)")
	}
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte(policy), 0o600))
	d := &descheduler{log: &syncBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(bin,
		"--kubeconfig="+os.Getenv("KUBE_GUARD_E2E_KUBECONFIG"),
		"--policy-config-file="+policyFile,
		"--descheduling-interval="+interval.String(),
		"--feature-gates=EvictionsInBackground=true",
		"--secure-port=0", // no metrics server: tests run several descheduler processes
		"--v=3",
	)
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
	select {
	case err := <-d.done:
		d.done <- err
		require.NoError(t, err, "descheduler failed:\n%s", d.log.String())
	case <-time.After(waitTimeout):
		t.Fatalf("the descheduler did not finish its cycle within %v:\n%s", waitTimeout, d.log.String())
	}
}

// cycles is the number of descheduling cycles the process has finished.
func (d *descheduler) cycles() int {
	return strings.Count(d.log.String(), deschedulerCycleLog)
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
// and deletes the pod T later; the pod is gone after T and not before, and
// the descheduler, running cycles all along, asks only once.
func TestDeschedulerEvacuationInBackground(t *testing.T) {
	c := setup(t)
	ns := c.namespace(t, "kep1397-background")
	const deleteAfter = 6 * time.Second
	hook := c.startEvacuator(t, ns, deleteAfter)
	pod := c.evacuationPod(t, ns, "vm", "", true, false)

	d := c.startDescheduler(t, deschedulerPolicy(ns, ""), time.Second)
	c.poll(t, "the descheduler to request the eviction of "+pod.Name, func(context.Context) (bool, error) {
		return len(hook.requestsFor(pod.Name)) > 0, nil
	})
	requestedAt := hook.requestsFor(pod.Name)[0]
	cyclesAtRequest := d.cycles()

	var goneAt time.Time
	c.poll(t, "the webhook to delete "+pod.Name, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
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
}

// TestDeschedulerEvacuationLimitReached: with evacuations already in
// progress on a node, a cycle makes only as many new requests as the
// per-node evacuation limit leaves, and a restarted descheduler (its cache
// rebuilt from the pods' annotations) makes none.
func TestDeschedulerEvacuationLimitReached(t *testing.T) {
	c := setup(t)
	ns := c.namespace(t, "kep1397-limit")
	hook := c.startEvacuator(t, ns, 0)
	node := c.nodes[0].Name
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

// TestDeschedulerEvacuationTTL: an eviction the webhook takes over but never
// completes is abandoned after maxEvacuationRequestTTL, and requested again
// in a following cycle, not before.
func TestDeschedulerEvacuationTTL(t *testing.T) {
	c := setup(t)
	ns := c.namespace(t, "kep1397-ttl")
	hook := c.startEvacuator(t, ns, 0)
	pod := c.evacuationPod(t, ns, "stuck", "", true, false)
	const ttl = 5 * time.Second

	d := c.startDescheduler(t, deschedulerPolicy(ns, fmt.Sprintf("maxEvacuationRequestTTL: %s\n", ttl)), time.Second)
	c.poll(t, "a second eviction request for "+pod.Name, func(context.Context) (bool, error) {
		return len(hook.requestsFor(pod.Name)) >= 2, nil
	})
	hook.requireNoErrors(t)
	times := hook.requestsFor(pod.Name)
	require.GreaterOrEqual(t, times[1].Sub(times[0]), ttl,
		"the eviction in progress was requested again %v after the first request, before the TTL %v", times[1].Sub(times[0]), ttl)
	require.Contains(t, d.log.String(), "abandoning it", "the descheduler did not report the abandoned request")
	got, err := c.client.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, pod.UID, got.UID, "the pod was replaced: the test wants the same pod requested twice")
}
