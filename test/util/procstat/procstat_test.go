package procstat

import (
	"os"
	"os/exec"
	"slices"
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

func TestTreeListsDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30; wait")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sh: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	// The shell's two sleeps are its children, this test's process is not
	// part of the tree.
	var tree []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if tree, err = Tree(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if len(tree) == 3 {
			break
		}
	}
	if len(tree) != 3 || tree[0] != cmd.Process.Pid {
		t.Fatalf("tree of the shell: %v, want the shell %d first and its two sleeps", tree, cmd.Process.Pid)
	}
	if slices.Contains(tree, os.Getpid()) {
		t.Errorf("tree %v holds the test's own process", tree)
	}
	for _, p := range tree[1:] {
		if s, err := Read(p); err != nil || s.PPID != cmd.Process.Pid {
			t.Errorf("process %d of the tree: %+v, %v; want a child of %d", p, s, err, cmd.Process.Pid)
		}
	}
}
