package pipeline

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/version"

	"kube-guard/test/util/pins"
)

// checkScript runs hack/make-rules/verify/<name> of the real repository.
func checkScript(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(realRepo, "hack", "make-rules", "verify", name)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestVersionCheckCatchesAStaleLiteral plants, in a file of its own, another
// patch release of the pinned kubernetes and descheduler lines and of the
// staging modules, as a forgotten literal would be after a rebase.
func TestVersionCheckCatchesAStaleLiteral(t *testing.T) {
	out, err := checkScript(t, nil, "versions.sh")
	require.NoError(t, err, "the repository itself passes:\n%s", out)

	next := func(v string) string {
		s := version.MustParseSemantic(v)
		return fmt.Sprintf("v%d.%d.%d", s.Major(), s.Minor(), s.Patch()+1)
	}
	etcd, err := pins.Tool(realRepo, "etcd", "go.etcd.io/etcd/server/v3")
	require.NoError(t, err)
	for _, stale := range []string{kube.Version, next(kube.Version), next(kube.StagingVersion), next(desched.Version),
		strings.TrimPrefix(kube.Version, "v"), "etcd " + next(etcd), "etcd " + strings.TrimPrefix(etcd, "v")} {
		t.Run(stale, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "notes.md")
			require.NoError(t, os.WriteFile(f, []byte("# Notes\n\nBuilt on Kubernetes "+stale+" today.\n"), 0o644))
			out, err := checkScript(t, []string{"PLANT=" + f}, "versions.sh")
			require.Error(t, err, out)
			require.Contains(t, out, "notes.md:3: Built on Kubernetes "+stale+" today.")
		})
	}
	// Inside a generated block or a record, versions of other lines, and a
	// tool's release line on a line that does not name the tool, are fine.
	f := filepath.Join(t.TempDir(), "notes.md")
	content := "<!-- BEGIN GENERATED: pins -->\n" + kube.Version + "\n<!-- END GENERATED -->\n" +
		"<!-- BEGIN RECORD: moves -->\nmoved to " + next(kube.Version) + "\n<!-- END RECORD -->\n" +
		"Go 1.26.0, etcd v3.5.0, v10.37.1\n" +
		"libother " + next(etcd) + "\n"
	require.NoError(t, os.WriteFile(f, []byte(content), 0o644))
	out, err = checkScript(t, []string{"PLANT=" + f}, "versions.sh")
	require.NoError(t, err, out)
}

// TestTrailerCheck: a patch without a Rebase-Policy, and one that changes a
// generated file without saying how to regenerate it, are both reported.
func TestTrailerCheck(t *testing.T) {
	r := newRebaseRepo(t)
	r.replace(t, "doc.go", "// Package uuid", "// A change.\n//\n// Package uuid")
	r.commit(t, "doc: no trailer")
	r.addFunc(t, "min.go", "Min")
	r.commit(t, "uuid: add Min, generated, no Regenerate", "Rebase-Policy: carry")
	r.replace(t, "doc.go", "// A change.", "// Another change.")
	r.commit(t, "doc: a bad policy", "Rebase-Policy: keep", "Regenerate: nonsense")
	r.export(t)
	out, err := r.run(t, nil, "verify/trailers.sh", throwaway)
	require.Error(t, err, out)
	require.Contains(t, out, "patches/uuid/0001-doc-no-trailer.patch: no Rebase-Policy trailer")
	require.Contains(t, out, "patches/uuid/0002-uuid-add-Min-generated-no-Regenerate.patch: changes the generated file zz_generated.exports.txt but has no Regenerate trailer")
	require.Contains(t, out, "0003-doc-a-bad-policy.patch: Rebase-Policy 'keep' is neither")
	require.Contains(t, out, "0003-doc-a-bad-policy.patch: Regenerate step 'nonsense' is not one of")
}
