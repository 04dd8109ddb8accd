package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewStats(t *testing.T) {
	for _, tc := range []struct {
		values                []float64
		wantMin, wantMed, max float64
	}{
		{[]float64{3, 1, 2}, 1, 2, 3},
		{[]float64{4, 1, 3, 2}, 1, 2.5, 4},
		{[]float64{7}, 7, 7, 7},
	} {
		s := newStats(tc.values)
		if s.N != len(tc.values) || s.Min != tc.wantMin || s.Median != tc.wantMed || s.Max != tc.max {
			t.Errorf("newStats(%v) = %+v, want n=%d min=%v median=%v max=%v", tc.values, s, len(tc.values), tc.wantMin, tc.wantMed, tc.max)
		}
	}
	if s := newStats([]float64{3, 1, 2}); s.Values[0] != 3 {
		t.Errorf("newStats reordered the values it keeps: %v", s.Values)
	}
}

func TestWorkloadName(t *testing.T) {
	for label, want := range map[string]string{
		"BenchmarkPerfScheduling/PreemptionBasic/250Nodes/namespace-2":                  "PreemptionBasic/250Nodes",
		"BenchmarkPerfScheduling/PreemptionProtectedBelowThreshold/200Nodes/preemptors": "PreemptionProtectedBelowThreshold/200Nodes",
		"PreemptionBasic/250Nodes":  "PreemptionBasic/250Nodes",
		"BenchmarkPerfScheduling/x": "",
		"":                          "",
	} {
		if got := workloadName(label); got != want {
			t.Errorf("workloadName(%q) = %q, want %q", label, got, want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// testdata/raw: three rounds; PreemptionBasic/250Nodes for the three
// variants, PreemptionProtectedBelowThreshold/200Nodes without upstream,
// and the CPU files of `run` for those and PreemptionPDB/5Nodes.
func TestBuildReport(t *testing.T) {
	r, err := buildReport("testdata/raw")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Workloads) != 3 {
		t.Fatalf("got %d workloads, want 3: %+v", len(r.Workloads), r.Workloads)
	}
	basic, pdb, protected := r.Workloads[0], r.Workloads[1], r.Workloads[2]
	if pdb.Name != "PreemptionPDB/5Nodes" || pdb.Baseline != variantUpstream {
		t.Errorf("workload %q with baseline %q", pdb.Name, pdb.Baseline)
	}
	// Paired by round: 21/20, 21.5/22, 20/21.
	if p := basic.PairedRatios[variantGateOff]["cpu_phase_per_pod"]; p.N != 3 || !near(p.Min, 20.0/21) || !near(p.Max, 21.0/20) || !near(p.Median, 21.5/22) {
		t.Errorf("paired CPU ratios of the gate off %+v, want 20/21, 21.5/22, 21/20", p)
	}
	if basic.Name != "PreemptionBasic/250Nodes" || protected.Name != "PreemptionProtectedBelowThreshold/200Nodes" {
		t.Fatalf("workloads %q, %q", basic.Name, protected.Name)
	}

	if basic.Baseline != variantUpstream || protected.Baseline != variantGateOff {
		t.Errorf("baselines %q, %q; want upstream, and gate-off where upstream did not run", basic.Baseline, protected.Baseline)
	}
	up := basic.Variants[variantUpstream]["throughput"]
	if up.N != 3 || up.Min != 90 || up.Median != 100 || up.Max != 110 {
		t.Errorf("upstream throughput %+v, want n=3 90/100/110", up)
	}
	for _, tc := range []struct {
		variant, measure string
		want             float64
	}{
		{variantGateOff, "throughput", 1.0},
		{variantGateOn, "throughput", 0.85},
		{variantGateOn, "postfilter_p99", 14.0 / 11},
		// result="error" (p99 9999 in the fixture) is not the goroutine latency.
		{variantGateOn, "goroutine_p99", 460.0 / 410},
		{variantGateOff, "goroutine_p99", 405.0 / 410},
		{variantGateOn, "duration", 12.5 / 11},
	} {
		if got := basic.Ratios[tc.variant][tc.measure]; !near(got, tc.want) {
			t.Errorf("PreemptionBasic %s/%s ratio = %v, want %v", tc.variant, tc.measure, got, tc.want)
		}
	}
	if _, ok := basic.Ratios[variantUpstream]; ok {
		t.Errorf("the baseline has ratios: %v", basic.Ratios[variantUpstream])
	}
	if got := protected.Ratios[variantGateOn]["throughput"]; !near(got, 42.0/55) {
		t.Errorf("protected gate-on/gate-off throughput ratio = %v, want %v", got, 42.0/55)
	}
	if _, ok := protected.Variants[variantGateOn]["goroutine_p99"]; ok {
		t.Errorf("goroutine latency reported for a workload without it")
	}

	// CPU per measured pod, decided on the median of the rounds' ratios:
	// PreemptionBasic gate off 21/20, 21.5/22, 20/21 (median 21.5/22 <=
	// 1.02x: met), gate on reported only;
	// PreemptionPDB gate off 50/100, 52/110, 51/105 (51/105 <= 0.70x: met),
	// gate on 80/100, 75/110, 70/105 (75/110: met, where the ratio of the
	// medians, 75/105, would miss it); the protected workload on the
	// kube-scheduler's own CPU, gate on / gate off 10.5/10, 12.5/12,
	// 11.5/11 (11.5/11 <= 1.10x: met; the whole process's 33/30, 33/32,
	// 34/31 is reported), without goroutine latency.
	if len(r.Goals) != 4 {
		t.Fatalf("got %d goals, want 4: %+v", len(r.Goals), r.Goals)
	}
	for i, want := range []struct {
		workload string
		ratio    float64
		met      bool
	}{
		{"PreemptionBasic/250Nodes", 21.5 / 22, true},
		{"PreemptionPDB/5Nodes", 51.0 / 105, true},
		{"PreemptionPDB/5Nodes", 75.0 / 110, true},
		{"PreemptionProtectedBelowThreshold/200Nodes", 11.5 / 11, true},
	} {
		g := r.Goals[i]
		if g.Workload != want.workload || !near(g.Ratio, want.ratio) || g.Met != want.met {
			t.Errorf("goal %d: %+v, want %+v", i, g, want)
		}
	}

	md := r.markdown()
	for _, want := range []string{
		"## PreemptionBasic/250Nodes",
		"| measure | upstream | patched, gate off | patched, gate on | patched, gate off / upstream | patched, gate on / upstream |",
		"| scheduling throughput (pods/s) | 100 [90-110] | 100 [95-105] | 85.0 [80.0-90.0] | 1.00x | 0.85x |",
		"| preemption goroutine p99 (ms) | 410 [400-420] | 405 [400-415] | 460 [440-480] | 0.99x | 1.12x |",
		"## PreemptionProtectedBelowThreshold/200Nodes",
		"| measure | patched, gate off | patched, gate on | patched, gate on / patched, gate off |",
		"| scheduling throughput (pods/s) | 55.0 [50.0-60.0] | 42.0 [40.0-44.0] | 0.76x |",
		"| PreemptionBasic/250Nodes | gate off: CPU per measured pod <= 1.02x upstream | 0.98x (single rounds 0.95x-1.05x; medians 21.0 vs 21.0 ms: 1.00x) | yes |",
		"| PreemptionPDB/5Nodes | gate on: CPU per measured pod <= 0.70x upstream | 0.68x (single rounds 0.67x-0.80x; medians 75.0 vs 105 ms: 0.71x) | yes |",
		"| PreemptionProtectedBelowThreshold/200Nodes | gate on: kube-scheduler's CPU per measured pod <= 1.10x gate off | 1.05x (single rounds 1.04x-1.05x; medians 11.5 vs 11.0 ms: 1.05x) | yes |",
		"| kube-scheduler's CPU per measured pod, measured phase (profile: stacks through its code) (ms) | 11.0 [10.0-12.0] | 11.5 [10.5-12.5] | 1.05x |",
		"| CPU per measured pod, measured phase (ms) | 21.0 [20.0-22.0] | 21.0 [20.0-21.5] | 23.0 [22.0-24.0] | 1.00x | 1.10x |",
		"Runs: upstream 3, patched, gate off 3, patched, gate on 3.",
		// Starts 1.8e9+1000*round (+0.05, -0.1, 0.2 gate off; 0, 0.3, -0.05
		// gate on): no ratio, and no row for the hidden starts.
		"| measured phase's start after the baseline's in its round (s) | 0.00 [0.00-0.00] | 0.05 [-0.10 to 0.20] | 0.00 [-0.05 to 0.30] | - | - |",
		"| held at the barrier before the measured part (s) | 2.00 [1.00-3.00] | 2.00 [2.00-2.00] | 1.50 [0.50-2.50] | - | - |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "MeasuredPhaseStart") || strings.Contains(md, "1800001000") {
		t.Errorf("markdown shows the phases' start times:\n%s", md)
	}
	if _, ok := basic.Ratios[variantGateOn][keyPhaseStartOffset]; ok {
		t.Errorf("a ratio of the phase start offsets: %v", basic.Ratios[variantGateOn])
	}
	if _, ok := basic.PairedRatios[variantGateOn]["barrier_held"]; ok {
		t.Errorf("paired ratios of the barrier's hold: %v", basic.PairedRatios[variantGateOn])
	}
	// How the variants of a round ran.
	if !strings.Contains(md, "The variants of a workload ran one after the other in each round.") {
		t.Errorf("markdown does not say that the variants ran one after the other:\n%s", md)
	}
	r.Together = true
	if together := r.markdown(); !strings.Contains(together, "The variants of a workload ran at the same time in each round") || strings.Contains(together, "one after the other") {
		t.Errorf("markdown of -together does not say that the variants ran at the same time:\n%s", together)
	}
	// Every table row has as many cells as its header.
	for _, block := range strings.Split(md, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if !strings.HasPrefix(lines[0], "|") {
			continue
		}
		cells := strings.Count(lines[0], "|")
		for _, l := range lines[1:] {
			if strings.Count(strings.ReplaceAll(l, "\\|", ""), "|") != cells {
				t.Errorf("row %q has not the %d separators of its header %q", l, cells, lines[0])
			}
		}
	}
}

func TestRunReport(t *testing.T) {
	dir := t.TempDir()
	md, js := filepath.Join(dir, "results.md"), filepath.Join(dir, "results.json")
	if err := runReport([]string{"-raw", "testdata/raw", "-md", md, "-json", js, "-meta", "machine=2 CPUs", "-meta", "command=make bench"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| machine | 2 CPUs |\n| command | make bench |\n") {
		t.Errorf("the meta data are not at the top, in order:\n%s", b)
	}
	var r report
	b, err = os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Workloads) != 3 || r.Workloads[0].Variants[variantGateOn]["throughput"].Median != 85 || len(r.Workloads[0].Variants[variantGateOn]["throughput"].Values) != 3 {
		t.Errorf("JSON summary: %+v", r.Workloads)
	}

	if err := runReport([]string{"-raw", t.TempDir(), "-md", md, "-json", js}); err == nil || !strings.Contains(err.Error(), "no result files") {
		t.Errorf("a directory without results: got error %v", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(filepath.Join(bad, "gate-on"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "gate-on", "x.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runReport([]string{"-raw", bad, "-md", md, "-json", js}); err == nil || !strings.Contains(err.Error(), "round-") {
		t.Errorf("a file outside <variant>/round-<n>: got error %v", err)
	}
}

func TestFormatStats(t *testing.T) {
	for _, tc := range []struct {
		s     stats
		limit float64
		want  string
	}{
		{newStats([]float64{0.5, 0.25, 1}), 0, "0.50 [0.25-1.00]"},
		{newStats([]float64{12.34, 10, 15}), 0, "12.3 [10.0-15.0]"},
		{newStats([]float64{150, 204.8, 204.8}), extensionPointCap, ">=205 [150->=205]"},
	} {
		if got := formatStats(tc.s, tc.limit); got != tc.want {
			t.Errorf("formatStats(%+v, %v) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
	}
}
