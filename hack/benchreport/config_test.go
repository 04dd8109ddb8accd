package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestParseSelection(t *testing.T) {
	sel, err := parseSelection("PreemptionBasic/250Nodes=1000Nodes:initNodes=250,measurePods=250,mode=fast")
	if err != nil {
		t.Fatal(err)
	}
	if sel.TestCase != "PreemptionBasic" || sel.Name != "250Nodes" || sel.Base != "1000Nodes" ||
		sel.Params["initNodes"] != 250.0 || sel.Params["measurePods"] != 250.0 || sel.Params["mode"] != "fast" || len(sel.Params) != 3 {
		t.Errorf("got %+v", sel)
	}
	sel, err = parseSelection("PreemptionAsync/500Nodes")
	if err != nil || sel.Name != "500Nodes" || sel.Base != "500Nodes" || len(sel.Params) != 0 || len(sel.Gates) != 0 {
		t.Errorf("got %+v, %v", sel, err)
	}
	sel, err = parseSelection("PreemptionBasic/250Nodes_Sync=1000Nodes:initNodes=250@SchedulerAsyncPreemption=false,B=true")
	if err != nil || sel.Name != "250Nodes_Sync" || sel.Params["initNodes"] != 250.0 || len(sel.Gates) != 2 ||
		sel.Gates[0].Name != "SchedulerAsyncPreemption" || *sel.Gates[0].Value || sel.Gates[1].Name != "B" || !*sel.Gates[1].Value {
		t.Errorf("got %+v, %v", sel, err)
	}
	for _, bad := range []string{"PreemptionBasic", "/5Nodes", "PreemptionBasic/", "A/=B", "A/B=C:x", "A/B=C:=1", "A/B@", "A/B@G=unset", "A/B@G"} {
		if _, err := parseSelection(bad); err == nil {
			t.Errorf("parseSelection(%q) succeeded", bad)
		}
	}
}

func TestGenerateConfig(t *testing.T) {
	src, err := os.ReadFile("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	async := false
	sels := []selection{
		{TestCase: "PreemptionBasic", Name: "250Nodes", Base: "1000Nodes", Params: map[string]any{"initNodes": 250.0, "measurePods": 250.0},
			Gates: []featureGate{{Name: "SchedulerAsyncPreemption", Value: &async}}},
		{TestCase: "PreemptionProtected", Name: "200Nodes", Base: "200Nodes", Params: map[string]any{}},
	}
	off := false
	out, err := generateConfig(src, sels, []featureGate{{Name: "DisruptionPolicyInPriorityClass", Value: &off}}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got) != 2 || got[0]["name"] != "PreemptionBasic" || got[1]["name"] != "PreemptionProtected" {
		t.Fatalf("test cases: %s", out)
	}
	basic := got[0]["workloads"].([]any)
	if len(basic) != 1 {
		t.Fatalf("PreemptionBasic workloads: %v", basic)
	}
	w := basic[0].(map[string]any)
	params := w["params"].(map[string]any)
	gates := w["featureGates"].(map[string]any)
	if w["name"] != "250Nodes" || params["initNodes"] != 250.0 || params["measurePods"] != 250.0 ||
		len(w["labels"].([]any)) != 1 || w["labels"].([]any)[0] != benchLabel ||
		w["threshold"] != nil || gates["DisruptionPolicyInPriorityClass"] != false || gates["SchedulerAsyncAPICalls"] != false ||
		gates["SchedulerAsyncPreemption"] != false {
		t.Errorf("PreemptionBasic/250Nodes: %v", w)
	}
	if _, ok := got[0]["metricsCollectorConfig"].(map[string]any)["metrics"].(map[string]any)[metricGoroutines]; !ok {
		t.Errorf("the preemption goroutine duration is not collected: %v", got[0]["metricsCollectorConfig"])
	}
	// The workload's false overrides the test case's true; the test case's labels are gone.
	protected := got[1]
	pw := protected["workloads"].([]any)[0].(map[string]any)
	if pw["featureGates"].(map[string]any)["DisruptionPolicyInPriorityClass"] != false || protected["labels"] != nil {
		t.Errorf("PreemptionProtected: %v", protected)
	}

	// unset removes the gate everywhere, for a binary that does not know it.
	out, err = generateConfig(src, sels[1:], []featureGate{{Name: "DisruptionPolicyInPriorityClass"}}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "DisruptionPolicyInPriorityClass") || strings.Contains(string(out), "metricsCollectorConfig") {
		t.Errorf("unset gate or uncollected metrics still there:\n%s", out)
	}

	for _, bad := range []selection{
		{TestCase: "PreemptionBasic", Name: "x", Base: "1000Nodes", Params: map[string]any{"nodes": 1.0}},
		{TestCase: "PreemptionBasic", Name: "x", Base: "42Nodes"},
		{TestCase: "NoSuchCase", Name: "x", Base: "x"},
	} {
		if _, err := generateConfig(src, []selection{bad}, nil, false, nil); err == nil {
			t.Errorf("generateConfig with %+v succeeded", bad)
		}
	}
}

func TestParseFeatureGate(t *testing.T) {
	fg, err := parseFeatureGate("A=true")
	if err != nil || fg.Name != "A" || fg.Value == nil || !*fg.Value {
		t.Errorf("A=true: %+v %v", fg, err)
	}
	fg, err = parseFeatureGate("A=unset")
	if err != nil || fg.Value != nil {
		t.Errorf("A=unset: %+v %v", fg, err)
	}
	for _, bad := range []string{"A", "=true", "A=yes"} {
		if _, err := parseFeatureGate(bad); err == nil {
			t.Errorf("parseFeatureGate(%q) succeeded", bad)
		}
	}
}

func TestMeasuredPods(t *testing.T) {
	config := []byte(`
- name: Collect
  workloadTemplate:
  - opcode: createPods
    countParam: $initPods
  - opcode: createPods
    count: 7
    collectMetrics: true
  - opcode: startCollectingMetrics
  - opcode: createPods
    countParam: $preemptors
    skipWaitToCompletion: true
  - opcode: barrier
  - opcode: stopCollectingMetrics
  - opcode: createPods
    countParam: $initPods
  workloads:
  - name: A
    params: {initPods: 100, preemptors: 20}
  - name: B
    params: {initPods: 100, preemptors: 3}
- name: Nothing
  workloadTemplate:
  - opcode: createPods
    count: 3
  workloads:
  - name: C
`)
	if _, err := measuredPods(config); err == nil || !strings.Contains(err.Error(), "Nothing/C measures no pods") {
		t.Errorf("a workload without measured pods: got %v", err)
	}
	got, err := measuredPods(config[:strings.Index(string(config), "- name: Nothing")])
	if err != nil {
		t.Fatal(err)
	}
	if want := "Collect/A 27\nCollect/B 10\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestWithFallback(t *testing.T) {
	src := []byte("- name: A\n  workloads: [{name: x}]\n")
	fallback := []byte("- name: A\n  workloads: [{name: other}]\n- name: B\n  workloads: [{name: y}]\n- name: C\n  workloads: [{name: z}]\n")
	sels := []selection{{TestCase: "A", Name: "x", Base: "x"}, {TestCase: "B", Name: "y", Base: "y"}}
	merged, err := withFallback(src, fallback, sels)
	if err != nil {
		t.Fatal(err)
	}
	var tcs []map[string]any
	if err := yaml.Unmarshal(merged, &tcs); err != nil {
		t.Fatal(err)
	}
	if len(tcs) != 2 || tcs[0]["name"] != "A" || tcs[1]["name"] != "B" {
		t.Errorf("got %v; want A from the source (not the fallback's) and B from the fallback, not C", tcs)
	}
	if ws := tcs[0]["workloads"].([]any); ws[0].(map[string]any)["name"] != "x" {
		t.Errorf("A was taken from the fallback: %v", ws)
	}
}

func TestInsertBarrier(t *testing.T) {
	b := &barrierOps{File: "barrier.prof", Sleep: 3 * time.Second}
	op := func(opcode string, kv ...any) map[string]any {
		m := map[string]any{"opcode": opcode}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	opcodes := func(ops []any) []string {
		var s []string
		for _, o := range ops {
			s = append(s, o.(map[string]any)["opcode"].(string))
		}
		return s
	}
	for name, tc := range map[string]struct {
		ops  []any
		want []string
	}{
		// PreemptionAsync: the churn keeps creating preemptors during the
		// measured phase, so the barrier goes before it.
		"churn before the measured pods": {
			ops:  []any{op("createNodes"), op("createPods"), op("churn"), op("createPods", "collectMetrics", true)},
			want: []string{"createNodes", "createPods", "startCollectingProfile", "stopCollectingProfile", "sleep", "churn", "createPods"},
		},
		"startCollectingMetrics": {
			ops:  []any{op("createNodes"), op("updateAny"), op("startCollectingMetrics"), op("createPods"), op("barrier"), op("stopCollectingMetrics")},
			want: []string{"createNodes", "updateAny", "startCollectingProfile", "stopCollectingProfile", "sleep", "startCollectingMetrics", "createPods", "barrier", "stopCollectingMetrics"},
		},
		"only the first measured operation": {
			ops:  []any{op("createPods", "collectMetrics", true), op("createPods", "collectMetrics", true)},
			want: []string{"startCollectingProfile", "stopCollectingProfile", "sleep", "createPods", "createPods"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := insertBarrier(tc.ops, b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(opcodes(got), tc.want) {
				t.Errorf("got %v, want %v", opcodes(got), tc.want)
			}
			for _, o := range got {
				m := o.(map[string]any)
				switch m["opcode"] {
				case "startCollectingProfile":
					if m["filePath"] != "barrier.prof" || m["type"] != "CPU" {
						t.Errorf("profile op %v", m)
					}
				case "sleep":
					if m["duration"] != "3s" {
						t.Errorf("sleep op %v", m)
					}
				}
			}
		})
	}
	if _, err := insertBarrier([]any{op("createNodes"), op("createPods")}, b); err == nil {
		t.Error("a barrier was put in a workload that measures nothing")
	}
}
