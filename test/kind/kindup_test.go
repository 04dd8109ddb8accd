// Package kind tests the cluster scripts' settings (hack/lib/gates.sh) and
// the refusals of `make kind-up` and `make kind-down` without a docker
// engine: the scripts run against stand-ins for docker and
// kind (shell scripts first on PATH and in the output directory's bin) that
// answer as a given engine would and record what they were asked to do. The
// cluster itself is tested by `make kind-e2e`, which needs a real engine.
package kind

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"kube-guard/test/util/controlplane"
	"kube-guard/test/util/pins"
)

// The stand-in for docker. STUB_LOG records every call; STUB_RUNTIME is the
// engine's default runtime; STUB_NO_ENGINE=1 is no engine; STUB_NO_IMAGE=1 a
// node image that is not there; STUB_NODE_VERSION what /kind/version of the
// node image holds (empty: no such file); STUB_NODES (a file) the cluster's
// node containers, "NAME STATE" a line. "rm -f" removes a node container
// unless it is STUB_STUCK (a process of it in uninterruptible sleep) or the
// cgroup freezer holds part of it (a freezer.state of FROZEN or a
// cgroup.freeze of 1 under KIND_CGROUP_ROOT in a directory named for its
// id): docker does not get an exit event from such a container.
const dockerStub = `#!/usr/bin/env bash
echo "docker $*" >>"${STUB_LOG}"
case "$1 $2" in
"ps --all") [[ -n "${STUB_NODES:-}" && -f "${STUB_NODES}" ]] && cat "${STUB_NODES}"; exit 0 ;;
"rm -f")
  name="${@: -1}"
  if [[ "${name}" == "${STUB_STUCK:-}" ]]; then
    echo "Error response from daemon: Could not kill running container ${name}, tried to kill container, but did not receive an exit event" >&2
    exit 1
  fi
  while read -r f; do
    if grep -qsxE 'FROZEN|1' "${f}"; then
      echo "Error response from daemon: Could not kill running container ${name}, tried to kill container, but did not receive an exit event" >&2
      exit 1
    fi
  done < <(find "${KIND_CGROUP_ROOT}" -path "*stub-id-${name}*" \( -name freezer.state -o -name cgroup.freeze \))
  grep -v "^${name} " "${STUB_NODES}" >"${STUB_NODES}.left" || true
  mv "${STUB_NODES}.left" "${STUB_NODES}"
  exit 0 ;;
"exec "*) exit 0 ;;
"inspect --format") echo "stub-id-$4"; exit 0 ;;
"info "*)
  [[ "${STUB_NO_ENGINE:-0}" == 1 ]] && { echo "Cannot connect to the Docker daemon" >&2; exit 1; }
  [[ "$*" == *DefaultRuntime* ]] && echo "${STUB_RUNTIME:-kube-guard}"
  exit 0 ;;
"image inspect")
  [[ "${STUB_NO_IMAGE:-0}" == 1 ]] && { echo "No such image" >&2; exit 1; }
  echo '[{}]'; exit 0 ;;
"run --rm")
  [[ "$*" != *image-tags* ]] || { printf '%b' "${STUB_IMAGE_TAGS:-}"; exit 0; }
  [[ -n "${STUB_NODE_VERSION:-}" ]] || { echo "cat: /kind/version: No such file or directory" >&2; exit 1; }
  echo "${STUB_NODE_VERSION}"; exit 0 ;;
esac
echo "docker stand-in: unexpected call: $*" >&2
exit 2
`

// The stand-in for kind: STUB_CLUSTERS lists the clusters, as does a
// non-empty STUB_NODES; creating one fails, as kind does when a node does
// not come up; deleting one removes the node containers of STUB_NODES with
// docker rm -f -v, as kind does, and fails naming one that docker could
// not remove; STUB_FREEZE=FILE is a cgroup that the node's runc freezes as
// kind deletes the nodes (FILE then says STUB_FREEZE_AS, default FROZEN).
const kindStub = `#!/usr/bin/env bash
echo "kind $*" >>"${STUB_LOG}"
case "$1 $2" in
"get clusters")
  if [[ -n "${STUB_CLUSTERS:-}" ]]; then echo "${STUB_CLUSTERS}"
  elif [[ -s "${STUB_NODES:-/nonexistent}" ]]; then echo kube-guard; fi
  exit 0 ;;
"create cluster") echo "ERROR: failed to create cluster: node did not become ready" >&2; exit 1 ;;
"export logs") exit 0 ;;
"delete cluster")
  [[ -z "${STUB_FREEZE:-}" ]] || echo "${STUB_FREEZE_AS:-FROZEN}" >"${STUB_FREEZE}"
  [[ -n "${STUB_NODES:-}" && -f "${STUB_NODES}" ]] || exit 0
  failed=""
  for name in $(cut -d' ' -f1 "${STUB_NODES}"); do
    docker rm -f -v "${name}" >/dev/null 2>&1 || failed="${name}"
  done
  if [[ -n "${failed}" ]]; then
    echo "ERROR: failed to delete cluster \"kube-guard\": failed to delete nodes: command \"docker rm -f -v ${failed}\" failed with error: exit status 1" >&2
    exit 1
  fi
  exit 0 ;;
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

// env is what every script run with the stand-ins gets: their PATH and log,
// the output directory, and a cgroup filesystem of its own (empty until a
// test writes one).
func (h *harness) env() []string {
	return []string{"PATH=" + h.path, "OUTPUT_DIR=" + h.out, "STUB_LOG=" + h.log,
		"KIND_CGROUP_ROOT=" + filepath.Join(h.out, "cgroup")}
}

// run runs a make-rules script with the stand-ins and ENV; it returns the
// combined output and the exit error.
func (h *harness) run(t *testing.T, script string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.root, "hack", "make-rules", script))
	cmd.Env = append(os.Environ(), h.env()...)
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

// forkVersion is the version `make node-image` stamps on the node image
// (of the release line env's LINE=<line> names, default the newest).
func (h *harness) forkVersion(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", `source hack/lib/init.sh && source hack/lib/version.sh && version::of kubernetes`)
	cmd.Dir = h.root
	cmd.Env = append(append(os.Environ(), "OUTPUT_DIR="+h.out), env...)
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
		{"KIND_KUBERNETES_VERSION=9.8.7", "KIND_KUBERNETES_VERSION=9.8.7 is not a Kubernetes version"},
		{"KIND_KUBERNETES_VERSION=v9.8", "KIND_KUBERNETES_VERSION=v9.8 is not a Kubernetes version"},
		{"KIND_IMAGE_ARCHIVES=/nonexistent/kube-apiserver.tar", "KIND_IMAGE_ARCHIVES: /nonexistent/kube-apiserver.tar is not a readable file"},
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
		{"another build", []string{"STUB_NODE_VERSION=v1.35.9-guard.2"},
			image + " is a node image of v1.35.9-guard.2, this tree builds " + version},
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

// nodes writes the stand-ins' node containers of the cluster and returns the
// STUB_NODES setting.
func (h *harness) nodes(t *testing.T, lines ...string) string {
	t.Helper()
	f := filepath.Join(h.out, "nodes")
	require.NoError(t, os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return "STUB_NODES=" + f
}

// TestKindDownSaysWhatBlocksIt: docker cannot remove a node container (a
// process of it in uninterruptible sleep): make kind-down stops the nodes'
// kubelets and containerds first, then says which container is left, in
// what state, and what to run, and exits 1 keeping the kubeconfig; run
// again once the container can go, it removes what is left.
func TestKindDownSaysWhatBlocksIt(t *testing.T) {
	h := newHarness(t)
	nodes := h.nodes(t, "kube-guard-control-plane running", "kube-guard-worker running")
	dir := filepath.Join(h.out, "kind")
	require.NoError(t, os.MkdirAll(dir, 0o755))

	out, err := h.run(t, "kind-down.sh", nodes, "STUB_STUCK=kube-guard-worker")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, out)
	require.Equal(t, 1, exit.ExitCode(), out)
	require.Contains(t, out, `command "docker rm -f -v kube-guard-worker" failed`, "kind's own error is shown")
	require.Contains(t, out, "kind could not delete the cluster 'kube-guard': docker still has its node containers:")
	require.Contains(t, out, "kube-guard-worker (running)")
	require.NotContains(t, out, "kube-guard-control-plane (", "only what is left is named")
	require.Contains(t, out, "run make kind-down again once those processes are gone (it thaws what the cgroup freezer holds, which it says); if they stay, restart the docker engine")
	calls := h.calls(t)
	stop := strings.Index(calls, "docker exec kube-guard-worker systemctl stop kubelet containerd")
	del := strings.Index(calls, "kind delete cluster --name kube-guard")
	require.True(t, stop >= 0 && del > stop, "the kubelet and containerd are stopped before kind deletes the nodes:\n%s", calls)
	require.Equal(t, 1, strings.Count(calls, "docker rm -f -v kube-guard-worker"), "kind's removal only: nothing was frozen, so no second one:\n%s", calls)
	require.DirExists(t, dir, "the kubeconfig stays while the cluster does")

	out, err = h.run(t, "kind-up.sh", nodes)
	require.Error(t, err, out)
	require.Contains(t, out, "the kind cluster 'kube-guard' exists already (node containers: kube-guard-worker (running)): make kind-down first; it says what blocks it")

	out, err = h.run(t, "kind-down.sh", nodes)
	require.NoError(t, err, out)
	require.Contains(t, out, "kind cluster 'kube-guard' deleted")
	require.NoDirExists(t, dir)
}

// TestKindDownThawsWhatTheFreezerHolds: a pod container's cgroup that the
// node's runc left frozen (its tasks in uninterruptible sleep, beyond
// SIGKILL) keeps docker from removing the node. make kind-down thaws such
// cgroups before kind deletes the nodes, and when one is frozen as kind
// deletes them, thaws it and removes the node again; on cgroup v1 (freezer
// hierarchy) and v2 (cgroup.freeze) alike. A cgroup that is not frozen is
// left as it is.
func TestKindDownThawsWhatTheFreezerHolds(t *testing.T) {
	for _, tc := range []struct {
		name, node, ctr, file, frozen, thawed string
	}{
		{name: "cgroup v1", node: "freezer/docker/stub-id-kube-guard-worker", ctr: "kubepods/besteffort/pod1/ctr1",
			file: "freezer.state", frozen: "FROZEN", thawed: "THAWED"},
		{name: "cgroup v2", node: "system.slice/docker-stub-id-kube-guard-worker.scope", ctr: "kubelet.slice/kubelet-kubepods.slice/pod1/ctr1",
			file: "cgroup.freeze", frozen: "1", thawed: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			root := filepath.Join(h.out, "cgroup")
			write := func(rel, content string) string {
				f := filepath.Join(root, tc.node, rel, tc.file)
				require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
				require.NoError(t, os.WriteFile(f, []byte(content+"\n"), 0o644))
				return f
			}
			read := func(f string) string {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				return strings.TrimSpace(string(b))
			}
			nodes := []string{"kube-guard-control-plane running", "kube-guard-worker running"}
			dir := filepath.Join(h.out, "kind")

			// Frozen before the teardown: thawed before kind deletes.
			write("", tc.thawed)
			frozen := write(tc.ctr, tc.frozen)
			other := write("kubepods/besteffort/pod1/ctr2", tc.thawed)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			out, err := h.run(t, "kind-down.sh", h.nodes(t, nodes...))
			require.NoError(t, err, out)
			require.Contains(t, out, "kube-guard-worker: thawed "+filepath.Dir(frozen)+" (the cgroup freezer held it)")
			require.Equal(t, tc.thawed, read(frozen))
			require.Equal(t, tc.thawed, read(other))
			require.NotContains(t, out, "ctr2", "only what was frozen is named")
			require.Contains(t, out, "kind cluster 'kube-guard' deleted")
			require.Equal(t, 1, strings.Count(h.calls(t), "docker rm -f -v kube-guard-worker"), "kind's removal only:\n%s", h.calls(t))
			require.NoDirExists(t, dir)

			// Frozen as kind deletes the nodes: docker cannot remove the
			// node; make kind-down thaws it and removes it again.
			require.NoError(t, os.MkdirAll(dir, 0o755))
			out, err = h.run(t, "kind-down.sh", h.nodes(t, nodes...), "STUB_FREEZE="+frozen, "STUB_FREEZE_AS="+tc.frozen)
			require.NoError(t, err, out)
			require.Contains(t, out, "docker could not remove kube-guard-worker while the cgroup freezer held part of it; removing it again, thawed")
			require.Contains(t, out, "kube-guard-worker: thawed "+filepath.Dir(frozen))
			require.Equal(t, tc.thawed, read(frozen))
			require.Equal(t, 3, strings.Count(h.calls(t), "docker rm -f -v kube-guard-worker"), "kind's, refused, then the one after thawing:\n%s", h.calls(t))
			require.Contains(t, out, "kind cluster 'kube-guard' deleted")
			require.NoDirExists(t, dir)
		})
	}
}

// TestKindTeardownKeepsTheTestsVerdict: make kind-e2e deletes the cluster it
// made in an EXIT trap (kind::teardown); the script's exit status is the
// tests', whether the teardown finishes or not, and a teardown that does not
// finish says so next to the verdict.
func TestKindTeardownKeepsTheTestsVerdict(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name   string
		tests  int
		stuck  bool
		want   int
		says   string
		silent string
	}{
		{name: "passed, teardown done", tests: 0, want: 0, silent: "did not finish"},
		{name: "failed, teardown done", tests: 3, want: 3, silent: "did not finish"},
		{name: "passed, teardown stuck", tests: 0, stuck: true, want: 0, says: "the tests passed; the cluster's teardown did not finish (above)"},
		{name: "failed, teardown stuck", tests: 3, stuck: true, want: 3, says: "the tests failed (exit 3); the cluster's teardown did not finish either (above)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{h.nodes(t, "kube-guard-control-plane running", "kube-guard-worker running")}
			if tc.stuck {
				env = append(env, "STUB_STUCK=kube-guard-worker")
			}
			cmd := exec.Command("bash", "-c", `set -o errexit -o nounset -o pipefail
source hack/lib/init.sh
source hack/lib/kind.sh
trap kind::teardown EXIT
exit "$1"`, "teardown", strconv.Itoa(tc.tests))
			cmd.Dir = h.root
			cmd.Env = append(os.Environ(), h.env()...)
			cmd.Env = append(cmd.Env, env...)
			out, err := cmd.CombinedOutput()
			got := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				got = exit.ExitCode()
			} else {
				require.NoError(t, err, string(out))
			}
			require.Equal(t, tc.want, got, string(out))
			require.Contains(t, h.calls(t), "kind delete cluster --name kube-guard")
			if tc.says != "" {
				require.Contains(t, string(out), tc.says)
				require.Contains(t, string(out), "kube-guard-worker (running)")
			}
			if tc.silent != "" {
				require.NotContains(t, string(out), tc.silent)
			}
		})
	}
}

// TestKindUpGivesKubeadmTheNodeImagesTags: on every release line, kind-up
// runs that line's node image; where the image says it carries etcd or
// CoreDNS under other tags than kubeadm names (/kind/kube-guard/image-tags,
// an older line's image), the config gives kubeadm those tags, and
// otherwise it patches no ClusterConfiguration.
func TestKindUpGivesKubeadmTheNodeImagesTags(t *testing.T) {
	h := newHarness(t)
	lines, err := pins.Lines(h.root, "kubernetes")
	require.NoError(t, err)
	def, err := pins.DefaultLine(h.root, "kubernetes")
	require.NoError(t, err)
	for _, line := range lines {
		if _, err := os.Stat(filepath.Join(h.root, "_output", "src", "kubernetes-"+line, ".git")); err != nil && line != def {
			t.Fatalf("line %s: its tree is not materialised (make build LINE=%s)", line, line)
		}
		version := h.forkVersion(t, "LINE="+line)
		for tags, want := range map[string][]string{
			"":                                    nil,
			`etcd 9.8.7-0\ncoredns v0.0.1-stub\n`: {"- |\n  kind: ClusterConfiguration\n  etcd:\n    local:\n      imageTag: \"9.8.7-0\"", "dns:\n    imageTag: \"v0.0.1-stub\""},
			`coredns v0.0.1-stub\n`:               {"- |\n  kind: ClusterConfiguration\n  dns:\n    imageTag: \"v0.0.1-stub\""},
		} {
			require.NoError(t, os.RemoveAll(h.log))
			out, err := h.run(t, "kind-up.sh", "LINE="+line, "STUB_NODE_VERSION="+version, "STUB_IMAGE_TAGS="+tags)
			require.Error(t, err, out) // the stand-in kind cannot create clusters
			require.Contains(t, h.calls(t), "kind create cluster --name kube-guard --image kube-guard/node:"+version, "line %s", line)
			config, err := os.ReadFile(filepath.Join(h.out, "kind", "config.yaml"))
			require.NoError(t, err)
			var parsed map[string]any
			require.NoError(t, yaml.Unmarshal(config, &parsed), "line %s, tags %q: the config is YAML:\n%s", line, tags, config)
			if want == nil {
				require.NotContains(t, string(config), "imageTag", "line %s", line)
				continue
			}
			for _, w := range want {
				require.Contains(t, string(config), w, "line %s, tags %q", line, tags)
			}
			if !strings.Contains(tags, "etcd") {
				require.NotContains(t, string(config), "etcd:", "line %s", line)
			}
		}
	}
}

// TestKindUpRunsAnotherControlPlane: KIND_KUBERNETES_VERSION is the version
// kubeadm deploys, and every node imports the images of KIND_IMAGE_ARCHIVES
// with the node image's own (make kind-upgrade-test: upstream's control
// plane on the fork's node image); without them, neither is in the config.
func TestKindUpRunsAnotherControlPlane(t *testing.T) {
	h := newHarness(t)
	version := h.forkVersion(t)
	dir := t.TempDir()
	var archives []string
	for _, name := range []string{"kube-apiserver.tar", "kube-proxy.tar"} {
		archives = append(archives, filepath.Join(dir, name))
		require.NoError(t, os.WriteFile(archives[len(archives)-1], []byte("archive"), 0o644))
	}
	out, err := h.run(t, "kind-up.sh", "STUB_NODE_VERSION="+version, "KIND_WORKERS=1", "KIND_KUBERNETES_VERSION=v9.8.7",
		"KIND_IMAGE_ARCHIVES="+strings.Join(archives, " "))
	require.Error(t, err, out) // the stand-in kind cannot create clusters
	require.Contains(t, out, "control plane v9.8.7")
	config, err := os.ReadFile(filepath.Join(h.out, "kind", "config.yaml"))
	require.NoError(t, err)
	var parsed struct {
		Nodes []struct {
			Role        string
			ExtraMounts []struct {
				HostPath, ContainerPath string
				ReadOnly                bool
			} `json:"extraMounts"`
		}
		KubeadmConfigPatches []string `json:"kubeadmConfigPatches"`
	}
	require.NoError(t, yaml.Unmarshal(config, &parsed), string(config))
	require.Len(t, parsed.Nodes, 2, string(config))
	for _, n := range parsed.Nodes {
		require.Len(t, n.ExtraMounts, 2, "%s node", n.Role)
		for i, m := range n.ExtraMounts {
			require.Equal(t, archives[i], m.HostPath)
			require.Equal(t, "/kind/images/extra-"+strconv.Itoa(i)+"-"+filepath.Base(archives[i]), m.ContainerPath)
			require.True(t, m.ReadOnly)
		}
	}
	require.Contains(t, parsed.KubeadmConfigPatches, "kind: ClusterConfiguration\nkubernetesVersion: \"v9.8.7\"\n", string(config))

	require.NoError(t, os.RemoveAll(h.log))
	out, err = h.run(t, "kind-up.sh", "STUB_NODE_VERSION="+version)
	require.Error(t, err, out)
	config, err = os.ReadFile(filepath.Join(h.out, "kind", "config.yaml"))
	require.NoError(t, err)
	require.NotContains(t, string(config), "extraMounts")
	require.NotContains(t, string(config), "kubernetesVersion")
}
