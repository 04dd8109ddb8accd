// Package build checks what `make build` leaves in _output/bin: every
// Kubernetes binary and the descheduler carry the fork version of their
// component, and the pinned tools are the versions this repository pins.
package build

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/version"

	"kube-guard/test/util/controlplane"
	"kube-guard/test/util/pins"
)

// component reads the pin of a component (test/util/pins).
func component(t *testing.T, root, name string) pins.Component {
	t.Helper()
	c, err := pins.Load(root, name)
	require.NoError(t, err)
	return c
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "%s %v: %s", bin, args, out)
	return string(out)
}

func TestKubernetesBinariesAreStamped(t *testing.T) {
	root := controlplane.RepoRoot(t)
	want, commit := forkVersion(t, root, "kubernetes")
	v := version.MustParseSemantic(want)

	for _, bin := range []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager", "kube-proxy"} {
		t.Run(bin, func(t *testing.T) {
			path := filepath.Join(root, "_output", "bin", bin)
			require.FileExists(t, path, "run `make build` first")
			require.Equal(t, "Kubernetes "+want+"\n", run(t, path, "--version"))
			raw := run(t, path, "--version=raw")
			require.Contains(t, raw, `GitCommit:"`+commit+`"`)
			require.Contains(t, raw, `Major:"`+fmtInt(v.Major())+`"`)
			require.Contains(t, raw, `Minor:"`+fmtInt(v.Minor())+`"`)
			require.Regexp(t, regexp.MustCompile(`BuildDate:"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"`), raw)
		})
	}

	t.Run("kubectl", func(t *testing.T) {
		path := filepath.Join(root, "_output", "bin", "kubectl")
		require.FileExists(t, path, "run `make build` first")
		var out struct {
			ClientVersion struct {
				Major, Minor, GitVersion, GitCommit, GitTreeState string
			} `json:"clientVersion"`
		}
		require.NoError(t, json.Unmarshal([]byte(run(t, path, "version", "--client", "-o", "json")), &out))
		require.Equal(t, want, out.ClientVersion.GitVersion)
		require.Equal(t, commit, out.ClientVersion.GitCommit)
		require.Equal(t, fmtInt(v.Major()), out.ClientVersion.Major)
		require.Equal(t, fmtInt(v.Minor()), out.ClientVersion.Minor)
		// The human-readable form parses too (it is what breaks with unstamped builds).
		require.Contains(t, run(t, path, "version", "--client"), "Client Version: "+want)
	})
}

// forkVersion is the version build.sh stamps into the binaries of a
// component: <upstream>-<fork name>.<commits on base>[-dirty], and the
// commit of the component's materialised tree.
func forkVersion(t *testing.T, root, name string) (want, commit string) {
	t.Helper()
	pin := component(t, root, name)
	tree := filepath.Join(root, "_output", "src", name)
	gitOut := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", tree}, args...)...).Output()
		require.NoError(t, err, "git %v in %s (run `make build` first)", args, tree)
		return strings.TrimSpace(string(out))
	}
	commit = gitOut("rev-parse", "HEAD")
	count := gitOut("rev-list", "--count", pin.BaseTag()+"..HEAD")
	want = pin.Version + "-" + pin.ForkName + "." + count
	if gitOut("status", "--porcelain", "--untracked-files=no") != "" {
		want += "-dirty"
	}
	v := version.MustParseSemantic(want)
	upstream := version.MustParseSemantic(pin.Version)
	require.Equal(t, []uint{upstream.Major(), upstream.Minor(), upstream.Patch()}, []uint{v.Major(), v.Minor(), v.Patch()},
		"the fork version is a pre-release of the pinned upstream")
	require.Equal(t, pin.ForkName+"."+count, strings.TrimSuffix(v.PreRelease(), "-dirty"))
	require.True(t, v.LessThan(upstream), "%s sorts before %s in semver", want, pin.Version)
	return want, commit
}

// The descheduler prints its version package's Info with %+v:
// "Descheduler version {Major: Minor: GitVersion:... GitBranch:... GitSha1:... BuildDate:... ...}".
func TestDeschedulerIsStamped(t *testing.T) {
	root := controlplane.RepoRoot(t)
	pin := component(t, root, "descheduler")
	require.Equal(t, "sigs.k8s.io/descheduler", pin.Module)
	want, commit := forkVersion(t, root, "descheduler")
	require.Regexp(t, `^v0\.\d+\.\d+-`+regexp.QuoteMeta(pin.ForkName)+`\.\d+(-dirty)?$`, want)

	path := filepath.Join(root, "_output", "bin", "descheduler")
	require.FileExists(t, path, "run `make build` first")
	out := run(t, path, "version")
	require.True(t, strings.HasPrefix(out, "Descheduler version {"), out)
	require.Contains(t, out, " GitVersion:"+want+" ")
	require.Contains(t, out, " GitSha1:"+commit+" ")
	require.Contains(t, out, " GitBranch:main ")
	require.Regexp(t, regexp.MustCompile(` BuildDate:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ `), out)
}

func TestPinnedTools(t *testing.T) {
	root := controlplane.RepoRoot(t)
	bin := filepath.Join(root, "_output", "bin")
	etcd, err := pins.Tool(root, "etcd", "go.etcd.io/etcd/server/v3")
	require.NoError(t, err)
	kwok, err := pins.Tool(root, "kwok", "sigs.k8s.io/kwok")
	require.NoError(t, err)
	require.Contains(t, run(t, filepath.Join(bin, "etcd"), "--version"), "etcd Version: "+strings.TrimPrefix(etcd, "v")+"\n")
	require.Contains(t, run(t, filepath.Join(bin, "kwokctl"), "--version"), kwok)
	require.Contains(t, run(t, filepath.Join(bin, "kwok"), "--version"), kwok)
	registry, err := pins.Tool(root, "registry", "github.com/distribution/distribution/v3")
	require.NoError(t, err)
	require.Contains(t, run(t, filepath.Join(bin, "registry"), "--version"), " "+registry+"\n")
	kind, err := pins.Tool(root, "kind", "sigs.k8s.io/kind")
	require.NoError(t, err)
	require.Contains(t, run(t, filepath.Join(bin, "kind"), "version"), "kind "+kind+" ")
}

// TestEtcdPinIsUpstreams: the project's etcd (integration tests, the kind
// node image) is the release the pinned Kubernetes is tested with, the
// ETCD_VERSION of its hack/lib/etcd.sh (kubeadm's default etcd image too).
func TestEtcdPinIsUpstreams(t *testing.T) {
	root := controlplane.RepoRoot(t)
	etcd, err := pins.Tool(root, "etcd", "go.etcd.io/etcd/server/v3")
	require.NoError(t, err)
	script, err := os.ReadFile(filepath.Join(root, "_output", "src", "kubernetes", "hack", "lib", "etcd.sh"))
	require.NoError(t, err, "run `make build` first")
	m := regexp.MustCompile(`(?m)^ETCD_VERSION=\$\{ETCD_VERSION:-([0-9.]+)\}$`).FindSubmatch(script)
	require.NotNil(t, m, "ETCD_VERSION in upstream's hack/lib/etcd.sh")
	require.Equal(t, "v"+string(m[1]), etcd, "hack/tools/etcd pins upstream's etcd (go get -tool go.etcd.io/etcd/server/v3@v%s ...)", m[1])
}

func fmtInt(u uint) string { return strconv.FormatUint(uint64(u), 10) }
