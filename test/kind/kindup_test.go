// Package kind tests the cluster scripts' settings (hack/lib/gates.sh) and
// the refusals of `make kind-up` and `make kind-down` without a docker
// engine: the scripts run against stand-ins for docker and
// kind (shell scripts first on PATH and in the output directory's bin) that
// answer as a given engine would and record what they were asked to do. The
// cluster itself is tested by `make kind-e2e`, which needs a real engine.
package kind

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kube-guard/test/util/controlplane"
)

// The stand-in for docker. STUB_LOG records every call; STUB_RUNTIME is the
// engine's default runtime; STUB_NO_ENGINE=1 is no engine; STUB_NO_IMAGE=1 a
// node image that is not there; STUB_NODE_VERSION what /kind/version of the
// node image holds (empty: no such file).
const dockerStub = `#!/usr/bin/env bash
echo "docker $*" >>"${STUB_LOG}"
case "$1 $2" in
"info "*)
  [[ "${STUB_NO_ENGINE:-0}" == 1 ]] && { echo "Cannot connect to the Docker daemon" >&2; exit 1; }
  [[ "$*" == *DefaultRuntime* ]] && echo "${STUB_RUNTIME:-kube-guard}"
  exit 0 ;;
"image inspect")
  [[ "${STUB_NO_IMAGE:-0}" == 1 ]] && { echo "No such image" >&2; exit 1; }
  echo '[{}]'; exit 0 ;;
"run --rm")
  [[ -n "${STUB_NODE_VERSION:-}" ]] || { echo "cat: /kind/version: No such file or directory" >&2; exit 1; }
  echo "${STUB_NODE_VERSION}"; exit 0 ;;
esac
echo "docker stand-in: unexpected call: $*" >&2
exit 2
`

// The stand-in for kind: STUB_CLUSTERS lists the clusters; creating one
// fails, as kind does when a node does not come up.
const kindStub = `#!/usr/bin/env bash
echo "kind $*" >>"${STUB_LOG}"
case "$1 $2" in
"get clusters") [[ -n "${STUB_CLUSTERS:-}" ]] && echo "${STUB_CLUSTERS}"; exit 0 ;;
"create cluster") echo "ERROR: failed to create cluster: node did not become ready" >&2; exit 1 ;;
"export logs") exit 0 ;;
"delete cluster") exit 0 ;;
esac
echo "kind stand-in: unexpected call: $*" >&2
exit 2
`

type harness struct {
	root, out, log string
	path           string
}

// newHarness makes an output directory whose src is the repository's
// materialised trees (the scripts read the fork version there) and whose bin
// holds the kind stand-in, and a PATH with the docker stand-in first.
func newHarness(t *testing.T) *harness {
	t.Helper()
	root := controlplane.RepoRoot(t)
	src := filepath.Join(root, "_output", "src", "kubernetes", ".git")
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("%v: the kubernetes tree is not materialised (make build)", err)
	}
	out := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(root, "_output", "src"), filepath.Join(out, "src")))
	stubs := filepath.Join(out, "stubs")
	require.NoError(t, os.MkdirAll(filepath.Join(out, "bin"), 0o755))
	require.NoError(t, os.MkdirAll(stubs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stubs, "docker"), []byte(dockerStub), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(out, "bin", "kind"), []byte(kindStub), 0o755))
	return &harness{root: root, out: out, log: filepath.Join(out, "calls.log"),
		path: stubs + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// run runs a make-rules script with the stand-ins and ENV; it returns the
// combined output and the exit error.
func (h *harness) run(t *testing.T, script string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.root, "hack", "make-rules", script))
	cmd.Env = append(os.Environ(), "PATH="+h.path, "OUTPUT_DIR="+h.out, "STUB_LOG="+h.log)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// calls returns what the stand-ins were asked to do.
func (h *harness) calls(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(h.log)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

// forkVersion is the version `make node-image` stamps on the node image.
func (h *harness) forkVersion(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", `source hack/lib/init.sh && source hack/lib/version.sh && version::of kubernetes`)
	cmd.Dir = h.root
	cmd.Env = append(os.Environ(), "OUTPUT_DIR="+h.out)
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.Fields(string(out))[0]
}

// TestKindUpRefusesBadSettings: settings that cannot work are refused before
// anything is started: no docker or kind call is made.
func TestKindUpRefusesBadSettings(t *testing.T) {
	h := newHarness(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)

	for _, tc := range []struct {
		env, want string
	}{
		{"KIND_WORKERS=two", "KIND_WORKERS=two is not a number"},
		{"KIND_WAIT=5m", "KIND_WAIT=5m is not a number of seconds"},
		{"KIND_API_SERVER_PORT=http", "KIND_API_SERVER_PORT=http is not a port number"},
		{"KIND_API_SERVER_PORT=70000", "KIND_API_SERVER_PORT=70000 is not a port number"},
		{"KIND_API_SERVER_PORT=" + busyPort, "port " + busyPort + " on 127.0.0.1 (KIND_API_SERVER_PORT) is in use"},
	} {
		out, err := h.run(t, "kind-up.sh", tc.env)
		require.Error(t, err, "%s: %s", tc.env, out)
		require.Contains(t, out, tc.want, tc.env)
		require.Empty(t, h.calls(t), "%s: nothing may be started", tc.env)
	}
}

// TestKindUpRefusesWhatItCannotUse: an existing cluster, a missing node
// image, an image that is not a kind node image, a node image of another
// build, and (where the host needs it) an engine without the capability
// shim: each a clear error, and no cluster is created.
func TestKindUpRefusesWhatItCannotUse(t *testing.T) {
	h := newHarness(t)
	version := h.forkVersion(t)
	image := "kube-guard/node:" + version
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"cluster exists", []string{"STUB_CLUSTERS=kube-guard", "STUB_NODE_VERSION=" + version},
			"the kind cluster 'kube-guard' exists already: make kind-down first"},
		{"no node image", []string{"STUB_NO_IMAGE=1"},
			"no node image " + image + " in docker: run make node-image"},
		{"not a node image", []string{"KIND_NODE_IMAGE=debian:bookworm"},
			"debian:bookworm has no /kind/version: not a kind node image"},
		{"another build", []string{"STUB_NODE_VERSION=v1.36.3-guard.2"},
			image + " is a node image of v1.36.3-guard.2, this tree builds " + version},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.RemoveAll(h.log))
			out, err := h.run(t, "kind-up.sh", tc.env...)
			require.Error(t, err, out)
			require.Contains(t, out, tc.want)
			require.NotContains(t, h.calls(t), "kind create")
		})
	}

	t.Run("engine without the shim", func(t *testing.T) {
		status, err := os.ReadFile("/proc/self/status")
		require.NoError(t, err)
		if !lacksSysResource(t, string(status)) {
			t.Skip("this host's bounding set has CAP_SYS_RESOURCE: any engine will do")
		}
		require.NoError(t, os.RemoveAll(h.log))
		out, err := h.run(t, "kind-up.sh", "STUB_RUNTIME=runc", "STUB_NODE_VERSION="+version)
		require.Error(t, err, out)
		require.Contains(t, out, "the running docker engine cannot start privileged containers here")
		require.NotContains(t, h.calls(t), "kind ")
	})
}

// lacksSysResource reads CapBnd from /proc/self/status: bit 24 is
// CAP_SYS_RESOURCE.
func lacksSysResource(t *testing.T, status string) bool {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			bnd, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			require.NoError(t, err)
			return bnd&(1<<24) == 0
		}
	}
	t.Fatal("no CapBnd in /proc/self/status")
	return false
}

// TestKindUpCleansUpAFailedCreate: when kind cannot create the cluster, its
// logs are kept, what it made is deleted (so a rerun starts clean), and the
// message says where the logs are. The generated config carries a port that
// was asked for.
func TestKindUpCleansUpAFailedCreate(t *testing.T) {
	h := newHarness(t)
	version := h.forkVersion(t)
	port := strconv.Itoa(controlplane.FreePort(t))
	out, err := h.run(t, "kind-up.sh", "STUB_NODE_VERSION="+version, "KIND_API_SERVER_PORT="+port, "KIND_WORKERS=3")
	require.Error(t, err, out)
	require.Contains(t, out, "kind could not create the cluster (node logs: "+filepath.Join(h.out, "kind", "logs")+"); deleted what it made")
	calls := h.calls(t)
	require.Contains(t, calls, "kind create cluster --name kube-guard --image kube-guard/node:"+version)
	require.Contains(t, calls, "kind export logs "+filepath.Join(h.out, "kind", "logs")+" --name kube-guard")
	require.Contains(t, calls, "kind delete cluster --name kube-guard")

	config, err := os.ReadFile(filepath.Join(h.out, "kind", "config.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(config), "apiServerPort: "+port)
	require.Equal(t, 3, strings.Count(string(config), "- role: worker"), string(config))
}

// TestKindDown: without an engine there is nothing to delete and that is not
// an error; an existing cluster is deleted with its kubeconfig directory.
func TestKindDown(t *testing.T) {
	h := newHarness(t)
	out, err := h.run(t, "kind-down.sh", "STUB_NO_ENGINE=1")
	require.NoError(t, err, out)
	require.Contains(t, out, "no docker engine: no kind cluster")
	require.NotContains(t, h.calls(t), "kind delete")

	dir := filepath.Join(h.out, "kind")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), nil, 0o600))
	out, err = h.run(t, "kind-down.sh", "STUB_CLUSTERS=kube-guard")
	require.NoError(t, err, out)
	require.Contains(t, h.calls(t), "kind delete cluster --name kube-guard")
	require.NoDirExists(t, dir)
}
