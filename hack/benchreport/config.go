package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

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
	var gates stringList
	fs.Var(&gates, "feature-gate", "NAME=true|false sets a feature gate on every selected workload, NAME=unset removes it (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() == 0 {
		return errors.New("usage: benchreport config -in SRC -out DST [-collect-metrics] [-feature-gate NAME=true|false|unset]... SELECTION...")
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
	dst, err := generateConfig(src, sels, fgs, *collect)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	header := fmt.Sprintf("# Generated by hack/benchreport config from %s; do not edit.\n", *in)
	return os.WriteFile(*out, append([]byte(header), dst...), 0o644)
}

// generateConfig returns the test cases of src that sels select, each with
// only the selected workloads, labelled benchLabel, without thresholds (the
// machine is not upstream's CI), with the feature gates fgs applied.
func generateConfig(src []byte, sels []selection, fgs []featureGate, collect bool) ([]byte, error) {
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
