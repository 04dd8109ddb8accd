// Package procstat reads the CPU time of processes from /proc/<pid>/stat
// (Linux), for the benchmarks that measure CPU time rather than wall-clock
// time: hack/benchreport run and BenchmarkVictimRemoval.
package procstat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// Stat is what /proc/<pid>/stat says of a process's CPU time.
type Stat struct {
	PPID int
	// Self is the user and system time of the process (utime + stime).
	Self time.Duration
	// Children is that of the children it has waited for (cutime + cstime).
	Children time.Duration
}

// Parse parses a /proc/<pid>/stat line. The command name, in parentheses,
// may contain spaces and parentheses: the fields start after the last ')'.
func Parse(line string) (Stat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return Stat{}, errors.New("no command name")
	}
	// After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(line[i+1:])
	if len(f) < 15 {
		return Stat{}, fmt.Errorf("%d fields", len(f)+2)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Stat{}, err
	}
	var ticks [4]int64
	for j, k := range []int{11, 12, 13, 14} {
		if ticks[j], err = strconv.ParseInt(f[k], 10, 64); err != nil {
			return Stat{}, err
		}
	}
	return Stat{
		PPID:     ppid,
		Self:     time.Duration(ticks[0]+ticks[1]) * time.Second / clockTicks,
		Children: time.Duration(ticks[2]+ticks[3]) * time.Second / clockTicks,
	}, nil
}

// Read reads /proc/<pid>/stat.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	s, err := Parse(string(b))
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return s, nil
}

// TreeCPU returns the CPU time of process pid and of all its living
// descendants, plus that of the children they have waited for.
func TreeCPU(pid int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	procs := map[int]Stat{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := Read(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // gone
		}
		if err != nil {
			return 0, err
		}
		procs[p] = s
	}
	if _, ok := procs[pid]; !ok {
		return 0, fmt.Errorf("process %d is gone", pid)
	}
	var total time.Duration
	for p, s := range procs {
		for q := p; q > 1; q = procs[q].PPID {
			if q == pid {
				total += s.Self + s.Children
				break
			}
			if _, ok := procs[q]; !ok {
				break
			}
		}
	}
	return total, nil
}
