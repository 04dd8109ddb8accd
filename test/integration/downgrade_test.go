package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kube-guard/test/util/controlplane"
)

// The protobuf field number of allowDisruptionByPriorityGreaterThanOrEqual in
// PodSpec and PriorityClass (patch kep-3280/0002): out of upstream's sequence, so that
// no later upstream release reads the stored value as one of its own fields.
const disruptionPolicyFieldNumber = 3280

// storedFields decodes an object as kube-apiserver stores it in etcd
// ("k8s\x00" and a runtime.Unknown whose field 2 is the object's protobuf)
// and returns the fields of the message at path (field numbers from the
// object's top level, e.g. 2 for a pod's spec; none for the object itself):
// field number to its varint values and its byte values.
func storedFields(t *testing.T, stored []byte, path ...protowire.Number) map[protowire.Number][]any {
	t.Helper()
	prefix := []byte("k8s\x00")
	require.True(t, bytes.HasPrefix(stored, prefix), "the object is stored as protobuf")
	msg := field(t, stored[len(prefix):], 2)
	for _, n := range path {
		msg = field(t, msg, n)
	}
	return protoFields(t, msg)
}

func protoFields(t *testing.T, msg []byte) map[protowire.Number][]any {
	t.Helper()
	out := map[protowire.Number][]any{}
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		require.GreaterOrEqual(t, n, 0, "malformed protobuf tag")
		msg = msg[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(msg)
			require.GreaterOrEqual(t, n, 0)
			out[num] = append(out[num], v)
			msg = msg[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(msg)
			require.GreaterOrEqual(t, n, 0)
			out[num] = append(out[num], v)
			msg = msg[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, msg)
			require.GreaterOrEqual(t, n, 0)
			msg = msg[n:]
		}
	}
	return out
}

func field(t *testing.T, msg []byte, num protowire.Number) []byte {
	t.Helper()
	vs := protoFields(t, msg)[num]
	require.Len(t, vs, 1, "field %d", num)
	b, ok := vs[0].([]byte)
	require.True(t, ok, "field %d is a message", num)
	return b
}

// withoutThreshold returns a copy without the KEP-3280 field, as an
// apiserver that does not know it sees the object.
func podWithoutThreshold(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual = nil
	return p
}

func classWithoutThreshold(pc *schedulingv1.PriorityClass) *schedulingv1.PriorityClass {
	pc = pc.DeepCopy()
	pc.AllowDisruptionByPriorityGreaterThanOrEqual = nil
	return pc
}

func requireSemanticEqual(t *testing.T, want, got any, msg string) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(want, got) {
		t.Fatalf("%s:\nwant %s\ngot  %s", msg, dump.Pretty(want), dump.Pretty(got))
	}
}

// TestDowngradeToPristineAPIServer is the downgrade KEP-3280 promises, with
// real binaries on one etcd: the patched kube-apiserver (gate on) writes
// PriorityClasses and pods with allowDisruptionByPriorityGreaterThanOrEqual;
// pristine upstream's kube-apiserver of the pinned release reads them, lists
// them and updates some; the patched one, started again, reads them all back.
//
// What it checks:
//   - on disk, the field has protobuf number 3280 (not the next number of
//     upstream's sequence, which a later upstream field would take);
//   - upstream reads every object with every field it knows intact, and
//     reading rewrites nothing (etcd's mod revision is unchanged);
//   - objects upstream only read keep the threshold through the downgrade;
//   - objects upstream wrote (an update, a pod status update as a kubelet
//     makes) keep every field and upstream's change, and lose only the
//     threshold, which upstream cannot know: the documented downgrade
//     behaviour of every new API field.
//
// It runs on every release line that carries KEP-3280: the newest line's
// binaries in _output/bin, an older line's in _output/bin/<line> (make test
// builds both the patched and the pristine kube-apiserver of each).
func TestDowngradeToPristineAPIServer(t *testing.T) {
	lines := append(linesWithKEP3280(t), newestLine(t))
	for _, line := range lines {
		bin := controlplane.BinDir(t)
		if line != newestLine(t) {
			bin = controlplane.LineBinDir(t, line)
		}
		t.Run(line, func(t *testing.T) {
			testDowngradeToPristine(t, filepath.Join(bin, "kube-apiserver"), filepath.Join(bin, "pristine", "kube-apiserver"))
		})
	}
}

func testDowngradeToPristine(t *testing.T, patchedBin, pristineBin string) {
	ctx := context.Background()
	etcdURL := controlplane.Etcd(t)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}})
	require.NoError(t, err)
	defer etcd.Close()
	stored := func(key string) ([]byte, int64) {
		t.Helper()
		resp, err := etcd.Get(ctx, "/registry/"+key)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, "%s is stored", key)
		return resp.Kvs[0].Value, resp.Kvs[0].ModRevision
	}

	// 1. The patched apiserver, gate on, writes.
	patched := controlplane.StartAPIServer(t, controlplane.Options{EtcdURL: etcdURL, FeatureGates: "DisruptionPolicyInPriorityClass=true", Binary: patchedBin})
	c := patched.Client
	classes := map[string]*schedulingv1.PriorityClass{}
	for _, name := range []string{"kept", "rewritten"} {
		pc, err := c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "db"}},
			Value:       100,
			Description: "protected from preemption below 1000",
			AllowDisruptionByPriorityGreaterThanOrEqual: ptr.To[int32](1000),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		classes[name] = pc
	}
	ns := "downgrade"
	createNamespace(ctx, t, c, ns)
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"kept", "rewritten", "status"} {
		p, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "db"}, Annotations: map[string]string{"note": name}},
			Spec: corev1.PodSpec{
				PriorityClassName: "kept",
				NodeName:          "node-1",
				Containers: []corev1.Container{{
					Name: "db", Image: "db:1",
					Env:       []corev1.EnvVar{{Name: "A", Value: "b"}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
				}},
				Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}},
				NodeSelector: map[string]string{"disk": "ssd"},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, ptr.To[int32](1000), p.Spec.AllowDisruptionByPriorityGreaterThanOrEqual, "Priority admission copied the threshold")
		pods[name] = p
	}

	// On disk, the threshold is field 3280 of PodSpec and of PriorityClass,
	// and nothing else of upstream's numbering.
	podBytes, _ := stored("pods/" + ns + "/kept")
	spec := storedFields(t, podBytes, 2)
	require.Equal(t, []any{uint64(1000)}, spec[disruptionPolicyFieldNumber], "PodSpec field %d on disk", disruptionPolicyFieldNumber)
	for num := range spec {
		require.True(t, num < 1000 || num == disruptionPolicyFieldNumber, "unexpected PodSpec field %d on disk", num)
	}
	classBytes, _ := stored("priorityclasses/kept")
	class := storedFields(t, classBytes)
	require.Equal(t, []any{uint64(1000)}, class[disruptionPolicyFieldNumber], "PriorityClass field %d on disk", disruptionPolicyFieldNumber)
	for num := range class {
		require.True(t, num < 1000 || num == disruptionPolicyFieldNumber, "unexpected PriorityClass field %d on disk", num)
	}

	_, keptPodRev := stored("pods/" + ns + "/kept")
	_, keptClassRev := stored("priorityclasses/kept")
	patched.Stop()

	// 2. Pristine upstream on the same etcd reads, lists and writes.
	pristine := controlplane.StartAPIServer(t, controlplane.Options{EtcdURL: etcdURL, Binary: pristineBin})
	requireUpstreamVersion(t, pristine.Client)
	u := pristine.Client
	for name, want := range pods {
		got, err := u.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		requireSemanticEqual(t, podWithoutThreshold(want), got, "upstream reads pod "+name+" with every field it knows")
	}
	for name, want := range classes {
		got, err := u.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		requireSemanticEqual(t, classWithoutThreshold(want), got, "upstream reads PriorityClass "+name+" with every field it knows")
	}
	list, err := u.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, len(pods))

	// An update, and a status update as a kubelet makes one.
	rewrittenPod, err := u.CoreV1().Pods(ns).Get(ctx, "rewritten", metav1.GetOptions{})
	require.NoError(t, err)
	rewrittenPod.Labels["rewritten-by"] = "upstream"
	rewrittenPod, err = u.CoreV1().Pods(ns).Update(ctx, rewrittenPod, metav1.UpdateOptions{})
	require.NoError(t, err, "upstream updates a pod the fork wrote")
	statusPod, err := u.CoreV1().Pods(ns).Get(ctx, "status", metav1.GetOptions{})
	require.NoError(t, err)
	statusPod.Status.Phase = corev1.PodRunning
	statusPod.Status.Conditions = append(statusPod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	statusPod, err = u.CoreV1().Pods(ns).UpdateStatus(ctx, statusPod, metav1.UpdateOptions{})
	require.NoError(t, err, "upstream updates the status of a pod the fork wrote")
	rewrittenClass, err := u.SchedulingV1().PriorityClasses().Get(ctx, "rewritten", metav1.GetOptions{})
	require.NoError(t, err)
	rewrittenClass.Labels["rewritten-by"] = "upstream"
	rewrittenClass, err = u.SchedulingV1().PriorityClasses().Update(ctx, rewrittenClass, metav1.UpdateOptions{})
	require.NoError(t, err, "upstream updates a PriorityClass the fork wrote")

	_, rev := stored("pods/" + ns + "/kept")
	require.Equal(t, keptPodRev, rev, "reading a pod did not rewrite it")
	_, rev = stored("priorityclasses/kept")
	require.Equal(t, keptClassRev, rev, "reading a PriorityClass did not rewrite it")
	pristine.Stop()

	// 3. The patched apiserver again.
	patched = controlplane.StartAPIServer(t, controlplane.Options{EtcdURL: etcdURL, FeatureGates: "DisruptionPolicyInPriorityClass=true", Binary: patchedBin})
	c = patched.Client
	got, err := c.CoreV1().Pods(ns).Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err)
	requireSemanticEqual(t, pods["kept"], got, "a pod upstream only read keeps everything, the threshold included")
	gotClass, err := c.SchedulingV1().PriorityClasses().Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err)
	requireSemanticEqual(t, classes["kept"], gotClass, "a PriorityClass upstream only read keeps everything, the threshold included")

	for name, want := range map[string]*corev1.Pod{"rewritten": rewrittenPod, "status": statusPod} {
		got, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		requireSemanticEqual(t, want, got, fmt.Sprintf("pod %s, written by upstream: upstream's change and every other field kept", name))
		require.Nil(t, got.Spec.AllowDisruptionByPriorityGreaterThanOrEqual, "pod %s: upstream's write dropped the field it does not know", name)
	}
	gotClass, err = c.SchedulingV1().PriorityClasses().Get(ctx, "rewritten", metav1.GetOptions{})
	require.NoError(t, err)
	requireSemanticEqual(t, rewrittenClass, gotClass, "PriorityClass written by upstream: upstream's change and every other field kept")
	require.Nil(t, gotClass.AllowDisruptionByPriorityGreaterThanOrEqual)
}

// requireUpstreamVersion checks that the server is pristine upstream's
// release, not the fork (whose version carries a -guard.N pre-release).
func requireUpstreamVersion(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	info, err := c.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Regexp(t, `^v\d+\.\d+\.\d+$`, info.GitVersion, "pristine upstream's kube-apiserver")
}
