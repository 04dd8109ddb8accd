package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	s, err := Parse("42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 150 25 3 2 20 0 1 0 1 1 1")
	if err != nil || s.PPID != 7 || s.Self != 1750*time.Millisecond || s.Children != 50*time.Millisecond {
		t.Errorf("got %+v, %v; want ppid 7, self 1.75 s, children 50 ms", s, err)
	}
	if _, err := Parse("42 (x) S 7"); err == nil {
		t.Error("a short line was parsed")
	}
}

func TestTreeCPUCountsTheProcess(t *testing.T) {
	self, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if tree < self.Self {
		t.Errorf("the tree used %v, less than the process itself (%v)", tree, self.Self)
	}
	if _, err := TreeCPU(1 << 30); err == nil {
		t.Error("a process that does not exist was measured")
	}
}
