package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// schedulerCode is the code of kube-scheduler: the scheduler's packages and
// the framework module they implement (k8s.io/kube-scheduler, staging).
var schedulerCode = []string{
	"k8s.io/kubernetes/pkg/scheduler.",
	"k8s.io/kubernetes/pkg/scheduler/",
	"k8s.io/kube-scheduler/",
}

// cpuAttribution is the CPU time of a profile's samples, and the part of it
// that kube-scheduler's code is on the stack of.
type cpuAttribution struct {
	Scheduler, Total time.Duration
}

// attributeCPU reads a Go CPU profile (the measured phase's, which
// scheduler_perf writes with -perf-cpuprofile) and attributes each sample to
// kube-scheduler when any frame of its stack is kube-scheduler's code
// (schedulerCode). scheduler_perf runs the scheduler and the kube-apiserver
// in one process (etcd is another one, and not in the profile), so that the
// process's CPU time mixes both; the attribution separates the scheduler's
// own: its scheduling cycles, preemption (dry runs, the removal goroutines
// and the API calls they make, client-side), and its informers' event
// handlers. It leaves out what runs on no scheduler frame: the decoding of
// its informers' watch events (client-go's reflectors, which the
// kube-apiserver's own informers share), the garbage collector's background
// workers, and the kube-apiserver's side of every request. The rule is the
// same for every variant, so that the ratio of two variants compares the
// scheduler's code.
func attributeCPU(path string) (cpuAttribution, error) {
	f, err := os.Open(path)
	if err != nil {
		return cpuAttribution{}, err
	}
	defer func() { _ = f.Close() }()
	p, err := profile.Parse(f)
	if err != nil {
		return cpuAttribution{}, fmt.Errorf("%s: %w", path, err)
	}
	value := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			value = i
		}
	}
	if value < 0 {
		return cpuAttribution{}, fmt.Errorf("%s: no cpu/nanoseconds sample type (a CPU profile?)", path)
	}
	var a cpuAttribution
	for _, s := range p.Sample {
		v := time.Duration(s.Value[value])
		a.Total += v
		if onSchedulerCode(s) {
			a.Scheduler += v
		}
	}
	return a, nil
}

func onSchedulerCode(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			for _, prefix := range schedulerCode {
				if strings.HasPrefix(line.Function.Name, prefix) {
					return true
				}
			}
		}
	}
	return false
}
