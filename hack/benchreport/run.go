package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// cpuProfileSuffix ends the name of the measured phase's CPU profile
// (scheduler_perf's -perf-cpuprofile).
const cpuProfileSuffix = "-cpu.prof"

// runRun runs a scheduler_perf benchmark binary (with -perf-cpuprofile) and
// measures the CPU time of its measured phase: scheduler_perf creates the
// CPU profile file when it starts collecting metrics and closes it when it
// stops, so `run` watches the data directory (inotify) and reads the CPU
// time of the process and its descendants (etcd) from /proc at those two
// moments. It also records the CPU time of the whole run from rusage and,
// with -perf, the instructions of the whole run from `perf stat`. It writes
// them as a scheduler_perf DataItems file, per measured pod, so that
// `report` reads them with the other results.
//
// With -barrier, the runs of a round that run at the same time start their
// measured parts at the same time: `config -barrier` puts a profile named
// FILE and a sleep before each workload's measured part; when the
// benchmark closes that profile, `run` records its arrival in -barrier-dir,
// stops its process and descendants (SIGSTOP) a third of the sleep later,
// in the sleep, and waits until the -barrier-parties runs of the round have
// arrived (or left: a run whose benchmark ends before the barrier says so),
// then continues it (SIGCONT) together with the others, once the last
// arrival's sleep is over, so that every sleep is over and no process waits
// for its own. A held process uses no CPU; the wall-clock time of the whole
// run includes the hold.
func runRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	watch := fs.String("watch", "", "directory in which the benchmark creates its CPU profile (*-cpu.prof, -perf-cpuprofile)")
	out := fs.String("out", "", "DataItems JSON file to write")
	name := fs.String("name", "", "workload, TESTCASE/NAME")
	pods := fs.Int("pods", 0, "measured pods of the workload")
	perf := fs.Bool("perf", false, "count the instructions of the whole run with perf stat -e instructions")
	barrierFile := fs.String("barrier", "", "name of the barrier's profile in the -watch directory (config -barrier)")
	barrierDir := fs.String("barrier-dir", "", "directory the runs of a round meet in")
	barrierID := fs.String("barrier-id", "", "this run's name in -barrier-dir")
	barrierParties := fs.Int("barrier-parties", 0, "how many runs meet in -barrier-dir, this one included")
	barrierSleep := fs.Duration("barrier-sleep", 3*time.Second, "the sleep after the barrier's profile (config -barrier-sleep)")
	barrierTimeout := fs.Duration("barrier-timeout", 30*time.Minute, "how long a run waits for the others before it continues alone")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *watch == "" || *out == "" || *name == "" || *pods <= 0 || fs.NArg() == 0 {
		return errors.New("usage: benchreport run -watch DIR -out FILE -name TESTCASE/NAME -pods N [-perf] [-barrier FILE -barrier-dir DIR -barrier-id ID -barrier-parties N [-barrier-sleep D] [-barrier-timeout D]] -- COMMAND [ARG]...")
	}
	var bar *barrier
	if *barrierFile != "" {
		if *barrierDir == "" || *barrierID == "" || strings.ContainsRune(*barrierID, '/') || *barrierParties <= 0 || *barrierSleep <= 0 || *barrierTimeout <= 0 {
			return errors.New("-barrier needs -barrier-dir, -barrier-id (a file name), -barrier-parties > 0 and positive -barrier-sleep and -barrier-timeout")
		}
		if err := os.MkdirAll(*barrierDir, 0o755); err != nil {
			return err
		}
		bar = &barrier{file: *barrierFile, dir: *barrierDir, id: *barrierID, parties: *barrierParties, sleep: *barrierSleep, timeout: *barrierTimeout}
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
	w.barrier = bar
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	go w.run(cmd.Process.Pid)
	runErr := cmd.Wait()
	wall := time.Since(start)
	if bar != nil {
		bar.leave()
	}
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
		// When the phase started, seconds since the epoch: runs at the
		// same time can be compared.
		"MeasuredPhaseStart": float64(w.startAt.UnixNano()) / 1e9,
	}
	// The kube-scheduler's share of the measured phase, from its profile
	// (attributeCPU): the scheduler's own CPU, apart from the
	// kube-apiserver's that the same process runs.
	attribution, err := attributeCPU(w.profile)
	if err != nil {
		return err
	}
	data["SchedulerPerPod"] = attribution.Scheduler.Seconds() * 1000 / n
	data["ProfiledPerPod"] = attribution.Total.Seconds() * 1000 / n
	if bar != nil {
		held, err := bar.result()
		if err != nil {
			return err
		}
		data["BarrierHeld"] = held.Seconds()
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
	// barrier, if not nil, holds the process when the benchmark closes
	// the barrier's profile.
	barrier *barrier

	mu               sync.Mutex
	started, stopped bool
	startCPU, endCPU time.Duration
	startAt, endAt   time.Time
	// profile is the path of the measured phase's CPU profile.
	profile string
	err     error
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
			if w.barrier != nil && name == w.barrier.file && ev.Mask&unix.IN_CLOSE_WRITE != 0 {
				w.barrier.arrive(pid)
				continue
			}
			if !strings.HasSuffix(name, cpuProfileSuffix) {
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
				w.profile = filepath.Join(w.dir, name)
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

// barrier is the rendezvous of the runs of a round (runRun): each writes
// a file named after itself to dir when its benchmark closes the barrier's
// profile ("arrived <unix nanoseconds>"), or when its benchmark ended
// without getting there ("left").
type barrier struct {
	file    string
	dir, id string
	parties int
	sleep   time.Duration
	timeout time.Duration

	mu      sync.Mutex
	arrived bool
	done    chan struct{} // closed when the process is released
	held    time.Duration
	err     error
}

// arrive records the arrival (when the benchmark closed the barrier's
// profile), stops the process tree of pid once it is in the sleep that
// follows, and releases the tree, in the background, once every party has
// arrived or left.
func (b *barrier) arrive(pid int) {
	b.mu.Lock()
	if b.arrived {
		b.mu.Unlock()
		return // the barrier's profile is closed once; ignore another
	}
	b.arrived = true
	b.done = make(chan struct{})
	b.mu.Unlock()
	at := time.Now()
	if err := b.record(fmt.Sprintf("arrived %d", at.UnixNano())); err != nil {
		b.finish(0, err)
		return
	}
	go func() {
		// Stopped at once, the process could be stopped before its sleep
		// began (it closes the profile, logs, and starts the sleep): it
		// would then sleep all of it after its release. A third of the
		// sleep later it is sleeping, its sleep started before the release
		// computed below.
		time.Sleep(b.stopAfter())
		tree, err := signalTree(pid, unix.SIGSTOP)
		stopped := time.Now()
		if err != nil {
			_, _ = signalTree(pid, unix.SIGCONT)
			b.finish(0, err)
			return
		}
		release, err := b.wait(at)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchreport run: barrier %s: %v; continuing\n", b.dir, err)
		}
		time.Sleep(time.Until(release))
		// Continue the processes stopped, and any they started meanwhile
		// (none can: they were stopped).
		for _, p := range tree {
			_ = unix.Kill(p, unix.SIGCONT)
		}
		b.finish(time.Since(stopped), nil)
	}()
}

// stopAfter is how long after its arrival a run's processes are stopped.
func (b *barrier) stopAfter() time.Duration { return b.sleep / 3 }

// finish records how long the process was held, or why it was not.
func (b *barrier) finish(held time.Duration, err error) {
	b.mu.Lock()
	b.held, b.err = held, err
	b.mu.Unlock()
	close(b.done)
}

// wait returns when the process may continue: once every party has
// arrived or left, the latest arrival plus the sleep and a sixth of it
// (the time from the profile's close to the start of the sleep, and for
// the other runs to notice), or at once after the timeout.
func (b *barrier) wait(at time.Time) (time.Time, error) {
	const poll = 20 * time.Millisecond
	deadline := at.Add(b.timeout)
	for {
		latest, n, err := b.read()
		if err != nil {
			return time.Now(), err
		}
		if n >= b.parties {
			return latest.Add(b.sleep + b.sleep/6), nil
		}
		if time.Now().After(deadline) {
			return time.Now(), fmt.Errorf("%d of %d runs got there in %v", n, b.parties, b.timeout)
		}
		time.Sleep(poll)
	}
}

// read returns the latest arrival and how many runs arrived or left.
func (b *barrier) read() (time.Time, int, error) {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return time.Time{}, 0, err
	}
	var latest time.Time
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // being written
		}
		c, err := os.ReadFile(filepath.Join(b.dir, e.Name()))
		if err != nil {
			return time.Time{}, 0, err
		}
		n++
		if ns, ok := strings.CutPrefix(strings.TrimSpace(string(c)), "arrived "); ok {
			v, err := strconv.ParseInt(ns, 10, 64)
			if err != nil {
				return time.Time{}, 0, fmt.Errorf("%s: %w", e.Name(), err)
			}
			if t := time.Unix(0, v); t.After(latest) {
				latest = t
			}
		}
	}
	return latest, n, nil
}

// record writes this run's file (through a hidden file and a rename, so
// that no run reads it half written).
func (b *barrier) record(content string) error {
	tmp := filepath.Join(b.dir, "."+b.id)
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(b.dir, b.id))
}

// leave records that the run ended without getting to the barrier, so
// that the others do not wait for it.
func (b *barrier) leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.arrived {
		if err := b.record("left"); err != nil {
			fmt.Fprintf(os.Stderr, "benchreport run: barrier %s: %v\n", b.dir, err)
		}
	}
}

// result returns how long the process was held, once it was released.
func (b *barrier) result() (time.Duration, error) {
	b.mu.Lock()
	arrived, done := b.arrived, b.done
	b.mu.Unlock()
	if !arrived {
		return 0, fmt.Errorf("the benchmark did not close the barrier's profile %s (is the config written with -barrier?)", b.file)
	}
	<-done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.err
}

// signalTree sends sig to process pid and its descendants, pid first, and
// returns them.
func signalTree(pid int, sig unix.Signal) ([]int, error) {
	tree, err := procstat.Tree(pid)
	if err != nil {
		return nil, err
	}
	for _, p := range tree {
		if err := unix.Kill(p, sig); err != nil && !errors.Is(err, unix.ESRCH) {
			return tree, fmt.Errorf("signal %v to process %d: %w", sig, p, err)
		}
	}
	return tree, nil
}
