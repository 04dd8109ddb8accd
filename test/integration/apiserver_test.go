package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kube-guard/test/util/controlplane"
)

// TestPatchedAPIServerServesAndPersists starts the built etcd and the patched
// kube-apiserver, checks that the server reports the stamped fork version,
// and that an object written through the API is stored in etcd.
func TestPatchedAPIServerServesAndPersists(t *testing.T) {
	ctx := context.Background()
	s := controlplane.StartAPIServer(t, controlplane.Options{})

	out, err := exec.Command(filepath.Join(controlplane.BinDir(t), "kube-apiserver"), "--version").Output()
	require.NoError(t, err)
	binVersion := strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes ")
	info, err := s.Client.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, binVersion, info.GitVersion, "the server's /version is the stamped fork version")

	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "integration-test"}, Value: 1000}
	_, err = s.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
	require.NoError(t, err)

	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{s.EtcdURL}})
	require.NoError(t, err)
	defer etcd.Close()
	resp, err := etcd.Get(ctx, s.EtcdRoot+"/priorityclasses/integration-test")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the PriorityClass is stored in etcd")

	// System priority classes are created by the apiserver's bootstrap hook.
	_, err = s.Client.SchedulingV1().PriorityClasses().Get(ctx, "system-cluster-critical", metav1.GetOptions{})
	require.NoError(t, err)
}
