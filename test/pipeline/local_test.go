package pipeline

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bashLib runs a bash snippet with hack/lib/init.sh and hack/lib/local.sh of
// the real repository sourced, and OUTPUT_DIR set to outputDir.
func bashLib(t *testing.T, outputDir, snippet string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"-c", `set -o errexit -o nounset -o pipefail
source hack/lib/init.sh
source hack/lib/local.sh
` + snippet, "-"}, args...)...)
	cmd.Dir = realRepo
	cmd.Env = append(os.Environ(), "OUTPUT_DIR="+outputDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRequireFreeDisk: make test refuses to start on a disk without room,
// naming the path and what is free there, and starts where there is room.
func TestRequireFreeDisk(t *testing.T) {
	dir := t.TempDir()
	out, err := bashLib(t, dir, `free_gib "$1"`, filepath.Join(dir, "not", "there", "yet"))
	require.NoError(t, err, out)
	free, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err, "free_gib printed %q", out)

	out, err = bashLib(t, dir, `require_free_disk "$1" "$2"`, strconv.Itoa(free), dir)
	require.NoError(t, err, out)

	out, err = bashLib(t, dir, `require_free_disk "$1" "$2"`, strconv.Itoa(free+1000000), dir)
	require.Error(t, err)
	require.Contains(t, out, fmt.Sprintf("less than %d GiB free on: %s (%d GiB free)", free+1000000, dir, free))
	require.Contains(t, out, "go clean -cache")
}

// TestLocalReportNamesExitedComponents: after a failed e2e run, the report
// says which of the cluster's components exited, with the end of their logs,
// and which still run, whose logs it leaves out.
func TestLocalReportNamesExitedComponents(t *testing.T) {
	out := t.TempDir()
	cluster := filepath.Join(out, "local", "kwok", "clusters", "kube-guard")
	for _, d := range []string{"pids", "logs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(cluster, d), 0o755))
	}
	// A running component: its command line names the cluster's directory,
	// as the real ones' flags do.
	running := exec.Command("bash", "-c", "sleep 300; :", filepath.Join(cluster, "kube-apiserver"))
	require.NoError(t, running.Start())
	t.Cleanup(func() { _ = running.Process.Kill(); _ = running.Wait() })
	// An exited one.
	exited := exec.Command("true")
	require.NoError(t, exited.Run())
	write := func(rel, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(cluster, rel), []byte(content), 0o644))
	}
	write("pids/kube-apiserver.pid", strconv.Itoa(running.Process.Pid))
	write("pids/etcd.pid", strconv.Itoa(exited.Process.Pid))
	write("logs/kube-apiserver.log", "apiserver line\n")
	var log strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&log, "etcd line %d\n", i)
	}
	log.WriteString("panic: write wal: no space left on device\n")
	write("logs/etcd.log", log.String())

	report, err := bashLib(t, out, `local::report`)
	require.NoError(t, err, report)
	require.Contains(t, report, fmt.Sprintf("kube-apiserver (pid %d) is running", running.Process.Pid))
	require.Contains(t, report, fmt.Sprintf("etcd (pid %d) has exited", exited.Process.Pid))
	require.Contains(t, report, "GiB free on the file system of "+cluster)
	require.Contains(t, report, "panic: write wal: no space left on device")
	require.Contains(t, report, "etcd line 30")
	require.NotContains(t, report, "etcd line 11\n", "only the last 20 lines of a log")
	require.NotContains(t, report, "apiserver line", "the logs of running components are left out")
}
