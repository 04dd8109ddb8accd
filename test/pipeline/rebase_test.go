package pipeline

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rebase tool is tested on a throwaway component, added the way any
// component is (a folder under build/ and nothing else): upstream
// github.com/google/uuid, moved from v1.5.0 to v1.6.0. Between the two,
// upstream added the Max UUID to hash.go's var block and changed
// uuid_test.go's `for x := 1; x < 32; x++` to `x < 128`, which gives every
// case the tool has to handle with a module small enough to materialise in a
// second. Its codegen hook writes zz_generated.exports.txt, the sorted list of
// exported top-level names, so upstream's Max changes a generated file too.

const (
	throwaway     = "uuid"
	throwawayFrom = "v1.5.0"
	throwawayTo   = "v1.6.0"
	// throwawayLine is the release line the throwaway series is on: a line of
	// kube-guard, not named after the component's own minor (as the
	// descheduler's), so that its pin may move to another minor.
	throwawayLine = "7.1"
)

const throwawayEnv = `# A throwaway component for the pipeline tests.
UPSTREAM_MODULE=github.com/google/uuid
FORK_NAME=guard
GENERATED_PATHS="zz_generated.*"
`

const throwawayLineEnv = `# The throwaway component's release line.
UPSTREAM_VERSION=v1.5.0
`

const throwawayCodegen = `#!/usr/bin/env bash
# Keeps zz_generated.exports.txt, where the tree has one, up to date.
# Usage: codegen.sh [all|exports]...
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../hack/lib/init.sh"
ALL_STEPS=(exports)
component::load uuid
component::codegen_steps "${ALL_STEPS[@]}" -- "$@" >/dev/null
cd "${COMPONENT_TREE}"
[[ -f zz_generated.exports.txt ]] || exit 0
ls *.go | grep -v '_test\.go$' | xargs grep -h -o -E '^(func [A-Z][A-Za-z0-9_]*|	[A-Z][A-Za-z0-9_]* +=)' |
  sed -E 's/^func //; s/^\t//; s/ +=$//' | LC_ALL=C sort -u >zz_generated.exports.txt
`

// rebaseRepo is a scratch copy of this repository's scripts with the
// throwaway component and its own _output/.
type rebaseRepo struct {
	dir  string
	tree string
}

func newRebaseRepo(t *testing.T) *rebaseRepo {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"hack", "build"} {
		out, err := exec.Command("cp", "-R", filepath.Join(realRepo, d), dir).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	comp := filepath.Join(dir, "build", throwaway)
	require.NoError(t, os.MkdirAll(comp, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(comp, "component.env"), []byte(throwawayEnv), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(comp, "codegen.sh"), []byte(throwawayCodegen), 0o755))
	// One topic, "fix", holds the throwaway series, on one release line.
	series := filepath.Join(dir, "patches", throwaway, throwawayLine)
	require.NoError(t, os.MkdirAll(filepath.Join(series, "fix"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(series, "line.env"), []byte(throwawayLineEnv), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(series, "topics"), []byte("fix\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(series, "fix", "TOPIC.md"),
		[]byte("# Fixes of the throwaway component\n\nUpstream-Status: not-proposed\nBug: none\nGates: none\nDepends: none\n\nTest changes.\n"), 0o644))
	r := &rebaseRepo{dir: dir, tree: filepath.Join(dir, "_output", "src", throwaway)}
	r.mustRun(t, "materialize.sh", throwaway)
	return r
}

func (r *rebaseRepo) run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(r.dir, "hack", "make-rules", name)}, args...)...)
	cmd.Env = append(append(os.Environ(), "OUTPUT_DIR="+filepath.Join(r.dir, "_output")), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *rebaseRepo) mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := r.run(t, nil, name, args...)
	require.NoError(t, err, "%s %v failed:\n%s", name, args, out)
	return out
}

func (r *rebaseRepo) git(t *testing.T, args ...string) string {
	t.Helper()
	return gitIn(t, r.tree, args...)
}

func (r *rebaseRepo) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.tree, rel))
	require.NoError(t, err)
	return string(b)
}

func (r *rebaseRepo) write(t *testing.T, rel, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(r.tree, rel), []byte(content), 0o644))
}

// replace rewrites old (which must be there) to new in a file of the tree.
func (r *rebaseRepo) replace(t *testing.T, rel, old, new string) {
	t.Helper()
	s := r.read(t, rel)
	require.Contains(t, s, old, rel)
	r.write(t, rel, strings.Replace(s, old, new, 1))
}

// commit commits everything in the tree with a subject, a body and trailers
// (and "Topic: fix" last).
func (r *rebaseRepo) commit(t *testing.T, subject string, trailers ...string) {
	t.Helper()
	r.git(t, "add", "--all", ".")
	msg := subject + "\n\nA change of the throwaway component.\n"
	msg += "\n" + strings.Join(append(trailers, "Topic: fix"), "\n") + "\n"
	r.git(t, "commit", "--quiet", "-m", msg)
}

// generate runs the component's codegen hook in the tree.
func (r *rebaseRepo) generate(t *testing.T) { r.mustRun(t, "codegen.sh", throwaway) }

// addFunc writes FILE.go with an exported function NAME and regenerates.
func (r *rebaseRepo) addFunc(t *testing.T, file, name string) {
	t.Helper()
	r.write(t, file, "package uuid\n\n// "+name+" is a test function.\nfunc "+name+"() UUID { return Nil }\n")
	if _, err := os.Stat(filepath.Join(r.tree, "zz_generated.exports.txt")); os.IsNotExist(err) {
		r.write(t, "zz_generated.exports.txt", "")
	}
	r.generate(t)
}

// backportMax makes upstream's own change between the releases (c58770e,
// "add Max UUID constant") in the tree, as a backport would.
func (r *rebaseRepo) backportMax(t *testing.T) {
	t.Helper()
	r.replace(t, "hash.go", "\tNil           UUID // empty UUID, all zeros\n",
		"\tNil           UUID // empty UUID, all zeros\n\n"+
			"\t// The Max UUID is special form of UUID that is specified to have all 128 bits set to 1.\n"+
			"\tMax = UUID{\n"+
			"\t\t0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,\n"+
			"\t\t0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,\n"+
			"\t}\n")
}

// testMoreLengths changes TestVersion7's `x < 32` to `x < 64`: the line
// upstream changed to `x < 128` between the releases, so the change
// conflicts by hand.
func (r *rebaseRepo) testMoreLengths(t *testing.T) {
	t.Helper()
	r.replace(t, "uuid_test.go", "func TestVersion7(t *testing.T) {\n\tSetRand(nil)\n\tm := make(map[string]bool)\n\tfor x := 1; x < 32; x++ {",
		"func TestVersion7(t *testing.T) {\n\tSetRand(nil)\n\tm := make(map[string]bool)\n\tfor x := 1; x < 64; x++ {")
}

// handWrittenAndGenerated commits two patches: a hand-written change to
// doc.go, and a new exported function with the generated file it changes
// (Regenerate: exports).
func (r *rebaseRepo) handWrittenAndGenerated(t *testing.T) {
	t.Helper()
	r.replace(t, "doc.go", "// Package uuid", "// kube-guard: a hand-written change.\n//\n// Package uuid")
	r.commit(t, "doc: a hand-written change", "Rebase-Policy: carry")
	r.addFunc(t, "min.go", "Min")
	r.commit(t, "uuid: add Min", "Rebase-Policy: carry", "Regenerate: exports")
}

func (r *rebaseRepo) export(t *testing.T) { r.mustRun(t, "export.sh", throwaway) }

func (r *rebaseRepo) patchNames(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(r.dir, "patches", throwaway, throwawayLine, "fix", "*.patch"))
	require.NoError(t, err)
	var n []string
	for _, m := range matches {
		n = append(n, filepath.Base(m))
	}
	return n
}

func (r *rebaseRepo) pin(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "patches", throwaway, throwawayLine, "line.env"))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "UPSTREAM_VERSION="); ok {
			return v
		}
	}
	t.Fatal("no UPSTREAM_VERSION")
	return ""
}

// requireRebased checks what every finished rebase leaves: the pin moved, the
// tags, main on the new base with n patches, patches/ exported from it and
// apply a no-op.
func (r *rebaseRepo) requireRebased(t *testing.T, n int) {
	t.Helper()
	require.Equal(t, throwawayTo, r.pin(t), "the pin moved in the line's line.env")
	require.Equal(t, "main", r.git(t, "branch", "--show-current"))
	require.Equal(t, r.git(t, "rev-parse", "upstream/"+throwawayTo+"^{commit}"), r.git(t, "rev-parse", "base/"+throwawayTo+"^"))
	require.Equal(t, "", r.git(t, "for-each-ref", "refs/rebase/"), "no rebase refs left")
	require.NoFileExists(t, filepath.Join(r.tree, ".git", "kube-guard-rebase"))
	require.Equal(t, n, len(r.patchNames(t)))
	require.Len(t, strings.Fields(r.git(t, "rev-list", "base/"+throwawayTo+"..HEAD")), n, "main is the new base plus the series")
	// The series in patches/ is exactly the tree: apply has nothing to do,
	// and a fresh materialisation of the new pin takes it.
	require.Contains(t, r.mustRun(t, "apply.sh", throwaway), "already applied")
	head := r.git(t, "rev-parse", "HEAD^{tree}")
	out, err := r.run(t, []string{"FORCE=1"}, "materialize.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "already materialised", "the rebase left the recipe stamp of the new pin")
	require.NoError(t, os.RemoveAll(r.tree))
	r.mustRun(t, "apply.sh", throwaway)
	require.Equal(t, head, r.git(t, "rev-parse", "HEAD^{tree}"), "patches/ applied to a fresh materialisation of the new pin gives the rebased tree")
}

func TestRebaseClean(t *testing.T) {
	r := newRebaseRepo(t)
	r.handWrittenAndGenerated(t)
	require.NotContains(t, r.read(t, "zz_generated.exports.txt"), "Max\n")
	r.export(t)

	out := r.mustRun(t, "rebase.sh", throwaway, throwawayTo)
	require.Contains(t, out, "rebased uuid from v1.5.0 onto v1.6.0: 2 patches")
	require.Contains(t, out, "regenerated: fix/0002-uuid-add-Min.patch")
	r.requireRebased(t, 2)
	gen := r.read(t, "zz_generated.exports.txt")
	require.Contains(t, gen, "Max\nMin\n", "the generated file was regenerated on the new base, not merged")
	require.Contains(t, r.read(t, "hash.go"), "Max = UUID{", "the tree is on upstream v1.6.0")
	require.Contains(t, r.read(t, "doc.go"), "kube-guard: a hand-written change")

	// Re-running is a no-op.
	require.Contains(t, r.mustRun(t, "rebase.sh", throwaway, throwawayTo), "nothing to rebase")
}

func TestRebaseGeneratedConflict(t *testing.T) {
	r := newRebaseRepo(t)
	r.addFunc(t, "min.go", "Min")
	r.commit(t, "uuid: add Min", "Rebase-Policy: carry", "Regenerate: exports")
	// Mid lands in the generated list exactly where upstream's Max does.
	r.addFunc(t, "mid.go", "Mid")
	r.commit(t, "uuid: add Mid", "Rebase-Policy: carry", "Regenerate: exports")
	r.export(t)

	out := r.mustRun(t, "rebase.sh", throwaway, throwawayTo)
	require.Contains(t, out, "fix/0002-uuid-add-Mid.patch: conflicts only in generated files (1)")
	require.NotContains(t, out, "am --continue", "no hand work was asked for")
	r.requireRebased(t, 2)
	require.Contains(t, r.read(t, "zz_generated.exports.txt"), "IsInvalidLengthError\nMax\nMid\nMin\nMust\n")
	require.NotContains(t, r.read(t, "zz_generated.exports.txt"), "<<<<<<<")
	require.Contains(t, r.mustRun(t, "verify-codegen.sh", throwaway), "no diff after regenerating")
}

func TestRebaseHandConflict(t *testing.T) {
	r := newRebaseRepo(t)
	r.testMoreLengths(t)
	r.commit(t, "uuid: test more lengths", "Rebase-Policy: carry")
	r.replace(t, "doc.go", "// Package uuid", "// kube-guard: after the conflict.\n//\n// Package uuid")
	r.commit(t, "doc: a change after the conflict", "Rebase-Policy: carry")
	r.export(t)

	out, err := r.run(t, nil, "rebase.sh", throwaway, throwawayTo)
	require.Error(t, err, out)
	require.Contains(t, out, "patches/uuid/"+throwawayLine+"/fix/0001-uuid-test-more-lengths.patch does not apply to base/v1.6.0")
	require.Contains(t, out, "conflicting paths:\n      uuid_test.go\n")
	require.Contains(t, out, "am --continue")
	require.Contains(t, out, "make rebase COMPONENT=uuid LINE="+throwawayLine+" TO=v1.6.0")
	require.DirExists(t, filepath.Join(r.tree, ".git", "rebase-apply"), "the git am session is left open")
	require.Equal(t, throwawayFrom, r.pin(t), "the pin moves only when the series is through")

	// Running it again before resolving says the same and changes nothing.
	again, err := r.run(t, nil, "rebase.sh", throwaway, throwawayTo)
	require.Error(t, err)
	require.Contains(t, again, "uuid_test.go")
	// Another target is refused while this one is open.
	other, err := r.run(t, nil, "rebase.sh", throwaway, "v1.4.0")
	require.Error(t, err)
	require.Contains(t, other, "a rebase of uuid to v1.6.0 is in progress")

	// Resolve by hand, as a maintainer would, and resume.
	resolved := r.read(t, "uuid_test.go")
	require.Contains(t, resolved, "<<<<<<<")
	start := strings.Index(resolved, "<<<<<<<")
	end := strings.Index(resolved, ">>>>>>>")
	end += strings.Index(resolved[end:], "\n") + 1
	r.write(t, "uuid_test.go", resolved[:start]+"\tfor x := 1; x < 256; x++ {\n"+resolved[end:])
	r.git(t, "add", "uuid_test.go")
	r.git(t, "am", "--continue")

	out = r.mustRun(t, "rebase.sh", throwaway, throwawayTo)
	require.Contains(t, out, "resolved by hand: fix/0001-uuid-test-more-lengths.patch")
	require.NotContains(t, out, "fix/0001-uuid-test-more-lengths.patch: regenerating", "a conflict in hand-written files only asks for no generator")
	r.requireRebased(t, 2)
	require.Contains(t, r.read(t, "uuid_test.go"), "x < 256")
	require.Contains(t, r.read(t, "doc.go"), "kube-guard: after the conflict")
	p, err := os.ReadFile(filepath.Join(r.dir, "patches", throwaway, throwawayLine, "fix", "0001-uuid-test-more-lengths.patch"))
	require.NoError(t, err)
	require.Contains(t, string(p), "-\tfor x := 1; x < 128; x++ {\n+\tfor x := 1; x < 256; x++ {", "the exported patch is the resolution against v1.6.0")
}

func TestRebaseAbort(t *testing.T) {
	r := newRebaseRepo(t)
	r.testMoreLengths(t)
	r.commit(t, "uuid: test more lengths", "Rebase-Policy: carry")
	r.export(t)
	before := r.git(t, "rev-parse", "HEAD")
	_, err := r.run(t, nil, "rebase.sh", throwaway, throwawayTo)
	require.Error(t, err)

	out := r.mustRun(t, "rebase.sh", "--abort", throwaway)
	require.Contains(t, out, "back on main")
	require.Equal(t, before, r.git(t, "rev-parse", "HEAD"))
	require.Equal(t, "main", r.git(t, "branch", "--show-current"))
	require.NoDirExists(t, filepath.Join(r.tree, ".git", "rebase-apply"))
	require.Equal(t, throwawayFrom, r.pin(t))
	require.Contains(t, r.mustRun(t, "apply.sh", throwaway), "already applied")
}

func TestRebaseDropsWhatUpstreamMerged(t *testing.T) {
	r := newRebaseRepo(t)
	// Upstream's own change between the releases (c58770e, "add Max UUID
	// constant"), carried as a backport.
	r.backportMax(t)
	r.commit(t, "uuid: add the Max UUID", "Rebase-Policy: drop-when-upstream https://github.com/google/uuid/pull/149")
	r.replace(t, "doc.go", "// Package uuid", "// kube-guard: kept.\n//\n// Package uuid")
	r.commit(t, "doc: kept", "Rebase-Policy: carry")
	r.export(t)

	out := r.mustRun(t, "rebase.sh", throwaway, throwawayTo)
	require.Contains(t, out, "fix/0001-uuid-add-the-Max-UUID.patch: upstream v1.6.0 already has this change (it applies empty): dropped")
	require.Contains(t, out, "dropped (upstream v1.6.0 already has them): fix/0001-uuid-add-the-Max-UUID.patch")
	r.requireRebased(t, 1)
	require.Equal(t, []string{"0001-doc-kept.patch"}, r.patchNames(t), "the series is renumbered without the dropped patch")
}

// TestThrowawayComponentThroughEveryScript: a component is data. The
// throwaway component, added as a folder under build/ and nothing else, goes
// through the generic scripts: verify (series, export, gofmt, trailers,
// codegen), upstream's tests of the packages its series touches, and the
// build (it declares no binaries).
func TestThrowawayComponentThroughEveryScript(t *testing.T) {
	r := newRebaseRepo(t)
	r.addFunc(t, "min.go", "Min")
	r.commit(t, "uuid: add Min", "Rebase-Policy: carry", "Regenerate: exports")
	r.export(t)

	// The checks about this repository's own files need its git checkout.
	skip := []string{"SKIP_VERIFY=shellcheck versions docs"}
	out, err := r.run(t, skip, "verify/all.sh", throwaway)
	require.NoError(t, err, out)
	for _, check := range []string{"series", "topics", "export", "gofmt", "trailers", "codegen"} {
		require.Contains(t, out, "verify "+check+": ok")
	}
	require.Contains(t, out, "verify staging-overrides: not applicable")

	// A generated file left stale is caught by the codegen check.
	r.write(t, "zz_generated.exports.txt", "Stale\n")
	r.commit(t, "uuid: a stale generated file", "Rebase-Policy: carry", "Regenerate: exports")
	r.export(t)
	out, err = r.run(t, skip, "verify/all.sh", throwaway)
	require.Error(t, err, out)
	require.Contains(t, out, "verify codegen: FAILED")
	require.Equal(t, "Stale\n", r.read(t, "zz_generated.exports.txt"), "verify leaves the tree as it was")

	out, err = r.run(t, []string{"TEST_UPSTREAM_COMPONENTS=" + throwaway}, "test-upstream.sh", "--list")
	require.NoError(t, err, out)
	require.Contains(t, out, "uuid unit ./.")
	out, err = r.run(t, []string{"TEST_UPSTREAM_COMPONENTS=" + throwaway}, "test-upstream.sh", "-run", "TestNew$")
	require.NoError(t, err, out)
	require.Contains(t, out, "uuid: upstream unit tests of 1 touched packages")

	out, err = r.run(t, nil, "build.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "uuid: no BINARIES to build")
}

// TestRebaseReport: the report finds v1.6.0 as the next release of the
// throwaway component's pin, and says which patch conflicts (in which file),
// which one upstream has merged, which were regenerated, that it builds and
// that upstream's tests of the touched packages pass, without changing the
// checkout or the tree.
func TestRebaseReport(t *testing.T) {
	r := newRebaseRepo(t)
	r.backportMax(t)
	r.commit(t, "uuid: add the Max UUID", "Rebase-Policy: drop-when-upstream https://github.com/google/uuid/pull/149")
	r.testMoreLengths(t)
	r.commit(t, "uuid: test more lengths", "Rebase-Policy: carry")
	r.addFunc(t, "min.go", "Min")
	r.commit(t, "uuid: add Min", "Rebase-Policy: carry", "Regenerate: exports")
	r.export(t)
	before := r.git(t, "rev-parse", "HEAD")
	patches := r.patchNames(t)

	report := filepath.Join(r.dir, "report.md")
	out, err := r.run(t, []string{"REPORT_COMPONENTS=" + throwaway, "REPORT_OUT=" + report}, "rebase-report.sh")
	require.NoError(t, err, out)
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	got := string(b)
	require.Contains(t, got, "- pin: line "+throwawayLine+": uuid v1.5.0 (series ")
	require.Contains(t, got, "| "+throwawayLine+" | uuid | v1.6.0 | conflicts: fix/0002-uuid-test-more-lengths: uuid_test.go; "+
		"applies empty (upstream has it): fix/0001-uuid-add-the-Max-UUID; regenerated: fix/0003-uuid-add-Min | yes | pass |", got)

	require.Equal(t, throwawayFrom, r.pin(t), "the report never moves the pin")
	require.Equal(t, before, r.git(t, "rev-parse", "HEAD"), "nor touches the tree")
	require.Equal(t, patches, r.patchNames(t))
}

// TestRebaseNewLine: NEW_LINE makes a release line from the selected one,
// rebased onto another release: an older one (1.4, on v1.4.0) in a tree of
// its own, and a newer one (7.2, on v1.6.0), which takes the component's
// tree and moves the old line's tree aside. The line it came from stays as it
// was, and each line applies, exports and verifies on its own. A line named
// after its pin's minor does not move to another minor.
func TestRebaseNewLine(t *testing.T) {
	r := newRebaseRepo(t)
	r.handWrittenAndGenerated(t)
	r.export(t)
	series := func(line string) string { return filepath.Join(r.dir, "patches", throwaway, line) }
	before := r.patchNames(t)
	oldHead := r.git(t, "rev-parse", "HEAD")

	// A typo in TOPICS creates nothing.
	out, err := r.run(t, []string{"NEW_LINE=1.4", "TOPICS=fix nope"}, "rebase.sh", throwaway, "v1.4.0")
	require.Error(t, err)
	require.Contains(t, out, "has no topic 'nope'")
	require.NoDirExists(t, series("1.4"))

	// A line's other settings (kubernetes: the gates its clusters turn on)
	// go to the new line with its pin.
	f, err := os.OpenFile(filepath.Join(series(throwawayLine), "line.env"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("# the gates of its clusters\nCLUSTER_GATES=SomeGate=true\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	// An older line.
	out, err = r.run(t, []string{"NEW_LINE=1.4"}, "rebase.sh", throwaway, "v1.4.0")
	require.NoError(t, err, out)
	require.Contains(t, out, "new line 1.4 from line "+throwawayLine+" (fix)")
	require.Contains(t, out, "rebased uuid from v1.5.0 onto v1.4.0: 2 patches in patches/uuid/1.4")
	old := filepath.Join(r.dir, "_output", "src", throwaway+"-1.4")
	require.Equal(t, "main", gitIn(t, old, "branch", "--show-current"))
	require.Len(t, strings.Fields(gitIn(t, old, "rev-list", "base/v1.4.0..HEAD")), 2)
	require.Equal(t, "", gitIn(t, old, "for-each-ref", "refs/rebase/"), "no rebase refs left")
	env, err := os.ReadFile(filepath.Join(series("1.4"), "line.env"))
	require.NoError(t, err)
	require.Contains(t, string(env), "UPSTREAM_VERSION=v1.4.0")
	require.Equal(t, 1, strings.Count(string(env), "UPSTREAM_VERSION="), string(env))
	require.Contains(t, string(env), "# the gates of its clusters\nCLUSTER_GATES=SomeGate=true\n")
	require.FileExists(t, filepath.Join(series("1.4"), "fix", "TOPIC.md"))
	require.Equal(t, throwawayFrom, r.pin(t), "the line it came from keeps its pin")
	require.Equal(t, before, r.patchNames(t))
	require.Equal(t, oldHead, r.git(t, "rev-parse", "HEAD"), "and its tree")
	out, err = r.run(t, []string{"SKIP_VERIFY=shellcheck versions docs"}, "verify/all.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "verify: release line 1.4 (uuid)")
	require.Contains(t, out, "verify: every check passed")

	// Line 1.4 is named after its pin's minor: it follows v1.4.x only.
	out, err = r.run(t, []string{"LINE=1.4"}, "rebase.sh", throwaway, throwawayTo)
	require.Error(t, err)
	require.Contains(t, out, "line 1.4 follows the 1.4 releases; "+throwawayTo+" is another minor")
	// A line that does not exist is refused, and selects nothing.
	out, err = r.run(t, []string{"LINE=1.3"}, "apply.sh", throwaway)
	require.Error(t, err)
	require.Contains(t, out, "LINE=1.3 is not a release line of this repository")

	// A newer line takes _output/src/uuid; the newest line's tree moves aside.
	out, err = r.run(t, []string{"NEW_LINE=7.2"}, "rebase.sh", throwaway, throwawayTo)
	require.NoError(t, err, out)
	require.Contains(t, out, "the tree of line "+throwawayLine+" moves to _output/src/uuid-"+throwawayLine)
	require.Contains(t, r.read(t, "hash.go"), "Max = UUID{", "_output/src/uuid is on v1.6.0")
	require.Equal(t, oldHead, gitIn(t, filepath.Join(r.dir, "_output", "src", throwaway+"-"+throwawayLine), "rev-parse", "HEAD"))
	out = r.mustRun(t, "apply.sh", throwaway)
	require.Contains(t, out, "patches/uuid/7.2 already applied", "the default line is the newest")
	out, err = r.run(t, []string{"LINE=" + throwawayLine}, "apply.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "patches/uuid/"+throwawayLine+" already applied")

	// A line that exists is refused.
	out, err = r.run(t, []string{"NEW_LINE=1.4"}, "rebase.sh", throwaway, "v1.4.0")
	require.Error(t, err)
	require.Contains(t, out, "patches/uuid/1.4 exists")
}

// TestRebaseNewLineConflictResumesAndAborts: a new line whose rebase stops on
// a conflict resumes with the same command, and an abort removes the line and
// puts the moved tree back.
func TestRebaseNewLineConflictResumesAndAborts(t *testing.T) {
	r := newRebaseRepo(t)
	r.testMoreLengths(t)
	r.commit(t, "uuid: test more lengths", "Rebase-Policy: carry")
	r.export(t)
	oldHead := r.git(t, "rev-parse", "HEAD")
	out, err := r.run(t, []string{"NEW_LINE=7.2"}, "rebase.sh", throwaway, throwawayTo)
	require.Error(t, err)
	require.Contains(t, out, "make rebase COMPONENT=uuid LINE=7.2 TO="+throwawayTo+"         (resumes here)")
	out, err = r.run(t, []string{"NEW_LINE=7.2"}, "rebase.sh", throwaway, throwawayTo)
	require.Error(t, err)
	require.Contains(t, out, "does not apply to base/"+throwawayTo+": the git am session is left open", "the same command resumes (and stops on the same conflict)")
	out, err = r.run(t, []string{"LINE=7.2"}, "rebase.sh", "--abort", throwaway)
	require.NoError(t, err, out)
	require.NoDirExists(t, filepath.Join(r.dir, "patches", throwaway, "7.2"))
	require.Equal(t, oldHead, r.git(t, "rev-parse", "HEAD"), "the moved tree is back at _output/src/uuid")
	require.NoDirExists(t, filepath.Join(r.dir, "_output", "src", throwaway+"-"+throwawayLine))
}

// TestCodegenTrustsOnlyItsRecordedInputs: make test does not regenerate a
// release line whose generators already ran clean on exactly its current
// inputs (patches/<c>/<line>/codegen.verified), on any line, and regenerates
// it as soon as anything in its tree changes; `make verify`, and a run of
// some steps only, always regenerate.
func TestCodegenTrustsOnlyItsRecordedInputs(t *testing.T) {
	r := newRebaseRepo(t)
	r.handWrittenAndGenerated(t)
	r.export(t)
	out, err := r.run(t, []string{"NEW_LINE=1.4"}, "rebase.sh", throwaway, "v1.4.0")
	require.NoError(t, err, out)
	older := filepath.Join(r.dir, "_output", "src", throwaway+"-1.4")
	stamp := filepath.Join(r.dir, "patches", throwaway, "1.4", "codegen.verified")
	newestStamp := filepath.Join(r.dir, "patches", throwaway, throwawayLine, "codegen.verified")
	trust := []string{"LINE=1.4", "CODEGEN_TRUST_RECORDED=1"}

	// Nothing recorded yet: the generators run.
	out, err = r.run(t, trust, "verify-codegen.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "are not the ones recorded")
	require.Contains(t, out, "no diff after regenerating")
	require.Contains(t, out, "'make update-codegen-verified LINE=1.4' records them")

	// The update runs them on every line and records the key of what it
	// checked.
	out, err = r.run(t, nil, "update/codegen-verified.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "no diff after regenerating")
	require.Contains(t, out, "update codegen-verified: uuid line 1.4: recorded ")
	require.Contains(t, out, "update codegen-verified: uuid line "+throwawayLine+": recorded ")
	b, err := os.ReadFile(stamp)
	require.NoError(t, err)
	key, err := r.run(t, []string{"LINE=1.4"}, "verify-codegen.sh", "--key", throwaway)
	require.NoError(t, err, key)
	require.Regexp(t, "^[0-9a-f]{64}\n$", key)
	require.Contains(t, string(b), "\n"+key)
	nb, err := os.ReadFile(newestStamp)
	require.NoError(t, err)
	require.Contains(t, string(nb), "\n"+r.mustRun(t, "verify-codegen.sh", "--key", throwaway))
	require.NotEqual(t, string(b), string(nb), "each line has its own key")

	// Recorded: make test trusts it, on the older line and on the newest;
	// make verify does not, nor does a run of one step.
	out, err = r.run(t, trust, "verify-codegen.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "ran clean on exactly these inputs")
	require.NotContains(t, out, "no diff after regenerating")
	out, err = r.run(t, []string{"CODEGEN_TRUST_RECORDED=1"}, "verify-codegen.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "ran clean on exactly these inputs")
	require.NotContains(t, out, "no diff after regenerating")
	out, err = r.run(t, []string{"LINE=1.4"}, "verify-codegen.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "no diff after regenerating")
	out, err = r.run(t, trust, "verify-codegen.sh", throwaway, "exports")
	require.NoError(t, err, out)
	require.Contains(t, out, "no diff after regenerating")
	out, err = r.run(t, append(trust, "SKIP_VERIFY=shellcheck versions docs"), "verify/all.sh", throwaway)
	require.NoError(t, err, out)
	require.Contains(t, out, "export: ok", "the stamp is not a patch")
	require.Contains(t, out, "ran clean on exactly these inputs")

	// A stale generated file committed on the older line changes its tree,
	// and so its key: make test regenerates it and fails.
	require.NoError(t, os.WriteFile(filepath.Join(older, "zz_generated.exports.txt"), []byte("Stale\n"), 0o644))
	gitIn(t, older, "commit", "--quiet", "-am", "uuid: a stale generated file\n\nRebase-Policy: carry\nRegenerate: exports\nTopic: fix")
	out, err = r.run(t, []string{"LINE=1.4"}, "export.sh", throwaway)
	require.NoError(t, err, out)
	out, err = r.run(t, trust, "verify-codegen.sh", throwaway)
	require.Error(t, err, out)
	require.Contains(t, out, "are not the ones recorded")
	require.Contains(t, out, "regenerating changed 1 path(s)")
	// and the update records nothing for it.
	out, err = r.run(t, []string{"LINE=1.4"}, "update/codegen-verified.sh", throwaway)
	require.Error(t, err, out)
	require.Contains(t, out, "nothing recorded")
	b2, err := os.ReadFile(stamp)
	require.NoError(t, err)
	require.Equal(t, string(b), string(b2))
}
