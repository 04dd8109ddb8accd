package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"kube-guard/test/util/procstat"
)

// metricCPU is the Metric label of the data item `run` writes.
const metricCPU = "CPUTime"

// runRun runs a scheduler_perf benchmark binary (with -perf-cpuprofile) and
// measures the CPU time of its measured phase: scheduler_perf creates the
// CPU profile file when it starts collecting metrics and closes it when it
// stops, so `run` watches the data directory (inotify) and reads the CPU
// time of the process and its descendants (etcd) from /proc at those two
// moments. It also records the CPU time of the whole run from rusage and,
// with -perf, the instructions of the whole run from `perf stat`. It writes
// them as a scheduler_perf DataItems file, per measured pod, so that
// `report` reads them with the other results.
func runRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	watch := fs.String("watch", "", "directory in which the benchmark creates its CPU profile (*-cpu.prof, -perf-cpuprofile)")
	out := fs.String("out", "", "DataItems JSON file to write")
	name := fs.String("name", "", "workload, TESTCASE/NAME")
	pods := fs.Int("pods", 0, "measured pods of the workload")
	perf := fs.Bool("perf", false, "count the instructions of the whole run with perf stat -e instructions")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *watch == "" || *out == "" || *name == "" || *pods <= 0 || fs.NArg() == 0 {
		return errors.New("usage: benchreport run -watch DIR -out FILE -name TESTCASE/NAME -pods N [-perf] -- COMMAND [ARG]...")
	}
	command := fs.Args()
	perfFile := ""
	if *perf {
		perfFile = *out + ".perf"
		command = append([]string{"perf", "stat", "-x", ",", "-e", "instructions", "-o", perfFile, "--"}, command...)
	}

	w, err := newProfileWatcher(*watch)
	if err != nil {
		return err
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	go w.run(cmd.Process.Pid)
	runErr := cmd.Wait()
	wall := time.Since(start)
	if runErr != nil {
		// The benchmark's own exit status, for bench.sh.
		var exit *exec.ExitError
		if errors.As(runErr, &exit) {
			os.Exit(exit.ExitCode())
		}
		return runErr
	}
	usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return errors.New("no rusage for the benchmark process")
	}
	process := time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	phase, phaseWall, err := w.phase()
	if err != nil {
		return err
	}
	n := float64(*pods)
	data := map[string]float64{
		"Pods":                 n,
		"MeasuredPhase":        phase.Seconds(),
		"MeasuredPhaseWall":    phaseWall.Seconds(),
		"MeasuredPhasePerPod":  phase.Seconds() * 1000 / n,
		"Process":              process.Seconds(),
		"ProcessWall":          wall.Seconds(),
		"ProcessPerPod":        process.Seconds() * 1000 / n,
		"MeasuredPhaseCPUUsed": phase.Seconds() / phaseWall.Seconds(),
	}
	if perfFile != "" {
		if instructions, ok, err := readPerfInstructions(perfFile); err != nil {
			return err
		} else if ok {
			data["Instructions"] = instructions
			data["InstructionsPerPod"] = instructions / n
		}
	}
	items := dataItems{Version: "v1", DataItems: []dataItem{{
		Data:   data,
		Unit:   "s, ms per pod",
		Labels: map[string]string{"Metric": metricCPU, "Name": "BenchmarkPerfScheduling/" + *name + "/cpu"},
	}}}
	b, err := json.MarshalIndent(items, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*out, append(b, '\n'), 0o644)
}

// profileWatcher records the CPU time of a process tree when a *-cpu.prof
// file is created in a directory and when it is closed after writing.
type profileWatcher struct {
	dir string
	fd  int

	mu               sync.Mutex
	started, stopped bool
	startCPU, endCPU time.Duration
	startAt, endAt   time.Time
	err              error
}

func newProfileWatcher(dir string) (*profileWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_CLOSE_WRITE); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	return &profileWatcher{dir: dir, fd: fd}, nil
}

// run reads the events until the process exits (the goroutine ends with
// the command).
func (w *profileWatcher) run(pid int) {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := unix.Read(w.fd, buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			w.fail(fmt.Errorf("reading inotify events: %w", err))
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			name := strings.TrimRight(string(nameBytes), "\x00")
			if !strings.HasSuffix(name, "-cpu.prof") {
				continue
			}
			cpu, err := procstat.TreeCPU(pid)
			now := time.Now()
			w.mu.Lock()
			switch {
			case err != nil:
				w.err = err
			case ev.Mask&unix.IN_CREATE != 0 && !w.started:
				w.started, w.startCPU, w.startAt = true, cpu, now
			case ev.Mask&unix.IN_CLOSE_WRITE != 0 && w.started && !w.stopped:
				w.stopped, w.endCPU, w.endAt = true, cpu, now
			}
			w.mu.Unlock()
		}
	}
}

func (w *profileWatcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// phase returns the CPU time and the wall-clock time between the creation
// and the close of the profile.
func (w *profileWatcher) phase() (time.Duration, time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, 0, w.err
	}
	if !w.started || !w.stopped {
		return 0, 0, fmt.Errorf("the benchmark did not create and close a *-cpu.prof file in %s (is -perf-cpuprofile set?)", w.dir)
	}
	return w.endCPU - w.startCPU, w.endAt.Sub(w.startAt), nil
}

// readPerfInstructions reads `perf stat -x , -e instructions` output:
// "<count>,<unit>,instructions,...", or "<not supported>" in the count.
func readPerfInstructions(file string) (float64, bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 || !strings.HasPrefix(f[2], "instructions") {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, false, nil // <not supported>, <not counted>
		}
		return v, true, nil
	}
	return 0, false, nil
}

// perfInstructionsWork returns true if `perf stat -e instructions` counts
// instructions on this machine.
func perfInstructionsWork() bool {
	f, err := os.CreateTemp("", "perf-stat-*")
	if err != nil {
		return false
	}
	_ = f.Close()
	defer func() { _ = os.Remove(f.Name()) }()
	if err := exec.Command("perf", "stat", "-x", ",", "-e", "instructions", "-o", f.Name(), "--", "true").Run(); err != nil {
		return false
	}
	_, ok, err := readPerfInstructions(f.Name())
	return err == nil && ok
}
