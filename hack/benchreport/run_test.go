package main

import (
	"encoding/json"
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
	script := `sleep 0.3
exec 3>"$1/x-cpu.prof"
timeout 1 bash -c 'while :; do :; done' || true
exec 3>&-
sleep 0.5`
	err := runRun([]string{"-watch", dir, "-out", out, "-name", "Case/Workload", "-pods", "10", "--", "bash", "-c", script, "bash", dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var items dataItems
	if err := json.Unmarshal(b, &items); err != nil {
		t.Fatal(err)
	}
	if len(items.DataItems) != 1 {
		t.Fatalf("got %d data items", len(items.DataItems))
	}
	item := items.DataItems[0]
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
