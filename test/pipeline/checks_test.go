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
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/fix/0001-doc-no-trailer.patch: no Rebase-Policy trailer")
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/fix/0002-uuid-add-Min-generated-no-Regenerate.patch: changes the generated file zz_generated.exports.txt but has no Regenerate trailer")
	require.Contains(t, out, "0003-doc-a-bad-policy.patch: Rebase-Policy 'keep' is neither")
	require.Contains(t, out, "0003-doc-a-bad-policy.patch: Regenerate step 'nonsense' is not one of")
}

// TestTopicsCheck: a topic that needs another without declaring it does not
// apply alone, and the check says so; declared, it passes. Metadata a
// reader cannot trust (an unknown upstream status, a dependency listed
// after the topic) is reported too.
func TestTopicsCheck(t *testing.T) {
	r := newRebaseRepo(t)
	topics := filepath.Join(r.dir, "patches", throwaway, throwawayLine)
	writeTopic := func(name, header string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Join(topics, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(topics, name, "TOPIC.md"),
			[]byte("# The "+name+" topic\n\n"+header+"\nWhat it does.\n"), 0o644))
	}
	r.twoTopics(t, "# The more topic\n\nUpstream-Status: not-proposed\nBug: none\nGates: none\nDepends: none\n\nWhat it does.\n")
	require.FileExists(t, filepath.Join(topics, "more", "0001-doc-a-change-on-the-first-one.patch"), "numbered in its topic")

	out, err := r.run(t, nil, "verify/topics.sh", throwaway)
	require.Error(t, err, out)
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/more does not apply alone (with no other topic) to a fresh base/v1.5.0: declare what it needs in its TOPIC.md's Depends")
	require.Contains(t, out, "uuid/fix: applies alone (fix; 1 patches)")

	writeTopic("more", "Upstream-Status: not-proposed\nBug: none\nGates: none\nDepends: fix\n")
	out = r.mustRun(t, "verify/topics.sh", throwaway)
	require.Contains(t, out, "uuid/more: applies alone (fix more; 2 patches)")

	// make topic-test: the topic and its dependency on a worktree of their
	// own, upstream's tests of what they touch; the tree is left alone.
	head := r.git(t, "rev-parse", "HEAD")
	out = r.mustRun(t, "topic-test.sh", throwaway, "more", "-run", "TestNew$")
	require.Contains(t, out, "uuid/more: 2 patches of fix more on base/v1.5.0 in _output/src/topic-test-uuid")
	require.Contains(t, out, "uuid: upstream unit tests of 1 touched packages")
	require.Contains(t, out, "uuid/more: builds and passes the tests of the packages it touches, with fix more alone")
	require.Equal(t, "doc: a change on the first one\ndoc: a first change",
		gitIn(t, filepath.Join(r.dir, "_output", "src", "topic-test-uuid"), "log", "--format=%s", "base/v1.5.0..HEAD"))
	require.Equal(t, head, r.git(t, "rev-parse", "HEAD"), "the materialised tree is not touched")

	writeTopic("fix", "Upstream-Status: maybe\nBug: none\nGates: none\nDepends: more\nKind: improvement\nSIG: scheduling\n")
	out, err = r.run(t, nil, "verify/topics.sh", throwaway)
	require.Error(t, err, out)
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/fix/TOPIC.md: Upstream-Status 'maybe' is not one of")
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/fix/TOPIC.md: depends on more, which the list puts after it")
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/fix/TOPIC.md: Kind 'improvement' is not one of upstream's /kind labels")
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/fix/TOPIC.md: SIG 'scheduling' is not sig-<name>")

	writeTopic("fix", "Upstream-Status: proposal-drafted\nBug: none\nGates: none\nDepends: none\n")
	out, err = r.run(t, nil, "verify/topics.sh", throwaway)
	require.Error(t, err, out)
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/fix/TOPIC.md: Upstream-Status proposal-drafted, but docs/upstream/uuid/fix/ (make upstream-pr's output")
}

// TestUpstreamPR: a topic becomes a branch on the pristine release with its
// dependencies' commits first, its own commits as format-patch files
// without the fork's trailers, and a description; a topic whose messages
// name the fork is refused.
func TestUpstreamPR(t *testing.T) {
	r := newRebaseRepo(t)
	r.twoTopics(t, "# Another line of docs\n\n"+
		"Upstream-Status: not-proposed\nBug: https://github.com/google/uuid/issues/1\nGates: none\nDepends: fix\nKind: cleanup\n\n"+
		"Says more in doc.go.\n\n## Benchmarks\n\nNone to speak of.\n\n## Release note\n\n```release-note\nuuid's docs say more.\n```\n")

	out := r.mustRun(t, "upstream-pr.sh", throwaway, "more")
	require.Contains(t, out, "uuid/more: branch upstream-pr/more")
	pr := filepath.Join(r.dir, "_output", "upstream-pr", throwaway, "more")
	patches, err := filepath.Glob(filepath.Join(pr, "patches", "*.patch"))
	require.NoError(t, err)
	require.Len(t, patches, 1, "only the topic's own commits")
	p, err := os.ReadFile(patches[0])
	require.NoError(t, err)
	require.Contains(t, string(p), "Subject: [PATCH] doc: a change on the first one")
	require.NotContains(t, string(p), "Topic:")
	require.NotContains(t, string(p), "Rebase-Policy:")
	require.Equal(t, "doc: a change on the first one\ndoc: a first change",
		r.git(t, "log", "--format=%s", "upstream/"+throwawayFrom+"..upstream-pr/more"), "the dependency's commit first, on the pristine release")
	desc, err := os.ReadFile(filepath.Join(pr, "PULL_REQUEST.md"))
	require.NoError(t, err)
	for _, want := range []string{"/kind cleanup", "Says more in doc.go.", "- doc: a change on the first one",
		"https://github.com/google/uuid/issues/1", "This builds on the pull request(s) of: fix", "None to speak of.",
		"```release-note\nuuid's docs say more.\n```"} {
		require.Contains(t, string(desc), want)
	}

	r.replace(t, "doc.go", "// A change on the first one.", "// A change for kube-guard only.")
	r.git(t, "add", "--all", ".")
	r.git(t, "commit", "--quiet", "-m", "doc: say kube-guard\n\nFor kube-guard.\n\nRebase-Policy: carry\nTopic: more\n")
	r.export(t)
	out, err = r.run(t, nil, "upstream-pr.sh", throwaway, "more")
	require.Error(t, err, out)
	require.Contains(t, out, "more/0002-doc-say-kube-guard.patch: its message names the fork")
	require.Contains(t, out, "is not ready for an upstream pull request")
}

// TestUpstreamPRSplit checks that a topic whose TOPIC.md has a "## Pull
// requests" table becomes one pull request per row, in order, each with its
// own patches (renumbered), its description saying which part it is, and a
// branch that ends at its last commit; and that a table that does not take
// the topic's patches in order, each once, is refused.
func TestUpstreamPRSplit(t *testing.T) {
	r := newRebaseRepo(t)
	table := func(rows string) string {
		return "# Another line of docs\n\n" +
			"Upstream-Status: not-proposed\nBug: https://github.com/google/uuid/issues/1\nGates: none\nDepends: fix\n\n" +
			"Says more in doc.go.\n\n## Pull requests\n\n| pull request | patches | what |\n|---|---|---|\n" + rows +
			"\n## Benchmarks\n\nNone to speak of.\n\n## Release note\n\n```release-note\nuuid's docs say more.\n```\n"
	}
	r.twoTopics(t, table("| first | 0001 | the first step |\n| second | `0002` | the second step |\n"))
	r.replace(t, "doc.go", "// A change on the first one.", "// A second change on the first one.")
	r.git(t, "add", "--all", ".")
	r.git(t, "commit", "--quiet", "-m", "doc: a second change\n\nIt needs the others.\n\nRebase-Policy: carry\nTopic: more\n")
	r.export(t)

	out := r.mustRun(t, "upstream-pr.sh", throwaway, "more")
	require.Contains(t, out, "2 pull requests: upstream-pr/more-1-first (_output/upstream-pr/uuid/more/1-first/) upstream-pr/more-2-second (_output/upstream-pr/uuid/more/2-second/)")
	pr := filepath.Join(r.dir, "_output", "upstream-pr", throwaway, "more")
	require.NoDirExists(t, filepath.Join(pr, "patches"), "no pull request of the whole topic")
	for i, part := range []struct{ dir, subject, what, notWhat string }{
		{"1-first", "doc: a change on the first one", "The first step.", "None to speak of."},
		{"2-second", "doc: a second change", "The second step.", "uuid's docs say more."},
	} {
		patches, err := filepath.Glob(filepath.Join(pr, part.dir, "patches", "*.patch"))
		require.NoError(t, err)
		require.Len(t, patches, 1, part.dir)
		require.Equal(t, "0001-", filepath.Base(patches[0])[:5], "each pull request's patches are numbered from 0001")
		p, err := os.ReadFile(patches[0])
		require.NoError(t, err)
		require.Contains(t, string(p), "Subject: [PATCH] "+part.subject)
		desc, err := os.ReadFile(filepath.Join(pr, part.dir, "PULL_REQUEST.md"))
		require.NoError(t, err)
		require.Contains(t, string(desc), part.what)
		require.Contains(t, string(desc), "- "+part.subject)
		require.Contains(t, string(desc), fmt.Sprintf("Part %d of 2 of this change, reviewed in 2 pull requests in this order: first second.", i+1))
		require.NotContains(t, string(desc), part.notWhat, "the release note goes with the first part, the benchmarks with the last")
		require.Equal(t, part.subject, r.git(t, "log", "-1", "--format=%s", "upstream-pr/more-"+part.dir))
	}

	// A gap, then an overlap: refused, saying which patch comes next.
	for rows, want := range map[string]string{
		"| first | 0001 | one |\n| second | 0003 | two |\n":      "pull request 'second' has patches 0003",
		"| first | 0001-0002 | one |\n| second | 0002 | two |\n": "pull request 'second' has patches 0002",
		"| first | 1 | one |\n":                                  "want a name of [a-z0-9-] and patches NNNN or NNNN-NNNN, got '1'",
		"| first | 0001 | one |\n":                               "its pull requests end at patch 0001 of 2",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(r.dir, "patches", throwaway, throwawayLine, "more", "TOPIC.md"), []byte(table(rows)), 0o644))
		out, err := r.run(t, nil, "upstream-pr.sh", throwaway, "more")
		require.Error(t, err, out)
		require.Contains(t, out, want)
		require.Contains(t, out, "is not ready for an upstream pull request")
	}
}

// twoTopics gives the throwaway series a second topic, "more", after "fix",
// whose TOPIC.md is moreTopic, and one commit in each: the one in "more"
// changes the line the one in "fix" wrote, so that it needs it. Exported.
func (r *rebaseRepo) twoTopics(t *testing.T, moreTopic string) {
	t.Helper()
	topics := filepath.Join(r.dir, "patches", throwaway, throwawayLine)
	require.NoError(t, os.WriteFile(filepath.Join(topics, "topics"), []byte("fix\nmore\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(topics, "more"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(topics, "more", "TOPIC.md"), []byte(moreTopic), 0o644))
	r.replace(t, "doc.go", "// Package uuid", "// A first change.\n//\n// Package uuid")
	r.commit(t, "doc: a first change", "Rebase-Policy: carry")
	r.replace(t, "doc.go", "// A first change.", "// A change on the first one.")
	r.git(t, "add", "--all", ".")
	r.git(t, "commit", "--quiet", "-m", "doc: a change on the first one\n\nIt needs the first.\n\nRebase-Policy: carry\nTopic: more\n")
	r.export(t)
}
