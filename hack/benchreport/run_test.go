package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRunMeasuresThePhase runs a command that creates a *-cpu.prof file,
// keeps it open while a child process burns CPU for about a second, and
// closes it after an idle half second: the measured phase must count the
// child's CPU time and the whole run must count it once.
func TestRunMeasuresThePhase(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "cpu.json")
	t.Setenv("TEST_PROFILE", writeTestProfile(t))
	script := `sleep 0.3
exec 3>"$1/x-cpu.prof"
timeout 1 bash -c 'while :; do :; done' || true
cat "$TEST_PROFILE" >&3
exec 3>&-
sleep 0.5`
	err := runRun([]string{"-watch", dir, "-out", out, "-name", "Case/Workload", "-pods", "10", "--", "bash", "-c", script, "bash", dir})
	if err != nil {
		t.Fatal(err)
	}
	item := readCPUItem(t, out)
	if item.Labels["Metric"] != metricCPU || workloadName(item.Labels["Name"]) != "Case/Workload" {
		t.Errorf("labels %v", item.Labels)
	}
	d := item.Data
	// The busy loop ran about one second of CPU; the machine may be loaded.
	if d["MeasuredPhase"] < 0.3 || d["MeasuredPhase"] > 1.3 {
		t.Errorf("measured phase: %.2f s of CPU, want about 1", d["MeasuredPhase"])
	}
	if d["MeasuredPhaseWall"] < 0.9 || d["MeasuredPhaseWall"] > d["ProcessWall"]-0.6 {
		t.Errorf("measured phase: %.2f s wall of %.2f s, want about 1 s inside the run", d["MeasuredPhaseWall"], d["ProcessWall"])
	}
	if d["Process"] < d["MeasuredPhase"]-0.05 {
		t.Errorf("the whole run used %.2f s of CPU, less than its phase %.2f s", d["Process"], d["MeasuredPhase"])
	}
	if got, want := d["MeasuredPhasePerPod"], d["MeasuredPhase"]*1000/10; got != want {
		t.Errorf("per pod: %v ms, want %v", got, want)
	}
	// The profile's samples: 60 ms on the scheduler's code of 100 ms.
	if d["SchedulerPerPod"] != 6 || d["ProfiledPerPod"] != 10 {
		t.Errorf("kube-scheduler %v ms of %v ms profiled per pod, want 6 of 10", d["SchedulerPerPod"], d["ProfiledPerPod"])
	}
}

func TestRunWithoutProfileFails(t *testing.T) {
	dir := t.TempDir()
	err := runRun([]string{"-watch", dir, "-out", filepath.Join(dir, "out.json"), "-name", "A/B", "-pods", "1", "--", "true"})
	if err == nil {
		t.Fatal("a run that created no CPU profile was measured")
	}
}

func TestReadPerfInstructions(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]float64{
		"# started on x\n\n123456789,,instructions:u,1000,100.00,,\n": 123456789,
		"<not supported>,,instructions,0,100.00,,\n":                  -1,
	} {
		f := filepath.Join(dir, "perf")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok, err := readPerfInstructions(f)
		if err != nil || ok != (want >= 0) || (ok && got != want) {
			t.Errorf("%q: got %v, %v, %v; want %v", content, got, ok, err, want)
		}
	}
}

// barrierScript creates and closes the barrier's profile after $2 seconds
// of setup, works for $4 seconds (scheduler_perf logs and goes to its next
// operation), sleeps $3 seconds as the config's sleep does, then runs a
// measured phase of 0.2 s and lives on a little, as scheduler_perf does
// after its measured phase (run reads the process's CPU time at the close).
const barrierScript = `sleep "$2"
exec 3>"$1/barrier.prof"
exec 3>&-
[ "$4" = 0 ] || timeout "$4" bash -c 'while :; do :; done' || true
sleep "$3"
exec 3>"$1/x-cpu.prof"
sleep 0.2
cat "$TEST_PROFILE" >&3
exec 3>&-
sleep 0.5`

// readCPUItem returns the one data item of a file `run` wrote.
func readCPUItem(t *testing.T, file string) dataItem {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var items dataItems
	if err := json.Unmarshal(b, &items); err != nil {
		t.Fatal(err)
	}
	if len(items.DataItems) != 1 {
		t.Fatalf("%s: %d data items", file, len(items.DataItems))
	}
	return items.DataItems[0]
}

// TestRunBarrierStartsThePhasesTogether runs two benchmarks whose setups
// differ by 1.5 s through one barrier: their measured phases must start
// together, the one that got there first held until the other's sleep was
// over. The slow one works 0.2 s between the barrier's profile and its
// sleep: stopped then, it would sleep all of it after the release.
func TestRunBarrierStartsThePhasesTogether(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	t.Setenv("TEST_PROFILE", writeTestProfile(t))
	meet := t.TempDir()
	setups := map[string]string{"fast": "0.1", "slow": "1.6"}
	gaps := map[string]string{"fast": "0", "slow": "0.2"}
	outs := map[string]string{}
	errs := make(chan error, len(setups))
	for id, setup := range setups {
		dir := t.TempDir()
		outs[id] = filepath.Join(t.TempDir(), "cpu.json")
		go func() {
			errs <- runRun([]string{"-watch", dir, "-out", outs[id], "-name", "Case/" + id, "-pods", "1",
				"-barrier", "barrier.prof", "-barrier-dir", meet, "-barrier-id", id, "-barrier-parties", "2", "-barrier-sleep", "1s",
				"--", "bash", "-c", barrierScript, "bash", dir, setup, "1", gaps[id]})
		}()
	}
	for range setups {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	fast, slow := readCPUItem(t, outs["fast"]).Data, readCPUItem(t, outs["slow"]).Data
	if d := math.Abs(fast["MeasuredPhaseStart"] - slow["MeasuredPhaseStart"]); d > 0.3 {
		t.Errorf("the measured phases started %.2f s apart, want together (setups 1.5 s apart)", d)
	}
	// Each run is stopped a third of the sleep after its arrival and
	// released at the slow one's arrival plus 7/6 of the sleep: the fast run
	// is held about 1.5 + 7/6 - 1/3 s, the slow one 7/6 - 1/3 s.
	if fast["BarrierHeld"] < 2.0 || fast["BarrierHeld"] > 3.5 || slow["BarrierHeld"] < 0.6 || slow["BarrierHeld"] > fast["BarrierHeld"]-1.2 {
		t.Errorf("held: the fast run %.2f s, the slow run %.2f s; want about 2.3 and 0.8", fast["BarrierHeld"], slow["BarrierHeld"])
	}
	if slow["MeasuredPhaseStart"]-slow["BarrierHeld"] < fast["MeasuredPhaseStart"]-fast["BarrierHeld"]+1.2 {
		t.Errorf("the slow run arrived %.2f s after the fast one, want about 1.5", (slow["MeasuredPhaseStart"]-slow["BarrierHeld"])-(fast["MeasuredPhaseStart"]-fast["BarrierHeld"]))
	}
}

// TestRunBarrierDoesNotWaitForARunThatLeft: a benchmark that ends before
// the barrier lets the other continue long before the timeout, and its own
// run fails.
func TestRunBarrierDoesNotWaitForARunThatLeft(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	t.Setenv("TEST_PROFILE", writeTestProfile(t))
	meet, dir := t.TempDir(), t.TempDir()
	out := filepath.Join(t.TempDir(), "cpu.json")
	barrierArgs := func(id string) []string {
		return []string{"-barrier", "barrier.prof", "-barrier-dir", meet, "-barrier-id", id, "-barrier-parties", "2", "-barrier-sleep", "0.5s", "-barrier-timeout", "60s"}
	}
	errs := make(chan error, 1)
	go func() {
		args := append([]string{"-watch", dir, "-out", out, "-name", "Case/stays", "-pods", "1"}, barrierArgs("stays")...)
		errs <- runRun(append(args, "--", "bash", "-c", barrierScript, "bash", dir, "0", "0.5", "0"))
	}()
	args := append([]string{"-watch", t.TempDir(), "-out", filepath.Join(t.TempDir(), "cpu.json"), "-name", "Case/leaves", "-pods", "1"}, barrierArgs("leaves")...)
	if err := runRun(append(args, "--", "bash", "-c", "sleep 0.5")); err == nil {
		t.Error("a run whose benchmark never got to the barrier was measured")
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if held := readCPUItem(t, out).Data["BarrierHeld"]; held > 10 {
		t.Errorf("held %.1f s: the run waited for the one that left", held)
	}
}
