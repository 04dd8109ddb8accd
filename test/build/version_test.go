// Package build checks what `make build` leaves in _output/bin: every
// Kubernetes binary and the descheduler carry the fork version of their
// component, and the pinned tools are the versions this repository pins.
package build

import (
	"bufio"
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
)

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// componentEnv reads build/<component>/component.env.
func componentEnv(t *testing.T, root, component string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "build", component, "component.env"))
	require.NoError(t, err)
	defer f.Close()
	env := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	require.NoError(t, s.Err())
	return env
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "%s %v: %s", bin, args, out)
	return string(out)
}

func TestKubernetesBinariesAreStamped(t *testing.T) {
	root := repoRoot(t)
	want, commit := forkVersion(t, root, "kubernetes")
	v := version.MustParseSemantic(want)

	for _, bin := range []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager"} {
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
func forkVersion(t *testing.T, root, component string) (want, commit string) {
	t.Helper()
	env := componentEnv(t, root, component)
	tree := filepath.Join(root, "_output", "src", component)
	gitOut := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", tree}, args...)...).Output()
		require.NoError(t, err, "git %v in %s (run `make build` first)", args, tree)
		return strings.TrimSpace(string(out))
	}
	commit = gitOut("rev-parse", "HEAD")
	count := gitOut("rev-list", "--count", "base/"+env["UPSTREAM_VERSION"]+"..HEAD")
	want = env["UPSTREAM_VERSION"] + "-" + env["FORK_NAME"] + "." + count
	if gitOut("status", "--porcelain", "--untracked-files=no") != "" {
		want += "-dirty"
	}
	v := version.MustParseSemantic(want)
	upstream := version.MustParseSemantic(env["UPSTREAM_VERSION"])
	require.Equal(t, []uint{upstream.Major(), upstream.Minor(), upstream.Patch()}, []uint{v.Major(), v.Minor(), v.Patch()},
		"the fork version is a pre-release of the pinned upstream")
	require.Equal(t, env["FORK_NAME"]+"."+count, strings.TrimSuffix(v.PreRelease(), "-dirty"))
	require.True(t, v.LessThan(upstream), "%s sorts before %s in semver", want, env["UPSTREAM_VERSION"])
	return want, commit
}

// The descheduler prints its version package's Info with %+v:
// "Descheduler version {Major: Minor: GitVersion:... GitBranch:... GitSha1:... BuildDate:... ...}".
func TestDeschedulerIsStamped(t *testing.T) {
	root := repoRoot(t)
	env := componentEnv(t, root, "descheduler")
	require.Equal(t, "sigs.k8s.io/descheduler", env["UPSTREAM_MODULE"])
	want, commit := forkVersion(t, root, "descheduler")
	require.Regexp(t, `^v0\.\d+\.\d+-`+regexp.QuoteMeta(env["FORK_NAME"])+`\.\d+(-dirty)?$`, want)

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
	root := repoRoot(t)
	bin := filepath.Join(root, "_output", "bin")
	require.Regexp(t, `etcd Version: 3\.6\.\d+`, run(t, filepath.Join(bin, "etcd"), "--version"))
	require.Contains(t, run(t, filepath.Join(bin, "kwokctl"), "--version"), "v0.8.0")
	require.Contains(t, run(t, filepath.Join(bin, "kwok"), "--version"), "v0.8.0")
}

func fmtInt(u uint) string { return strconv.FormatUint(uint64(u), 10) }
