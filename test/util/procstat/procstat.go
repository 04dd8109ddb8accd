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
	procs, err := scan(pid)
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for p, s := range procs {
		if descends(procs, p, pid) {
			total += s.Self + s.Children
		}
	}
	return total, nil
}

// Tree returns process pid and its living descendants, pid first.
func Tree(pid int) ([]int, error) {
	procs, err := scan(pid)
	if err != nil {
		return nil, err
	}
	tree := []int{pid}
	for p := range procs {
		if p != pid && descends(procs, p, pid) {
			tree = append(tree, p)
		}
	}
	return tree, nil
}

// scan reads the stat of every process; pid must be one of them.
func scan(pid int) (map[int]Stat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
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
			return nil, err
		}
		procs[p] = s
	}
	if _, ok := procs[pid]; !ok {
		return nil, fmt.Errorf("process %d is gone", pid)
	}
	return procs, nil
}

// descends reports whether p is pid or one of its descendants.
func descends(procs map[int]Stat, p, pid int) bool {
	for q := p; q > 1; q = procs[q].PPID {
		if q == pid {
			return true
		}
		if _, ok := procs[q]; !ok {
			return false
		}
	}
	return false
}
