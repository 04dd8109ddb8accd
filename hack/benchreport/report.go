package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Variants, in the order the report shows them.
const (
	variantUpstream = "upstream"
	variantGateOff  = "gate-off"
	variantGateOn   = "gate-on"
)

var variantTitles = map[string]string{
	variantUpstream: "upstream",
	variantGateOff:  "patched, gate off",
	variantGateOn:   "patched, gate on",
}

// dataItems is the JSON file scheduler_perf writes (its DataItems type).
type dataItems struct {
	Version   string     `json:"version"`
	DataItems []dataItem `json:"dataItems"`
}

type dataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels,omitempty"`
}

// measure is one row of a workload's table: a bucket of the data item that
// match selects.
type measure struct {
	Key, Title, Unit string
	// HigherIsBetter: throughput; latencies are better lower.
	HigherIsBetter bool
	Metric         string
	Labels         map[string]string
	Bucket         string
	// Cap is the upper bound of the histogram's last finite bucket (0: none):
	// a percentile there only says that it is at least that.
	Cap float64
}

// extensionPointCap: scheduler_framework_extension_point_duration_seconds
// has buckets of 0.1 ms * 2^i up to 204.8 ms.
const extensionPointCap = 204.8

const (
	metricThroughput = "SchedulingThroughput"
	metricDuration   = "SchedulingDuration"
	metricExtension  = "scheduler_framework_extension_point_duration_seconds"
	metricGoroutines = "scheduler_preemption_goroutines_duration_seconds"
)

var measures = []measure{
	{Key: "throughput", Title: "scheduling throughput", Unit: "pods/s", HigherIsBetter: true, Metric: metricThroughput, Bucket: "Average"},
	{Key: "duration", Title: "measured phase duration", Unit: "s", Metric: metricDuration, Bucket: "Duration"},
	{Key: "postfilter_p50", Title: "PostFilter p50", Unit: "ms", Metric: metricExtension, Labels: map[string]string{"extension_point": "PostFilter"}, Bucket: "Perc50", Cap: extensionPointCap},
	{Key: "postfilter_p90", Title: "PostFilter p90", Unit: "ms", Metric: metricExtension, Labels: map[string]string{"extension_point": "PostFilter"}, Bucket: "Perc90", Cap: extensionPointCap},
	{Key: "postfilter_p99", Title: "PostFilter p99", Unit: "ms", Metric: metricExtension, Labels: map[string]string{"extension_point": "PostFilter"}, Bucket: "Perc99", Cap: extensionPointCap},
	{Key: "goroutine_p50", Title: "preemption goroutine p50", Unit: "ms", Metric: metricGoroutines, Labels: map[string]string{"result": "success"}, Bucket: "Perc50"},
	{Key: "goroutine_p90", Title: "preemption goroutine p90", Unit: "ms", Metric: metricGoroutines, Labels: map[string]string{"result": "success"}, Bucket: "Perc90"},
	{Key: "goroutine_p99", Title: "preemption goroutine p99", Unit: "ms", Metric: metricGoroutines, Labels: map[string]string{"result": "success"}, Bucket: "Perc99"},
}

func (m measure) matches(item dataItem) bool {
	if item.Labels["Metric"] != m.Metric {
		return false
	}
	for k, v := range m.Labels {
		if item.Labels[k] != v {
			return false
		}
	}
	_, ok := item.Data[m.Bucket]
	return ok
}

// stats summarises the values of one measure over the rounds.
type stats struct {
	N      int       `json:"n"`
	Min    float64   `json:"min"`
	Median float64   `json:"median"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
}

func newStats(values []float64) stats {
	v := slices.Clone(values)
	sort.Float64s(v)
	s := stats{N: len(v), Values: values}
	if len(v) == 0 {
		return s
	}
	s.Min, s.Max = v[0], v[len(v)-1]
	if len(v)%2 == 1 {
		s.Median = v[len(v)/2]
	} else {
		s.Median = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return s
}

// workloadResult is everything the report says about one workload.
type workloadResult struct {
	Name string `json:"name"`
	// Baseline is the variant the ratios divide by: upstream, or the
	// patched tree with the gate off for workloads upstream does not have.
	Baseline string `json:"baseline"`
	// Variants -> measure key -> stats over the rounds.
	Variants map[string]map[string]stats `json:"variants"`
	// Variant -> measure key -> median of the variant / median of the baseline.
	Ratios map[string]map[string]float64 `json:"ratios"`
}

type goal struct {
	Workload string  `json:"workload"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Ratio    float64 `json:"ratio"`
	Met      bool    `json:"met"`
}

type report struct {
	Meta      []metaEntry      `json:"meta"`
	Workloads []workloadResult `json:"workloads"`
	Goals     []goal           `json:"goals"`
}

type metaEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func runReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	raw := fs.String("raw", "", "directory with <variant>/round-<n>/*.json from scheduler_perf")
	md := fs.String("md", "", "markdown file to write")
	js := fs.String("json", "", "JSON summary to write")
	var meta stringList
	fs.Var(&meta, "meta", "KEY=VALUE shown at the top of the report, in order (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *raw == "" || *md == "" || *js == "" || fs.NArg() != 0 {
		return errors.New("usage: benchreport report -raw DIR -md FILE -json FILE [-meta KEY=VALUE]...")
	}
	r, err := buildReport(*raw)
	if err != nil {
		return err
	}
	for _, kv := range meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-meta %q: want KEY=VALUE", kv)
		}
		r.Meta = append(r.Meta, metaEntry{Key: k, Value: v})
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(*js, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(*md, []byte(r.markdown()), 0o644)
}

// buildReport reads dir/<variant>/round-<n>/*.json.
func buildReport(dir string) (*report, error) {
	// workload -> variant -> measure -> values, one per run.
	values := map[string]map[string]map[string][]float64{}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".json") {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 3 || !strings.HasPrefix(parts[1], "round-") {
			return fmt.Errorf("%s: want <variant>/round-<n>/<file>.json under %s", rel, dir)
		}
		if _, err := strconv.Atoi(strings.TrimPrefix(parts[1], "round-")); err != nil {
			return fmt.Errorf("%s: round is not a number", rel)
		}
		variant := parts[0]
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var items dataItems
		if err := json.Unmarshal(b, &items); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		files++
		for _, item := range items.DataItems {
			name := workloadName(item.Labels["Name"])
			if name == "" {
				continue
			}
			for _, m := range measures {
				if !m.matches(item) {
					continue
				}
				if values[name] == nil {
					values[name] = map[string]map[string][]float64{}
				}
				if values[name][variant] == nil {
					values[name][variant] = map[string][]float64{}
				}
				values[name][variant][m.Key] = append(values[name][variant][m.Key], item.Data[m.Bucket])
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if files == 0 {
		return nil, fmt.Errorf("no result files under %s", dir)
	}

	r := &report{}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w := workloadResult{Name: name, Variants: map[string]map[string]stats{}, Ratios: map[string]map[string]float64{}}
		for variant, byMeasure := range values[name] {
			w.Variants[variant] = map[string]stats{}
			for key, v := range byMeasure {
				w.Variants[variant][key] = newStats(v)
			}
		}
		w.Baseline = variantUpstream
		if _, ok := w.Variants[variantUpstream]; !ok {
			w.Baseline = variantGateOff
		}
		if base, ok := w.Variants[w.Baseline]; ok {
			for variant, byMeasure := range w.Variants {
				if variant == w.Baseline {
					continue
				}
				for key, s := range byMeasure {
					if b, ok := base[key]; ok && b.N > 0 && b.Median != 0 && s.N > 0 {
						if w.Ratios[variant] == nil {
							w.Ratios[variant] = map[string]float64{}
						}
						w.Ratios[variant][key] = s.Median / b.Median
					}
				}
			}
		}
		r.Workloads = append(r.Workloads, w)
		r.Goals = append(r.Goals, goals(w)...)
	}
	return r, nil
}

// workloadName turns the Name label of a data item,
// "BenchmarkPerfScheduling/<test case>/<workload>/<collection>", into
// "<test case>/<workload>".
func workloadName(label string) string {
	parts := strings.Split(label, "/")
	if len(parts) > 0 && strings.HasPrefix(parts[0], "BenchmarkPerfScheduling") {
		parts = parts[1:]
	}
	if len(parts) < 2 {
		return ""
	}
	if len(parts) > 2 {
		parts = parts[:len(parts)-1]
	}
	return strings.Join(parts, "/")
}

// goals evaluates the goals for a workload: gate off like upstream
// within noise, gate on at least 0.95x the baseline's throughput, and at
// most 10% more p99 preemption goroutine latency with eviction-based victim
// removal (gate on) than with DELETE (the baseline: upstream, or the gate
// off for the workloads upstream does not have).
//
// Throughput is judged on the measured phase: every variant schedules (or,
// below the threshold, attempts) the same pods in it, so their pods per
// second compare as the inverse of the phase's duration. scheduler_perf's
// SchedulingThroughput, an average of 1 s samples that the bursts of
// bindings after a round of preemptions dominate, is shown next to it.
func goals(w workloadResult) []goal {
	var gs []goal
	base := w.Baseline
	baseTitle := title(base)
	if base == variantGateOff {
		baseTitle = "gate off"
	}
	phase := func(variant string) (stats, bool) {
		s, ok := w.Variants[variant]["duration"]
		return s, ok && s.N > 0 && s.Median > 0
	}
	average := func(variant string) string {
		if r, ok := w.Ratios[variant]["throughput"]; ok {
			return fmt.Sprintf("; SchedulingThroughput average %.2fx", r)
		}
		return ""
	}
	if b, ok := phase(base); ok {
		if off, ok := phase(variantGateOff); ok && base == variantUpstream {
			ratio := b.Median / off.Median
			gs = append(gs, goal{
				Workload: w.Name,
				Goal:     "gate off: 1.00x upstream throughput within noise (phase duration median inside upstream's min-max)",
				Measured: fmt.Sprintf("%.2fx (phase %.1f s vs %.1f-%.1f s)%s", ratio, off.Median, b.Min, b.Max, average(variantGateOff)),
				Ratio:    ratio,
				Met:      off.Median >= b.Min && off.Median <= b.Max,
			})
		}
		if on, ok := phase(variantGateOn); ok {
			ratio := b.Median / on.Median
			gs = append(gs, goal{
				Workload: w.Name,
				Goal:     fmt.Sprintf("gate on: >= 0.95x %s throughput (pods per second of the measured phase)", baseTitle),
				Measured: fmt.Sprintf("%.2fx (phase %.1f s vs %.1f s)%s", ratio, on.Median, b.Median, average(variantGateOn)),
				Ratio:    ratio,
				Met:      ratio >= 0.95,
			})
		}
	}
	b := w.Variants[base]
	if on, ok := w.Variants[variantGateOn]["goroutine_p99"]; ok && b["goroutine_p99"].N > 0 && b["goroutine_p99"].Median > 0 {
		ratio := on.Median / b["goroutine_p99"].Median
		vsOff := ""
		if r, ok := w.Ratios[variantGateOff]["goroutine_p99"]; ok && r > 0 && base == variantUpstream {
			vsOff = fmt.Sprintf("; %.2fx gate off (DELETE, same binary)", ratio/r)
		}
		gs = append(gs, goal{
			Workload: w.Name,
			Goal:     fmt.Sprintf("gate on (eviction): <= 1.10x %s (DELETE) p99 preemption goroutine latency", baseTitle),
			Measured: fmt.Sprintf("%.2fx (%.0f vs %.0f ms)%s", ratio, on.Median, b["goroutine_p99"].Median, vsOff),
			Ratio:    ratio,
			Met:      ratio <= 1.10,
		})
	}
	return gs
}

func orderedVariants(w workloadResult) []string {
	var vs []string
	for _, v := range []string{variantUpstream, variantGateOff, variantGateOn} {
		if _, ok := w.Variants[v]; ok {
			vs = append(vs, v)
		}
	}
	var others []string
	for v := range w.Variants {
		if !slices.Contains(vs, v) {
			others = append(others, v)
		}
	}
	sort.Strings(others)
	return append(vs, others...)
}

func title(variant string) string {
	if t, ok := variantTitles[variant]; ok {
		return t
	}
	return variant
}

// decimals is the number of decimals the report shows for v: 3 significant
// digits, at most 2 decimals.
func decimals(v float64) int {
	switch {
	case math.Abs(v) >= 100:
		return 0
	case math.Abs(v) >= 10:
		return 1
	default:
		return 2
	}
}

// formatStats: "median [min-max]", all with the precision of the median;
// values at the cap of the histogram get a ">=".
func formatStats(s stats, limit float64) string {
	d := decimals(s.Median)
	f := func(v float64) string {
		out := strconv.FormatFloat(v, 'f', d, 64)
		if limit > 0 && v >= limit {
			out = ">=" + out
		}
		return out
	}
	return fmt.Sprintf("%s [%s-%s]", f(s.Median), f(s.Min), f(s.Max))
}

func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("# Scheduler preemption benchmarks: patched vs pristine upstream\n\n")
	b.WriteString("Written by `make bench` (`hack/make-rules/bench.sh`, `hack/benchreport`); do not edit.\n\n")
	if len(r.Meta) > 0 {
		b.WriteString("| | |\n|---|---|\n")
		for _, m := range r.Meta {
			fmt.Fprintf(&b, "| %s | %s |\n", m.Key, strings.ReplaceAll(m.Value, "|", "\\|"))
		}
		b.WriteString("\n")
	}
	b.WriteString("Every cell is the median over the rounds, with the minimum and maximum in brackets. ")
	b.WriteString("Throughput is scheduler_perf's `SchedulingThroughput` average of a run (pods/s, the mean of 1 s samples); ")
	b.WriteString("the measured phase duration is its `SchedulingDuration`, from the creation of the measured pods until the last is scheduled ")
	b.WriteString("(or, for PreemptionProtectedBelowThreshold, attempted), so that its inverse is the phase's pods per second; ")
	b.WriteString("latencies are the percentiles, in ms, ")
	b.WriteString("of the scheduler's histograms `scheduler_framework_extension_point_duration_seconds{extension_point=\"PostFilter\"}` ")
	b.WriteString("and `scheduler_preemption_goroutines_duration_seconds{result=\"success\"}` over the measured phase of a run, ")
	b.WriteString("interpolated within histogram buckets: the buckets grow by 2x (PostFilter from 0.1 ms up to 204.8 ms, so \">=205\" only says that the percentile is above the last bucket; the goroutine duration from 10 ms), so a ratio of 2x can be one bucket. ")
	b.WriteString("Ratios divide medians by the baseline's: upstream, or the patched tree with the gate off for workloads upstream does not have. ")
	b.WriteString("How the workloads are chosen, and where the time goes (pprof), is in [docs/benchmarks.md](../docs/benchmarks.md).\n\n")

	if len(r.Goals) > 0 {
		b.WriteString("## Goals\n\n| workload | goal | measured | met |\n|---|---|---|---|\n")
		for _, g := range r.Goals {
			met := "yes"
			if !g.Met {
				met = "**no**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Workload, g.Goal, g.Measured, met)
		}
		b.WriteString("\n")
	}

	for _, w := range r.Workloads {
		fmt.Fprintf(&b, "## %s\n\n", w.Name)
		vs := orderedVariants(w)
		b.WriteString("| measure |")
		for _, v := range vs {
			fmt.Fprintf(&b, " %s |", title(v))
		}
		for _, v := range vs {
			if v != w.Baseline {
				fmt.Fprintf(&b, " %s / %s |", title(v), title(w.Baseline))
			}
		}
		b.WriteString("\n|---|")
		for _, v := range vs {
			b.WriteString("---|")
			if v != w.Baseline {
				b.WriteString("---|")
			}
		}
		b.WriteString("\n")
		for _, m := range measures {
			present := false
			for _, v := range vs {
				if w.Variants[v][m.Key].N > 0 {
					present = true
				}
			}
			if !present {
				continue
			}
			fmt.Fprintf(&b, "| %s (%s) |", m.Title, m.Unit)
			for _, v := range vs {
				s, ok := w.Variants[v][m.Key]
				if !ok || s.N == 0 {
					b.WriteString(" - |")
					continue
				}
				fmt.Fprintf(&b, " %s |", formatStats(s, m.Cap))
			}
			for _, v := range vs {
				if v == w.Baseline {
					continue
				}
				if ratio, ok := w.Ratios[v][m.Key]; ok {
					fmt.Fprintf(&b, " %.2fx |", ratio)
				} else {
					b.WriteString(" - |")
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\nRuns: ")
		var runs []string
		for _, v := range vs {
			runs = append(runs, fmt.Sprintf("%s %d", title(v), w.Variants[v]["throughput"].N))
		}
		b.WriteString(strings.Join(runs, ", "))
		b.WriteString(".\n\n")
	}
	return b.String()
}
