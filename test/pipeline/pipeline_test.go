// Package pipeline tests the scripts that rebuild upstream from the module
// proxy, apply the patch series and export it again. They run in a scratch
// copy of this repository's scripts with their own _output/, so they never
// touch the developer's tree.
package pipeline

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kube-guard/test/util/pins"
)

var (
	realRepo string // this repository
	scratch  string // a copy of its scripts, with its own _output/
	tree     string // scratch's materialised kubernetes tree
	kube     pins.Component
	desched  pins.Component
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		panic(err)
	}
	realRepo = strings.TrimSpace(string(out))
	if kube, err = pins.Load(realRepo, "kubernetes"); err != nil {
		panic(err)
	}
	if desched, err = pins.Load(realRepo, "descheduler"); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "pipeline-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	scratch = dir
	for _, d := range []string{"hack", "build"} {
		if out, err := exec.Command("cp", "-R", filepath.Join(realRepo, d), scratch).CombinedOutput(); err != nil {
			panic(string(out))
		}
	}
	// Both components on the real newest line, with its pins.
	for _, c := range []pins.Component{kube, desched} {
		if err := os.MkdirAll(filepath.Join(scratch, "patches", c.Name, c.Line), 0o755); err != nil {
			panic(err)
		}
		env := filepath.Join("patches", c.Name, c.Line, "line.env")
		if out, err := exec.Command("cp", filepath.Join(realRepo, env), filepath.Join(scratch, env)).CombinedOutput(); err != nil {
			panic(string(out))
		}
	}
	// The scratch series has two topics, in this order.
	for _, topic := range []string{"sched", "api"} {
		if err := os.MkdirAll(filepath.Join(patchesDir(), topic), 0o755); err != nil {
			panic(err)
		}
		md := "# The " + topic + " topic of the pipeline tests\n\nUpstream-Status: not-proposed\nBug: none\nGates: none\nDepends: none\n\nA test topic.\n"
		if err := os.WriteFile(filepath.Join(patchesDir(), topic, "TOPIC.md"), []byte(md), 0o644); err != nil {
			panic(err)
		}
	}
	if err := os.WriteFile(filepath.Join(patchesDir(), "topics"), []byte("# test topics\nsched\napi\n"), 0o644); err != nil {
		panic(err)
	}
	tree = filepath.Join(scratch, "_output", "src", "kubernetes")
	return m.Run()
}

// scriptCmd prepares hack/make-rules/<name> of the scratch repository, with
// its own OUTPUT_DIR and the extra environment env.
func scriptCmd(env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command("bash", append([]string{filepath.Join(scratch, "hack", "make-rules", name)}, args...)...)
	cmd.Env = append(append(os.Environ(), "OUTPUT_DIR="+filepath.Join(scratch, "_output")), env...)
	return cmd
}

// script runs hack/make-rules/<name> in the scratch repository.
func script(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := scriptCmd(env, name, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

func mustScript(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := script(t, nil, name, args...)
	require.NoError(t, err, "%s failed:\n%s", name, out)
	return out
}

func mustScriptStdout(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := scriptCmd(nil, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s failed:\n%s", name, stderr.String())
	return string(out)
}

// git runs git in the scratch tree with a fixed identity and dates.
func git(t *testing.T, args ...string) string {
	t.Helper()
	return gitIn(t, tree, args...)
}

// gitIn runs git in dir with a fixed identity and dates.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test Author", "GIT_AUTHOR_EMAIL=author@localhost",
		"GIT_COMMITTER_NAME=Test Author", "GIT_COMMITTER_EMAIL=author@localhost",
		"GIT_AUTHOR_DATE=2026-10-01T12:00:00Z", "GIT_COMMITTER_DATE=2026-10-01T12:00:00Z")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v:\n%s", args, out)
	return strings.TrimSpace(string(out))
}

func patchesDir() string { return filepath.Join(scratch, "patches", "kubernetes", kube.Line) }

// readPatches returns the patch files of the scratch series by
// "<topic>/<name>".
func readPatches(t *testing.T) map[string]string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(patchesDir(), "*", "*.patch"))
	require.NoError(t, err)
	files := map[string]string{}
	for _, m := range matches {
		b, err := os.ReadFile(m)
		require.NoError(t, err)
		rel, err := filepath.Rel(patchesDir(), m)
		require.NoError(t, err)
		files[rel] = string(b)
	}
	return files
}

func names(m map[string]string) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func appendLine(t *testing.T, rel, line string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(tree, rel), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(line + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// The tests below share the scratch tree and run in file order.

func TestMaterializeEmptySeries(t *testing.T) {
	out := mustScript(t, "apply.sh")
	require.Contains(t, out, "applying 0 patches")
	require.Equal(t, git(t, "rev-parse", kube.BaseTag()+"^{commit}"), git(t, "rev-parse", "HEAD"), "an empty series leaves the tree at base")
	require.Equal(t, git(t, "rev-parse", kube.UpstreamTag()+"^{commit}"), git(t, "rev-parse", kube.BaseTag()+"^"), "base sits directly on the untouched upstream import")
	// The import is reproducible: the same commits as the developer's tree, when there is one.
	if realTree := filepath.Join(realRepo, "_output", "src", "kubernetes"); dirExists(realTree) {
		real, err := exec.Command("git", "-C", realTree, "rev-parse", kube.UpstreamTag()+"^{commit}").Output()
		require.NoError(t, err)
		require.Equal(t, strings.TrimSpace(string(real)), git(t, "rev-parse", kube.UpstreamTag()+"^{commit}"))
	}
	// Staging modules are in place, vendor/ is gone, scripts are executable.
	require.FileExists(t, filepath.Join(tree, "staging", "src", "k8s.io", "api", "go.mod"))
	require.NoDirExists(t, filepath.Join(tree, "vendor"))
	st, err := os.Stat(filepath.Join(tree, "hack", "update-codegen.sh"))
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&0o100, "hack/update-codegen.sh is executable")

	out = mustScript(t, "materialize.sh")
	require.Contains(t, out, "already materialised", "re-running materialize with nothing changed is a no-op")
	out = mustScript(t, "apply.sh")
	require.Contains(t, out, "already applied")
}

func TestExportRoundTrip(t *testing.T) {
	appendLine(t, "pkg/scheduler/framework/preemption/preemption.go", "\n// A comment added by the round-trip test.")
	git(t, "commit", "-q", "-am", "scheduler: first test change", "-m", "Body of the first change.", "-m", "Topic: sched")
	appendLine(t, "staging/src/k8s.io/api/scheduling/v1/types.go", "\n// Another comment.")
	git(t, "commit", "-q", "-am", "api: second test change", "-m", "Topic: api")
	want := git(t, "rev-parse", "HEAD^{tree}")

	mustScript(t, "export.sh")
	exported := readPatches(t)
	require.Equal(t, []string{"api/0001-api-second-test-change.patch", "sched/0001-scheduler-first-test-change.patch"}, names(exported),
		"each commit in the folder of its topic, numbered in the topic")
	for name, p := range exported {
		require.True(t, strings.HasPrefix(p, "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"), "%s: zeroed From line", name)
		require.Contains(t, p, "Subject: [PATCH] ", "%s: no n/m numbering", name)
		require.NotContains(t, p, "\n-- \n", "%s: no signature", name)
	}

	// The upstream tests that `make test` runs are those of the touched packages.
	cmd := scriptCmd([]string{"TEST_UPSTREAM_COMPONENTS=kubernetes"}, "test-upstream.sh", "--list")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	listed, err := cmd.Output()
	require.NoError(t, err, "test-upstream.sh --list failed:\n%s", stderr.String())
	require.Equal(t, "kubernetes unit ./pkg/scheduler/framework/preemption\nkubernetes unit ./staging/src/k8s.io/api/scheduling/v1\nkubernetes unit ./pkg/api/testing\n",
		string(listed))
	// Every component is tested by default; one that is not materialised is an error, not a silent skip.
	out, err := script(t, nil, "test-upstream.sh", "--list")
	require.Error(t, err)
	require.Contains(t, out, "descheduler is not materialised")

	// Re-materialise from scratch, apply, and compare the trees.
	old := tree + ".old"
	require.NoError(t, os.Rename(tree, old))
	defer os.RemoveAll(old)
	mustScript(t, "apply.sh")
	got := git(t, "rev-parse", "HEAD^{tree}")
	if got != want {
		diff, _ := exec.Command("diff", "-rq", "--exclude=.git", old, tree).CombinedOutput()
		t.Fatalf("materialise + apply rebuilds tree %s, want %s; files that differ:\n%s", got, want, diff)
	}
	require.Equal(t, "scheduler: first test change", git(t, "log", "-1", "--format=%s", "HEAD^"))

	// Exporting again gives byte-identical patches.
	mustScript(t, "export.sh")
	require.Equal(t, exported, readPatches(t), "materialise -> apply -> export leaves patches/ byte-identical")
}

// TestExportFilesCommitsByTopic: the export refuses, saying what to do, a
// commit without a topic, with a topic the list lacks, or among the commits
// of a topic the list puts after its own; patches/ is left as it was.
func TestExportFilesCommitsByTopic(t *testing.T) {
	before := git(t, "rev-parse", "HEAD")
	exported := readPatches(t)
	defer func() {
		git(t, "reset", "-q", "--hard", before)
		require.Equal(t, exported, readPatches(t), "a refused export leaves patches/ as it was")
	}()
	for _, tc := range []struct {
		name, trailer, want string
	}{
		{"no topic", "", "needs one 'Topic: <name>' trailer (one of: sched api;"},
		{"unknown topic", "Topic: nope", "says Topic: nope, which patches/kubernetes/" + kube.Line + "/topics does not list"},
		{"out of order", "Topic: sched", "comes after commits of topic api, which patches/kubernetes/" + kube.Line + "/topics puts after sched"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			git(t, "reset", "-q", "--hard", before)
			appendLine(t, "pkg/scheduler/scheduler.go", "\n// "+tc.name)
			args := []string{"commit", "-q", "-am", "scheduler: " + tc.name}
			if tc.trailer != "" {
				args = append(args, "-m", tc.trailer)
			}
			git(t, args...)
			out, err := script(t, nil, "export.sh")
			require.Error(t, err, out)
			require.Contains(t, out, tc.want)
			require.Equal(t, exported, readPatches(t))
		})
	}
}

func TestConflictingPatchStops(t *testing.T) {
	before := git(t, "rev-parse", "HEAD")
	conflict := `From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Test Author <author@localhost>
Date: Thu, 1 Oct 2026 12:00:00 +0000
Subject: [PATCH] conflicting change

---
 staging/src/k8s.io/api/scheduling/v1/types.go | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/staging/src/k8s.io/api/scheduling/v1/types.go b/staging/src/k8s.io/api/scheduling/v1/types.go
--- a/staging/src/k8s.io/api/scheduling/v1/types.go
+++ b/staging/src/k8s.io/api/scheduling/v1/types.go
@@ -1,3 +1,3 @@
 /*
-Copyright 1999 Nobody Wrote This Line.
+Copyright 2000 Nor This One.
 
`
	path := filepath.Join(patchesDir(), "api", "0002-conflicting-change.patch")
	require.NoError(t, os.WriteFile(path, []byte(conflict), 0o644))
	defer os.Remove(path)

	out, err := script(t, nil, "apply.sh")
	require.Error(t, err, "a patch that does not apply must fail the apply:\n%s", out)
	require.Contains(t, out, "patches/kubernetes/"+kube.Line+"/api/0002-conflicting-change.patch does not apply to "+kube.BaseTag())
	require.Contains(t, out, "staging/src/k8s.io/api/scheduling/v1/types.go")
	// The patches before it are applied; no am session is left behind.
	require.Equal(t, "api: second test change", git(t, "log", "-1", "--format=%s"))
	require.NoDirExists(t, filepath.Join(tree, ".git", "rebase-apply"))

	require.NoError(t, os.Remove(path))
	mustScript(t, "apply.sh")
	require.Equal(t, git(t, "rev-parse", before+"^{tree}"), git(t, "rev-parse", "HEAD^{tree}"))
}

func TestUnexportedWorkIsNeverDiscarded(t *testing.T) {
	appendLine(t, "pkg/scheduler/scheduler.go", "\n// Work in progress.")
	out, err := script(t, nil, "export.sh")
	require.Error(t, err)
	require.Contains(t, out, "uncommitted edits")

	git(t, "commit", "-q", "-am", "scheduler: work in progress", "-m", "Topic: api")
	// patches/ changes underneath (as after a pull): re-applying would drop the new commit.
	require.NoError(t, os.Remove(filepath.Join(patchesDir(), "api", "0001-api-second-test-change.patch")))
	out, err = script(t, nil, "apply.sh")
	require.Error(t, err, "apply must refuse to discard an unexported commit:\n%s", out)
	require.Contains(t, out, "not exported")
	require.Equal(t, "scheduler: work in progress", git(t, "log", "-1", "--format=%s"), "the commit is still there")
	out, err = script(t, nil, "clean.sh")
	require.Error(t, err, "clean must refuse too:\n%s", out)
	require.DirExists(t, tree)

	out, err = script(t, []string{"FORCE=1"}, "apply.sh")
	require.NoError(t, err, out)
	require.Equal(t, "scheduler: first test change", git(t, "log", "-1", "--format=%s"), "FORCE=1 applies patches/ as it is")
}

// TestDeschedulerComponent: a second component goes through the same scripts.
// A line with no topics (only its line.env) is an empty series; the base commit puts the
// descheduler on the patched staging modules of the kubernetes tree; an
// exported commit comes back from materialise + apply, byte for byte.
func TestDeschedulerComponent(t *testing.T) {
	dtree := filepath.Join(scratch, "_output", "src", "descheduler")
	dpatches := filepath.Join(scratch, "patches", "descheduler", desched.Line)
	require.NoFileExists(t, filepath.Join(dpatches, "topics"))
	dgit := func(args ...string) string { t.Helper(); return gitIn(t, dtree, args...) }

	out := mustScript(t, "apply.sh", "descheduler")
	require.Contains(t, out, "applying 0 patches from patches/descheduler/"+desched.Line)
	require.Equal(t, dgit("rev-parse", desched.BaseTag()+"^{commit}"), dgit("rev-parse", "HEAD"), "an empty series leaves the tree at base")
	require.Equal(t, dgit("rev-parse", desched.UpstreamTag()+"^{commit}"), dgit("rev-parse", desched.BaseTag()+"^"))
	if realTree := filepath.Join(realRepo, "_output", "src", "descheduler"); dirExists(realTree) {
		real, err := exec.Command("git", "-C", realTree, "rev-parse", desched.BaseTag()+"^{commit}").Output()
		require.NoError(t, err)
		require.Equal(t, strings.TrimSpace(string(real)), dgit("rev-parse", desched.BaseTag()+"^{commit}"), "the import and base are reproducible")
	}
	upstreamMod := dgit("show", desched.UpstreamTag()+":go.mod")
	require.Regexp(t, `(?m)^\tk8s\.io/api v0\.\d+\.\d+$`, upstreamMod, "upstream requires released staging modules")
	baseMod := dgit("show", desched.BaseTag()+":go.mod")
	for _, m := range []string{"api", "apimachinery", "client-go", "component-base"} {
		require.Contains(t, baseMod, "k8s.io/"+m+" => ../kubernetes/staging/src/k8s.io/"+m+"\n", "base replaces k8s.io/%s with the patched tree", m)
		require.Contains(t, baseMod, "\tk8s.io/"+m+" "+kube.StagingVersion+"\n")
	}
	require.Regexp(t, `(?m)^replace k8s\.io/kube-openapi => k8s\.io/kube-openapi v0\.0\.0-\d{14}-[0-9a-f]{12}$`, baseMod)
	out = mustScript(t, "materialize.sh", "descheduler")
	require.Contains(t, out, "already materialised")

	// Export round trip.
	f, err := os.OpenFile(filepath.Join(dtree, "pkg", "version", "version.go"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\n// A comment added by the descheduler round-trip test.\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	dgit("commit", "-q", "-am", "version: test change", "-m", "Topic: version")
	want := dgit("rev-parse", "HEAD^{tree}")
	require.NoError(t, os.MkdirAll(dpatches, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dpatches, "topics"), []byte("version\n"), 0o644))
	mustScript(t, "export.sh", "descheduler")
	entries, err := filepath.Glob(filepath.Join(dpatches, "*", "*.patch"))
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dpatches, "version", "0001-version-test-change.patch")}, entries)
	exported, err := os.ReadFile(entries[0])
	require.NoError(t, err)

	require.NoError(t, os.RemoveAll(dtree))
	out = mustScript(t, "apply.sh", "descheduler")
	require.Contains(t, out, "applying 1 patches from patches/descheduler/"+desched.Line)
	require.Equal(t, want, dgit("rev-parse", "HEAD^{tree}"))
	mustScript(t, "export.sh", "descheduler")
	again, err := os.ReadFile(entries[0])
	require.NoError(t, err)
	require.Equal(t, string(exported), string(again), "materialise -> apply -> export leaves patches/descheduler byte-identical")
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
