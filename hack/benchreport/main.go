// Command benchreport is the Go half of `make bench`
// (hack/make-rules/bench.sh), which runs upstream's scheduler_perf on
// pristine upstream and on the patched tree with the KEP-3280 gate off and on:
//
//	benchreport config -in SRC -out DST [-collect-metrics] [-feature-gate NAME=true|false|unset]... SELECTION...
//
// writes a scheduler_perf config with the selected workloads of SRC
// (TESTCASE/WORKLOAD, or TESTCASE/NAME=BASE:KEY=VALUE,... for a copy of
// workload BASE with other parameters, either followed by @GATE=BOOL,... for
// feature gates of that workload), with the variant's feature gates and the
// metrics the report needs;
//
//	benchreport run -watch DIR -out FILE -name TESTCASE/NAME -pods N [-perf] -- COMMAND...
//
// runs one scheduler_perf benchmark (with -perf-cpuprofile) and writes the
// CPU time of its measured phase (process and descendants, from /proc when
// scheduler_perf creates and closes its CPU profile) and of the whole run
// (rusage), per measured pod, as a DataItems file;
//
//	benchreport report -raw DIR -md FILE -json FILE [-meta KEY=VALUE]...
//
// reads the DataItems JSON files scheduler_perf wrote, laid out as
// DIR/<variant>/round-<n>/*.json, and writes the markdown report and a JSON
// summary: per workload and variant the median, minimum and maximum over the
// rounds of the scheduling throughput and of the PostFilter and preemption
// goroutine latency percentiles, and the ratios to the baseline.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchreport config|run|report|perf-works [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "config":
		err = runConfig(os.Args[2:])
	case "report":
		err = runReport(os.Args[2:])
	case "run":
		err = runRun(os.Args[2:])
	case "perf-works":
		// Exit status 0 if perf stat counts instructions here.
		if !perfInstructionsWork() {
			os.Exit(1)
		}
	default:
		err = fmt.Errorf("unknown command %q: want config, run, report or perf-works", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v\n", err)
		os.Exit(1)
	}
}
