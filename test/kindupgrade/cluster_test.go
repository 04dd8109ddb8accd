// Package kindupgrade tests the adoption path of docs/kind.md: a kind
// cluster of real kubelets whose control plane starts as pristine upstream's,
// is replaced in place by kube-guard's (every gate at its default, then
// DisruptionPolicyInPriorityClass on), goes back to upstream's and to
// kube-guard's again. `make kind-upgrade-test` brings the cluster up and
// runs it; without its environment the test skips and says so.
//
// Environment (set by hack/make-rules/kind-upgrade-test.sh):
//
//	KUBE_GUARD_UPGRADE_KUBECONFIG        the cluster
//	KUBE_GUARD_UPGRADE_CONTROL_PLANE     the control-plane node's container (docker exec)
//	KUBE_GUARD_UPGRADE_UPSTREAM_VERSION  the pristine control plane's version (its images' tag)
//	KUBE_GUARD_UPGRADE_FORK_VERSION      kube-guard's (its images' tag, in the node image)
//	KUBE_GUARD_UPGRADE_POD_IMAGE         the workloads' image (the nodes' pause)
package kindupgrade

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"kube-guard/test/e2e/framework"
)

const (
	gate = "DisruptionPolicyInPriorityClass"
	// swapTimeout bounds a component's replacement: the kubelet sees the
	// manifest (at most its 20 s file check), stops the old container and
	// starts the new one, which must become ready (the kube-controller-manager
	// and kube-scheduler then take their leases).
	swapTimeout = 4 * time.Minute
	// settleTimeout bounds the wait for the workloads to be up to date.
	settleTimeout = 3 * time.Minute
	poll          = time.Second
)

// The control plane's static pods this test replaces, in the order of an
// upgrade (kube-apiserver first: the others may not be newer than it); a
// downgrade goes the other way.
var components = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

type cluster struct {
	client   kubernetes.Interface
	node     string // the control-plane node's container, and its node name
	upstream string
	fork     string
	image    string
}

func setup(t *testing.T) *cluster {
	t.Helper()
	env := map[string]string{}
	for _, k := range []string{"KUBECONFIG", "CONTROL_PLANE", "UPSTREAM_VERSION", "FORK_VERSION", "POD_IMAGE"} {
		env[k] = os.Getenv("KUBE_GUARD_UPGRADE_" + k)
		if env[k] == "" {
			t.Skipf("KUBE_GUARD_UPGRADE_%s is not set: `make kind-upgrade-test` brings up a kind cluster of upstream's control plane and runs this test", k)
		}
	}
	cfg, err := framework.RestConfig(env["KUBECONFIG"])
	require.NoError(t, err)
	cfg.QPS, cfg.Burst = 50, 100
	// Requests made while the kube-apiserver is being replaced fail fast and
	// are polled again.
	cfg.Timeout = 15 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return &cluster{client: client, node: env["CONTROL_PLANE"], upstream: env["UPSTREAM_VERSION"],
		fork: env["FORK_VERSION"], image: env["POD_IMAGE"]}
}

// waitFor polls cond every second until it is true or timeout passes;
// errors of cond are kept as the last reason (the kube-apiserver may be
// restarting) and reported on timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), poll, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v (last error: %v)", timeout, what, err, last)
	}
}

// docker runs docker exec in the control-plane node, stdin given.
func (c *cluster) docker(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("docker", append([]string{"exec", "-i", c.node}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "docker exec %s %s: %s", c.node, strings.Join(args, " "), stderr.String())
	return out
}

// manifests reads the static pods' manifests of the components.
func (c *cluster) manifests(t *testing.T) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, comp := range components {
		m[comp] = c.docker(t, nil, "cat", "/etc/kubernetes/manifests/"+comp+".yaml")
	}
	return m
}

// plane is what the control plane runs: the images' version and the
// --feature-gates of the three components ("" for none).
type plane struct {
	version string
	gates   string
}

// manifest is the static pod of comp for p, made from upstream's manifest
// as kubeadm wrote it: the image's tag and --feature-gates changed, nothing
// else (what an admin does by hand, or a configuration tool by template).
func (c *cluster) manifest(t *testing.T, upstream []byte, comp string, p plane) []byte {
	t.Helper()
	var pod corev1.Pod
	require.NoError(t, yaml.UnmarshalStrict(upstream, &pod), "%s's manifest", comp)
	require.Len(t, pod.Spec.Containers, 1, "%s's manifest", comp)
	ctr := &pod.Spec.Containers[0]
	want := "registry.k8s.io/" + comp + ":" + c.upstream
	require.Equal(t, want, ctr.Image, "%s's manifest as kubeadm wrote it", comp)
	ctr.Image = "registry.k8s.io/" + comp + ":" + p.version
	ctr.Command = slices.DeleteFunc(slices.Clone(ctr.Command), func(a string) bool { return strings.HasPrefix(a, "--feature-gates=") })
	if p.gates != "" {
		ctr.Command = slices.Insert(ctr.Command, 1, "--feature-gates="+p.gates)
	}
	out, err := yaml.Marshal(&pod)
	require.NoError(t, err)
	return out
}

// mirror is the mirror pod of comp's static pod.
func (c *cluster) mirror(ctx context.Context, comp string) (*corev1.Pod, error) {
	return c.client.CoreV1().Pods("kube-system").Get(ctx, comp+"-"+c.node, metav1.GetOptions{})
}

// runs reports whether comp's mirror pod shows a ready container of image
// that none of old names, started by the kubelet with gates.
func runs(pod *corev1.Pod, image, gates string, old []string) bool {
	if len(pod.Status.ContainerStatuses) != 1 || len(pod.Spec.Containers) != 1 {
		return false
	}
	s := pod.Status.ContainerStatuses[0]
	if !s.Ready || s.State.Running == nil || s.Image != image || slices.Contains(old, s.ContainerID) {
		return false
	}
	flag := ""
	for _, a := range pod.Spec.Containers[0].Command {
		if strings.HasPrefix(a, "--feature-gates=") {
			flag = strings.TrimPrefix(a, "--feature-gates=")
		}
	}
	return flag == gates
}

// switchTo replaces the control plane's manifests with those of p, one
// component at a time (kube-apiserver first when its version goes up or
// stays, last when it goes down), and waits after each until its new
// container runs and is ready; then until the kube-apiserver answers as p's
// (its version, and the gate's kubernetes_feature_enabled series).
func (c *cluster) switchTo(t *testing.T, upstream map[string][]byte, from, to plane) {
	t.Helper()
	order := slices.Clone(components)
	if to.version == c.upstream && from.version != c.upstream {
		slices.Reverse(order)
	}
	for _, comp := range order {
		var old []string
		waitFor(t, comp+"'s container before the change", swapTimeout, func(ctx context.Context) (bool, error) {
			pod, err := c.mirror(ctx, comp)
			if err != nil {
				return false, err
			}
			old = nil
			for _, s := range pod.Status.ContainerStatuses {
				old = append(old, s.ContainerID)
			}
			return len(old) > 0, nil
		})
		m := c.manifest(t, upstream[comp], comp, to)
		// Written beside the manifests and moved in: the kubelet reads every
		// file of the directory, a half-written one too.
		c.docker(t, m, "sh", "-c", fmt.Sprintf("cat >/etc/kubernetes/%[1]s.yaml.new && mv /etc/kubernetes/%[1]s.yaml.new /etc/kubernetes/manifests/%[1]s.yaml", comp))
		image := "registry.k8s.io/" + comp + ":" + to.version
		start := time.Now()
		waitFor(t, fmt.Sprintf("%s to run %s with gates %q", comp, image, to.gates), swapTimeout, func(ctx context.Context) (bool, error) {
			pod, err := c.mirror(ctx, comp)
			if err != nil {
				return false, err
			}
			return runs(pod, image, to.gates, old), nil
		})
		t.Logf("%s: %s (gates %q) ready in %s", comp, image, to.gates, time.Since(start).Round(time.Second))
	}
	waitFor(t, "the kube-apiserver of "+to.version, swapTimeout, func(ctx context.Context) (bool, error) {
		v, err := c.client.Discovery().ServerVersion()
		if err != nil {
			return false, err
		}
		return v.GitVersion == to.version, nil
	})
	metrics, err := c.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	series := regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="` + gate + `"[^}]*\} ([01])$`).FindSubmatch(metrics)
	switch {
	case to.version == c.upstream:
		require.Nil(t, series, "upstream's kube-apiserver knows no %s", gate)
	case strings.Contains(to.gates, gate+"=true"):
		require.Equal(t, "1", string(series[1]), "the kube-apiserver's %s", gate)
	default:
		require.Equal(t, "0", string(series[1]), "the kube-apiserver's %s at its default", gate)
	}
}

// leaders waits until the kube-controller-manager and kube-scheduler of the
// control plane now running hold their leases: a holder that renewed since
// since.
func (c *cluster) leaders(t *testing.T, since time.Time) {
	t.Helper()
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		waitFor(t, name+"'s lease", swapTimeout, func(ctx context.Context) (bool, error) {
			l, err := c.client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && l.Spec.AcquireTime != nil &&
				l.Spec.AcquireTime.After(since.Add(-time.Second)), nil
		})
	}
}
