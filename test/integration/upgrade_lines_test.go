package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kube-guard/test/util/controlplane"
	"kube-guard/test/util/pins"
)

// linesWithKEP3280 returns the release lines of kubernetes older than the
// default one (pins.DefaultLine: the newest that is not a preview) whose
// series carries the KEP-3280 topic (patches/kubernetes/<line>/topics).
func linesWithKEP3280(t *testing.T) []string {
	t.Helper()
	root := controlplane.RepoRoot(t)
	lines, err := pins.Lines(root, "kubernetes")
	require.NoError(t, err)
	require.NotEmpty(t, lines)
	def := newestLine(t)
	var out []string
	for _, l := range lines[:slices.Index(lines, def)] {
		b, err := os.ReadFile(filepath.Join(root, "patches", "kubernetes", l, "topics"))
		require.NoError(t, err)
		if slices.Contains(strings.Fields(string(b)), "kep-3280") {
			out = append(out, l)
		}
	}
	return out
}

// requireForkVersion checks that the server is the fork of the given line.
func requireForkVersion(t *testing.T, c kubernetes.Interface, line string) {
	t.Helper()
	pin, err := pins.LoadLine(controlplane.RepoRoot(t), "kubernetes", line)
	require.NoError(t, err)
	info, err := c.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Regexp(t, "^"+regexp.QuoteMeta(pin.Version+"-"+pin.ForkName+".")+`\d+$`, info.GitVersion, "the kube-apiserver of line %s", line)
}

// TestUpgradeAcrossReleaseLines: every older release line that carries
// KEP-3280 upgrades to the newest line and back on one etcd, with real
// binaries. The older line's kube-apiserver (gate on) writes protected
// PriorityClasses, pods (the threshold copied by admission) and
// PodDisruptionBudgets; the newest line's kube-apiserver reads every object
// back intact, thresholds included, without rewriting any (etcd's mod
// revisions), and writes some of its own; the older line's, started again,
// reads all of them back intact: the field is the same field (protobuf 3280)
// on both lines, so neither an upgrade nor a downgrade across lines loses it.
func TestUpgradeAcrossReleaseLines(t *testing.T) {
	lines := linesWithKEP3280(t)
	if len(lines) == 0 {
		t.Skip("no release line older than the newest carries kep-3280")
	}
	for _, line := range lines {
		t.Run(line, func(t *testing.T) { testUpgradeFromLine(t, line) })
	}
}

func testUpgradeFromLine(t *testing.T, line string) {
	ctx := context.Background()
	older := filepath.Join(controlplane.LineBinDir(t, line), "kube-apiserver")
	_, err := os.Stat(older)
	require.NoError(t, err, "the kube-apiserver of line %s: make build LINE=%s (make test builds it)", line, line)
	gates := "DisruptionPolicyInPriorityClass=true"
	etcdURL := controlplane.Etcd(t)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}})
	require.NoError(t, err)
	defer etcd.Close()
	modRevision := func(key string) int64 {
		t.Helper()
		resp, err := etcd.Get(ctx, "/registry/"+key)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, "%s is stored", key)
		return resp.Kvs[0].ModRevision
	}
	ns := "upgrade"

	// 1. The older line writes.
	old := controlplane.StartAPIServer(t, controlplane.Options{EtcdURL: etcdURL, FeatureGates: gates, Binary: older})
	requireForkVersion(t, old.Client, line)
	classes, pods, pdbs := writeProtected(ctx, t, old.Client, ns, "older", true)
	revs := map[string]int64{}
	for name := range classes {
		revs["priorityclasses/"+name] = modRevision("priorityclasses/" + name)
	}
	for name := range pods {
		revs["pods/"+ns+"/"+name] = modRevision("pods/" + ns + "/" + name)
	}
	old.Stop()

	// 2. The newest line reads everything intact, rewrites nothing, writes.
	newest := controlplane.StartAPIServer(t, controlplane.Options{EtcdURL: etcdURL, FeatureGates: gates})
	requireForkVersion(t, newest.Client, newestLine(t))
	requireReadBack(ctx, t, newest.Client, ns, classes, pods, pdbs, "the newest line reads what line "+line+" wrote")
	for key, rev := range revs {
		require.Equal(t, rev, modRevision(key), "reading %s did not rewrite it", key)
	}
	c2, p2, d2 := writeProtected(ctx, t, newest.Client, ns, "newer", false)
	newest.Stop()

	// 3. The older line again: everything, from both lines.
	old = controlplane.StartAPIServer(t, controlplane.Options{EtcdURL: etcdURL, FeatureGates: gates, Binary: older})
	requireReadBack(ctx, t, old.Client, ns, classes, pods, pdbs, "line "+line+" reads its own objects back after the upgrade")
	requireReadBack(ctx, t, old.Client, ns, c2, p2, d2, "line "+line+" reads what the newest line wrote")
}

// newestLine is the default release line, the one _output/bin holds: the
// newest that is not a preview.
func newestLine(t *testing.T) string {
	line, err := pins.DefaultLine(controlplane.RepoRoot(t), "kubernetes")
	require.NoError(t, err)
	return line
}

// writeProtected creates two PriorityClasses with a threshold (names with
// prefix), two pods of the first class (the threshold copied by Priority
// admission) and a PodDisruptionBudget selecting them, in namespace ns
// (created when create is true).
func writeProtected(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, prefix string, create bool) (map[string]*schedulingv1.PriorityClass, map[string]*corev1.Pod, map[string]*policyv1.PodDisruptionBudget) {
	t.Helper()
	if create {
		createNamespace(ctx, t, c, ns)
	}
	classes := map[string]*schedulingv1.PriorityClass{}
	for i, threshold := range []int32{1000, 2000000000} {
		name := prefix + "-class-" + string(rune('a'+i))
		pc, err := c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "db"}},
			Value:       int32(100 + i),
			Description: "protected from preemption below the threshold",
			AllowDisruptionByPriorityGreaterThanOrEqual: ptr.To(threshold),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, ptr.To(threshold), pc.AllowDisruptionByPriorityGreaterThanOrEqual)
		classes[name] = pc
	}
	pods := map[string]*corev1.Pod{}
	for i := range 2 {
		name := prefix + "-pod-" + string(rune('a'+i))
		p, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": prefix}},
			Spec: corev1.PodSpec{
				PriorityClassName: prefix + "-class-a",
				Containers:        []corev1.Container{{Name: "db", Image: "db:1"}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, ptr.To[int32](1000), p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual, "Priority admission copied the threshold")
		pods[name] = p
	}
	pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + "-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               ptr.To(intstr.FromInt32(2)),
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{"app": prefix}},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return classes, pods, map[string]*policyv1.PodDisruptionBudget{pdb.Name: pdb}
}

// requireReadBack checks that every object reads back as written.
func requireReadBack(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, classes map[string]*schedulingv1.PriorityClass, pods map[string]*corev1.Pod, pdbs map[string]*policyv1.PodDisruptionBudget, msg string) {
	t.Helper()
	for name, want := range classes {
		got, err := c.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		requireSemanticEqual(t, want, got, msg+": PriorityClass "+name)
	}
	for name, want := range pods {
		got, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		requireSemanticEqual(t, want, got, msg+": pod "+name)
	}
	for name, want := range pdbs {
		got, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		requireSemanticEqual(t, want, got, msg+": PodDisruptionBudget "+name)
	}
}
