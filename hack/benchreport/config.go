package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// benchLabel is the only label of the workloads `config` writes, so that
// `-perf-scheduling-label-filter=bench` runs exactly them.
const benchLabel = "bench"

// collectedMetrics replaces scheduler_perf's default metricsCollectorConfig
// in the configs `config -collect-metrics` writes: the histograms the report
// reads, among them the preemption goroutine duration, which scheduler_perf
// does not collect by default. Every variant gets the same.
var collectedMetrics = map[string]any{
	"metrics": map[string]any{
		"scheduler_framework_extension_point_duration_seconds": []any{
			map[string]any{"label": "extension_point", "values": []any{"Filter", "PostFilter", "Bind"}},
		},
		"scheduler_scheduling_attempt_duration_seconds": []any{
			map[string]any{"label": "result", "values": []any{"scheduled", "unschedulable", "error"}},
		},
		"scheduler_preemption_goroutines_duration_seconds": []any{
			map[string]any{"label": "result", "values": []any{"success", "error"}},
		},
	},
}

// selection is one workload of the generated config: workload Base of test
// case TestCase, renamed to Name, with Params overriding its parameters and
// Gates its feature gates.
type selection struct {
	TestCase, Name, Base string
	Params               map[string]any
	Gates                []featureGate
}

// parseSelection parses TESTCASE/WORKLOAD[@GATE=BOOL,...] or
// TESTCASE/NAME=BASE[:KEY=VALUE,...][@GATE=BOOL,...].
func parseSelection(s string) (selection, error) {
	spec, gates, withGates := strings.Cut(s, "@")
	tc, rest, ok := strings.Cut(spec, "/")
	if !ok || tc == "" || rest == "" || (withGates && gates == "") {
		return selection{}, fmt.Errorf("selection %q: want TESTCASE/WORKLOAD or TESTCASE/NAME=BASE[:KEY=VALUE,...], then optionally @GATE=BOOL,...", s)
	}
	sel := selection{TestCase: tc, Params: map[string]any{}}
	if withGates {
		for _, g := range strings.Split(gates, ",") {
			fg, err := parseFeatureGate(g)
			if err != nil {
				return selection{}, fmt.Errorf("selection %q: %w", s, err)
			}
			if fg.Value == nil {
				return selection{}, fmt.Errorf("selection %q: a workload's gate must be true or false", s)
			}
			sel.Gates = append(sel.Gates, fg)
		}
	}
	name, base, renamed := strings.Cut(rest, "=")
	if !renamed {
		sel.Name, sel.Base = rest, rest
		return sel, nil
	}
	base, params, _ := strings.Cut(base, ":")
	sel.Name, sel.Base = name, base
	if name == "" || base == "" {
		return selection{}, fmt.Errorf("selection %q: empty workload name", s)
	}
	if params != "" {
		for _, kv := range strings.Split(params, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return selection{}, fmt.Errorf("selection %q: parameter %q is not KEY=VALUE", s, kv)
			}
			// Numbers as numbers (scheduler_perf reads counts as float64), anything else as a string.
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				sel.Params[k] = f
			} else {
				sel.Params[k] = v
			}
		}
	}
	return sel, nil
}

// featureGate is NAME=true|false, or NAME=unset to remove the gate from the
// test case and its workloads (for a binary that does not know it).
type featureGate struct {
	Name  string
	Value *bool
}

func parseFeatureGate(s string) (featureGate, error) {
	name, v, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return featureGate{}, fmt.Errorf("feature gate %q: want NAME=true|false|unset", s)
	}
	switch v {
	case "unset":
		return featureGate{Name: name}, nil
	case "true", "false":
		b := v == "true"
		return featureGate{Name: name, Value: &b}, nil
	}
	return featureGate{}, fmt.Errorf("feature gate %q: want NAME=true|false|unset", s)
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func runConfig(args []string) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	in := fs.String("in", "", "scheduler_perf performance-config.yaml to read")
	out := fs.String("out", "", "file to write")
	collect := fs.Bool("collect-metrics", false, "set the metricsCollectorConfig the report needs on every selected test case")
	fallback := fs.String("fallback", "", "scheduler_perf config whose test cases are used for the selections SRC does not have (a workload the patches add, run by upstream too)")
	podsOut := fs.String("pods-out", "", "file to write the number of measured pods of every selected workload to, a line \"TESTCASE/NAME COUNT\" each")
	barrier := fs.String("barrier", "", "insert a barrier before the measured part of every selected workload: a CPU profile of this name (in the data items directory) started and stopped at once, then a sleep of -barrier-sleep, during which `run -barrier-dir` holds the process until the other runs of the round get there")
	barrierSleep := fs.Duration("barrier-sleep", 3*time.Second, "the sleep after the barrier's profile")
	var gates stringList
	fs.Var(&gates, "feature-gate", "NAME=true|false sets a feature gate on every selected workload, NAME=unset removes it (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() == 0 {
		return errors.New("usage: benchreport config -in SRC -out DST [-fallback SRC2] [-pods-out FILE] [-collect-metrics] [-barrier FILE [-barrier-sleep DURATION]] [-feature-gate NAME=true|false|unset]... SELECTION...")
	}
	if *barrier != "" && (strings.HasSuffix(*barrier, cpuProfileSuffix) || strings.ContainsRune(*barrier, '/')) {
		return fmt.Errorf("-barrier %q: want a file name without a directory, not ending in %s (the measured phase's profile)", *barrier, cpuProfileSuffix)
	}
	if *barrierSleep <= 0 {
		return fmt.Errorf("-barrier-sleep %v: want a positive duration", *barrierSleep)
	}
	var sels []selection
	for _, a := range fs.Args() {
		sel, err := parseSelection(a)
		if err != nil {
			return err
		}
		sels = append(sels, sel)
	}
	var fgs []featureGate
	for _, g := range gates {
		fg, err := parseFeatureGate(g)
		if err != nil {
			return err
		}
		fgs = append(fgs, fg)
	}
	src, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	if *fallback != "" {
		fb, err := os.ReadFile(*fallback)
		if err != nil {
			return err
		}
		if src, err = withFallback(src, fb, sels); err != nil {
			return fmt.Errorf("%s, %s: %w", *in, *fallback, err)
		}
	}
	var b *barrierOps
	if *barrier != "" {
		b = &barrierOps{File: *barrier, Sleep: *barrierSleep}
	}
	dst, err := generateConfig(src, sels, fgs, *collect, b)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	header := fmt.Sprintf("# Generated by hack/benchreport config from %s; do not edit.\n", *in)
	if *fallback != "" {
		header = fmt.Sprintf("# Generated by hack/benchreport config from %s and, for the test cases it lacks, %s; do not edit.\n", *in, *fallback)
	}
	if err := os.WriteFile(*out, append([]byte(header), dst...), 0o644); err != nil {
		return err
	}
	if *podsOut == "" {
		return nil
	}
	counts, err := measuredPods(dst)
	if err != nil {
		return fmt.Errorf("%s: %w", *out, err)
	}
	return os.WriteFile(*podsOut, []byte(counts), 0o644)
}

// withFallback returns src with the test cases of fallback that sels
// select and src does not have.
func withFallback(src, fallback []byte, sels []selection) ([]byte, error) {
	var testCases, fallbackCases []map[string]any
	if err := yaml.Unmarshal(src, &testCases); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(fallback, &fallbackCases); err != nil {
		return nil, err
	}
	has := map[string]bool{}
	for _, tc := range testCases {
		name, _ := tc["name"].(string)
		has[name] = true
	}
	for _, sel := range sels {
		if has[sel.TestCase] {
			continue
		}
		for _, tc := range fallbackCases {
			if tc["name"] == sel.TestCase {
				testCases = append(testCases, tc)
				has[sel.TestCase] = true
				break
			}
		}
	}
	return yaml.Marshal(testCases)
}

// measuredPods returns "TESTCASE/NAME COUNT" for every workload of a
// generated config: the pods its createPods operations create with
// collectMetrics, or between startCollectingMetrics and
// stopCollectingMetrics, that is the pods whose scheduling the measured
// phase measures.
func measuredPods(config []byte) (string, error) {
	var testCases []map[string]any
	if err := yaml.Unmarshal(config, &testCases); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, tc := range testCases {
		tcName, _ := tc["name"].(string)
		ops, _ := tc["workloadTemplate"].([]any)
		ws, _ := tc["workloads"].([]any)
		for _, w := range ws {
			wm, _ := w.(map[string]any)
			params, _ := wm["params"].(map[string]any)
			count := 0
			collecting := false
			for _, op := range ops {
				om, _ := op.(map[string]any)
				switch om["opcode"] {
				case "startCollectingMetrics":
					collecting = true
				case "stopCollectingMetrics":
					collecting = false
				case "createPods":
					if om["collectMetrics"] != true && !collecting {
						continue
					}
					n, err := opCount(om, params)
					if err != nil {
						return "", fmt.Errorf("%s/%v: %w", tcName, wm["name"], err)
					}
					count += n
				}
			}
			if count == 0 {
				return "", fmt.Errorf("%s/%v measures no pods", tcName, wm["name"])
			}
			fmt.Fprintf(&b, "%s/%v %d\n", tcName, wm["name"], count)
		}
	}
	return b.String(), nil
}

// opCount returns the count of an operation: count, or countParam
// ("$name") looked up in the workload's parameters.
func opCount(op, params map[string]any) (int, error) {
	if c, ok := op["count"].(float64); ok {
		return int(c), nil
	}
	name, _ := op["countParam"].(string)
	if !strings.HasPrefix(name, "$") {
		return 0, fmt.Errorf("an operation without count or countParam")
	}
	v, ok := params[strings.TrimPrefix(name, "$")].(float64)
	if !ok {
		return 0, fmt.Errorf("no parameter %s", name)
	}
	return int(v), nil
}

// barrierOps are the operations `config -barrier` inserts before the
// measured part of a workload: a CPU profile named File, started and
// stopped at once (upstream's startCollectingProfile and
// stopCollectingProfile: its close tells `run` that the setup is done),
// then a sleep of Sleep, long enough for `run` to stop the process before
// the sleep ends: a process held longer than Sleep finds the sleep over
// when it continues, so that the runs `run` releases at once start their
// measured parts at once.
type barrierOps struct {
	File  string
	Sleep time.Duration
}

func (b *barrierOps) ops() []any {
	return []any{
		map[string]any{"opcode": "startCollectingProfile", "type": "CPU", "filePath": b.File},
		map[string]any{"opcode": "stopCollectingProfile", "type": "CPU"},
		map[string]any{"opcode": "sleep", "duration": b.Sleep.String()},
	}
}

// insertBarrier returns ops with b's operations before the measured part:
// before the first operation that collects metrics (createPods with
// collectMetrics, startCollectingMetrics), and before the churn operations
// right before it, which keep creating objects while the phase runs.
func insertBarrier(ops []any, b *barrierOps) ([]any, error) {
	at := -1
	for i, op := range ops {
		om, _ := op.(map[string]any)
		if om["opcode"] == "startCollectingMetrics" || (om["opcode"] == "createPods" && om["collectMetrics"] == true) {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, errors.New("no operation collects metrics: nowhere to put the barrier")
	}
	for at > 0 {
		om, _ := ops[at-1].(map[string]any)
		if om["opcode"] != "churn" {
			break
		}
		at--
	}
	out := append([]any{}, ops[:at]...)
	out = append(out, b.ops()...)
	return append(out, ops[at:]...), nil
}

// generateConfig returns the test cases of src that sels select, each with
// only the selected workloads, labelled benchLabel, without thresholds (the
// machine is not upstream's CI), with the feature gates fgs applied and,
// where b is not nil, b's barrier inserted.
func generateConfig(src []byte, sels []selection, fgs []featureGate, collect bool, b *barrierOps) ([]byte, error) {
	var testCases []map[string]any
	if err := yaml.Unmarshal(src, &testCases); err != nil {
		return nil, err
	}
	var result []map[string]any
	used := make([]bool, len(sels))
	for _, tc := range testCases {
		tcName, _ := tc["name"].(string)
		var workloads []any
		for i, sel := range sels {
			if sel.TestCase != tcName {
				continue
			}
			used[i] = true
			base, err := findWorkload(tc, sel.Base)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", tcName, err)
			}
			w := deepCopy(base)
			w["name"] = sel.Name
			for _, fg := range sel.Gates {
				applyFeatureGate(map[string]any{"workloads": []any{w}}, fg)
			}
			w["labels"] = []any{benchLabel}
			delete(w, "threshold")
			delete(w, "thresholdMetricSelector")
			if len(sel.Params) > 0 {
				params, _ := w["params"].(map[string]any)
				if params == nil {
					params = map[string]any{}
				}
				for k, v := range sel.Params {
					if _, ok := params[k]; !ok {
						return nil, fmt.Errorf("%s/%s has no parameter %q", tcName, sel.Base, k)
					}
					params[k] = v
				}
				w["params"] = params
			}
			workloads = append(workloads, w)
		}
		if len(workloads) == 0 {
			continue
		}
		out := deepCopy(tc)
		out["workloads"] = workloads
		delete(out, "labels")
		delete(out, "defaultThresholdMetricSelector")
		if collect {
			out["metricsCollectorConfig"] = deepCopy(collectedMetrics)
		}
		for _, fg := range fgs {
			applyFeatureGate(out, fg)
		}
		if b != nil {
			ops, _ := out["workloadTemplate"].([]any)
			withBarrier, err := insertBarrier(ops, b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", tcName, err)
			}
			out["workloadTemplate"] = withBarrier
		}
		result = append(result, out)
	}
	for i, sel := range sels {
		if !used[i] {
			return nil, fmt.Errorf("no test case %q", sel.TestCase)
		}
	}
	return yaml.Marshal(result)
}

func findWorkload(tc map[string]any, name string) (map[string]any, error) {
	ws, _ := tc["workloads"].([]any)
	for _, w := range ws {
		if m, ok := w.(map[string]any); ok && m["name"] == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no workload %q", name)
}

// applyFeatureGate sets fg on every workload of tc (a workload's gates
// override its test case's), or removes it from tc and its workloads.
func applyFeatureGate(tc map[string]any, fg featureGate) {
	setIn := func(m map[string]any) {
		gates, _ := m["featureGates"].(map[string]any)
		if fg.Value == nil {
			if gates != nil {
				delete(gates, fg.Name)
				if len(gates) == 0 {
					delete(m, "featureGates")
				}
			}
			return
		}
		if gates == nil {
			gates = map[string]any{}
			m["featureGates"] = gates
		}
		gates[fg.Name] = *fg.Value
	}
	if fg.Value == nil {
		setIn(tc)
	}
	ws, _ := tc["workloads"].([]any)
	for _, w := range ws {
		if m, ok := w.(map[string]any); ok {
			setIn(m)
		}
	}
}

// deepCopy copies JSON-like data through JSON.
func deepCopy[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
