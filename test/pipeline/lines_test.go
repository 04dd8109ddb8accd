package pipeline

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeLines writes a repository of hack/lib/init.sh (the real one) and a
// patches/ folder with the given line.env files ("<component>/<line>" ->
// content), and returns its root.
func fakeLines(t *testing.T, lines map[string]string) string {
	t.Helper()
	root := t.TempDir()
	lib, err := os.ReadFile(filepath.Join(realRepo, "hack", "lib", "init.sh"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "hack", "lib"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "hack", "lib", "init.sh"), lib, 0o644))
	for line, env := range lines {
		dir := filepath.Join(root, "patches", line)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "line.env"), []byte(env), 0o644))
	}
	return root
}

// inLines runs a bash snippet with the fake repository's init.sh sourced and
// LINE set to line (unset when empty).
func inLines(t *testing.T, root, line, snippet string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -o errexit -o nounset -o pipefail\nsource hack/lib/init.sh\n"+snippet)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OUTPUT_DIR="+filepath.Join(root, "_output"), "LINE="+line)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestPreviewLineIsNeverTheDefault: a line pinned to a pre-release
// (LINE_PREVIEW=true) is selected only by name; the default line, and with
// it the tree and binaries without a suffix, stays the newest released one;
// a line's own Go toolchain is what the go command runs on that line only.
func TestPreviewLineIsNeverTheDefault(t *testing.T) {
	root := fakeLines(t, map[string]string{
		"kubernetes/1.80":  "UPSTREAM_VERSION=v1.80.3\n",
		"kubernetes/1.81":  "UPSTREAM_VERSION=v1.81.2\n",
		"descheduler/1.81": "UPSTREAM_VERSION=v0.80.0\n",
		// A comment naming LINE_PREVIEW=false is not a setting.
		"kubernetes/1.82": "# LINE_PREVIEW=false\nUPSTREAM_VERSION=v1.82.0-beta.0\nLINE_PREVIEW=true\nLINE_GOTOOLCHAIN=go1.27.3\n",
	})
	out, err := inLines(t, root, "", `echo "$(line::default) $(line::newest) $(line::all | paste -sd, -) ${GOTOOLCHAIN}"; line::is_preview || echo "not a preview"`)
	require.NoError(t, err, out)
	require.Equal(t, "1.81 1.82 1.80,1.81,1.82 local\nnot a preview", out)

	out, err = inLines(t, root, "1.82", `echo "$(line::selected) ${GOTOOLCHAIN} $(line::bin) $(line::toolchain 1.81)"; line::is_preview && echo preview`)
	require.NoError(t, err, out)
	require.Equal(t, "1.82 go1.27.3 "+filepath.Join(root, "_output", "bin", "1.82")+" local\npreview", out)

	out, err = inLines(t, root, "1.81", `echo "$(line::bin) ${GOTOOLCHAIN}"`)
	require.NoError(t, err, out)
	require.Equal(t, filepath.Join(root, "_output", "bin")+" local", out)

	// Without a preview, the newest line is the default.
	root = fakeLines(t, map[string]string{
		"kubernetes/1.80": "UPSTREAM_VERSION=v1.80.3\n",
		"kubernetes/1.81": "UPSTREAM_VERSION=v1.81.2\nLINE_PREVIEW=false\n",
	})
	out, err = inLines(t, root, "", `echo "$(line::default) $(line::newest)"`)
	require.NoError(t, err, out)
	require.Equal(t, "1.81 1.81", out)
}

// TestTreeOfAnotherReleaseIsNotReplacedWithItsWork: a component's tree
// checked out at another release than its line's pin (the pin moved, or
// another line's tree stands where this one's belongs) is not replaced while
// it holds uncommitted edits or commits never exported; once in step with a
// series, it is.
func TestTreeOfAnotherReleaseIsNotReplacedWithItsWork(t *testing.T) {
	root := fakeLines(t, map[string]string{"kubernetes/1.81": "UPSTREAM_VERSION=v1.81.2\n"})
	require.NoError(t, os.MkdirAll(filepath.Join(root, "build", "kubernetes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "build", "kubernetes", "component.env"), []byte("UPSTREAM_MODULE=k8s.io/kubernetes\n"), 0o644))
	tree := filepath.Join(root, "_output", "src", "kubernetes")
	require.NoError(t, os.MkdirAll(tree, 0o755))
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", tree, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	file := filepath.Join(tree, "a.go")
	require.NoError(t, os.WriteFile(file, []byte("package a\n"), 0o644))
	git("init", "-q")
	git("add", "a.go")
	git("commit", "-q", "-m", "base")
	git("tag", "base/v1.82.0-beta.0")
	check := `component::load kubernetes; component::check_no_local_work && echo free`

	require.NoError(t, os.WriteFile(file, []byte("package a\n\nvar edit = 1\n"), 0o644))
	out, err := inLines(t, root, "", check)
	require.Error(t, err, out)
	require.Contains(t, out, "has uncommitted edits")

	git("commit", "-q", "-am", "work")
	out, err = inLines(t, root, "", check)
	require.Error(t, err, out)
	require.Contains(t, out, "holds commits of another release than v1.81.2 that were never exported")

	out, err = inLines(t, root, "", `component::load kubernetes; component::record_sync; `+check)
	require.NoError(t, err, out)
	require.Equal(t, "free", out)
}

// TestLineBorrowsNodeBinariesWhileTheProxyRefusesTheirModule: a line whose
// node binaries import a module the Go module proxy refuses builds them on
// the line its line.env names (BORROWED_*), and builds them itself as soon
// as the module is served; binaries it does not name, and a line without
// the settings, are never borrowed.
func TestLineBorrowsNodeBinariesWhileTheProxyRefusesTheirModule(t *testing.T) {
	// The module cache's download folder as the proxy: a module this test
	// binary was built with is served, one that exists nowhere is refused.
	served := "github.com/stretchr/testify@" + moduleVersion(t, "github.com/stretchr/testify")
	refused := "example.invalid/kube-guard/refused@v1.0.0"
	lineEnv := func(module string) string {
		return "UPSTREAM_VERSION=v1.82.0-beta.0\nLINE_PREVIEW=true\nBORROWED_BINARIES=\"kubelet kube-proxy\"\nBORROWED_WHILE_REFUSED=" + module + "\nBORROWED_FROM_LINE=1.81\n"
	}
	for _, tc := range []struct {
		name, env, want string
	}{
		{"refused", lineEnv(refused), "kubelet\nkube-proxy"},
		{"served", lineEnv(served), ""},
		{"no settings", "UPSTREAM_VERSION=v1.82.0-beta.0\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeLines(t, map[string]string{
				"kubernetes/1.81": "UPSTREAM_VERSION=v1.81.2\n",
				"kubernetes/1.82": tc.env,
			})
			require.NoError(t, os.MkdirAll(filepath.Join(root, "build", "kubernetes"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, "build", "kubernetes", "component.env"), []byte("UPSTREAM_MODULE=k8s.io/kubernetes\n"), 0o644))
			lib, err := os.ReadFile(filepath.Join(realRepo, "hack", "lib", "build.sh"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(root, "hack", "lib", "build.sh"), lib, 0o644))
			out, err := inLines(t, root, "1.82", `export GOPROXY="file://$(go env GOMODCACHE)/cache/download" GOSUMDB=off GOTOOLCHAIN=local; source hack/lib/build.sh; build::borrowed kubernetes kube-apiserver kubelet kubectl kube-proxy`)
			require.NoError(t, err, out)
			lines := strings.Split(out, "\n")
			var got []string
			for _, l := range lines {
				if !strings.HasPrefix(l, "+++ ") && l != "" {
					got = append(got, l)
				}
			}
			require.Equal(t, tc.want, strings.Join(got, "\n"), out)
			if tc.name == "served" {
				require.Contains(t, out, "the Go module proxy serves "+served+": kubelet kube-proxy built from this line's tree")
			}
		})
	}
}

// moduleVersion is the version of module that this repository's go.mod
// requires.
func moduleVersion(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestLineEnvValueOfAList: a line.env setting that lists several values is
// written in double quotes (the file is also sourced), and line::env_value,
// which reads it without running it, returns the list without them, so that
// make test's MAKE_TEST_SKIP_DIRS matches its first and last package too.
func TestLineEnvValueOfAList(t *testing.T) {
	root := fakeLines(t, map[string]string{
		"kubernetes/1.80": "UPSTREAM_VERSION=v1.80.3\nMAKE_TEST_SKIP_DIRS=\"a/b c/d\"\nMAKE_TEST_SCOPE=unit\n",
	})
	out, err := inLines(t, root, "", `line::env_value 1.80 MAKE_TEST_SKIP_DIRS; line::env_value 1.80 MAKE_TEST_SCOPE; source patches/kubernetes/1.80/line.env; echo "${MAKE_TEST_SKIP_DIRS}"`)
	require.NoError(t, err, out)
	require.Equal(t, "a/b c/d\nunit\na/b c/d", out)
}
