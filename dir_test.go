package partlog

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/checkpoint"
)

func TestParsePartitionDir(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		tp   TopicPartition
	}{
		{"orders-0", true, TopicPartition{Topic: "orders", Partition: 0}},
		{"my-topic-12", true, TopicPartition{Topic: "my-topic", Partition: 12}},
		{"__consumer_offsets-49", true, TopicPartition{Topic: "__consumer_offsets", Partition: 49}},
		{"orders", false, TopicPartition{}},
		{"orders-", false, TopicPartition{}},
		{"orders-x", false, TopicPartition{}},
		{"lost+found", false, TopicPartition{}},
		{"orders-99999999999", false, TopicPartition{}},
	} {
		tp, ok := ParsePartitionDir(c.name)
		if ok != c.ok || tp != c.tp {
			t.Errorf("ParsePartitionDir(%q) = %v, %v", c.name, tp, ok)
		}
	}
}

func dirOpts(t testing.TB) *DirOptions {
	return &DirOptions{Log: smallOpts(t)}
}

// TestOpenDirLifecycle opens a log directory with two partitions and
// entries that must be left alone, closes it cleanly (checkpoints and
// marker written), reopens it as clean, then simulates a crash (no marker)
// and reopens it through recovery.
func TestOpenDirLifecycle(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"lost+found", "orders-0.0123456789abcdef0123456789abcdef-delete", "notapartition"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"orders-0", "orders-1"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Logs()) != 2 || len(d.Problems()) != 3 {
		t.Fatalf("logs %d problems %+v", len(d.Logs()), d.Problems())
	}
	for _, p := range d.Problems() {
		if _, err := os.Stat(filepath.Join(root, p.Name)); err != nil {
			t.Fatalf("%s was touched: %v", p.Name, err)
		}
	}
	l0, _ := d.Log(TopicPartition{Topic: "orders", Partition: 0})
	b := makeBatch(t, 2, 200, 1)
	for len(l0.Segments()) < 3 {
		if _, err := l0.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l0.SetLogStartOffset(l0.Segments()[1] + 2); err != nil {
		t.Fatal(err)
	}
	leo, start := l0.LogEndOffset(), l0.LogStartOffset()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := checkpoint.CleanShutdownExists(filepath.Join(root, checkpoint.CleanShutdownFile)); !ok {
		t.Fatal("no clean-shutdown marker after Close")
	}
	rps, err := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
	if err != nil || rps[TopicPartition{Topic: "orders", Partition: 0}] != leo {
		t.Fatalf("recovery points %v %v, want %d", rps, err, leo)
	}
	starts, err := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.LogStartOffsetFile))
	if err != nil || starts[TopicPartition{Topic: "orders", Partition: 0}] != start {
		t.Fatalf("log starts %v %v, want %d", starts, err, start)
	}

	// Clean reopen: nothing recovered, the marker is gone while open.
	d, err = OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	if !d.CleanShutdown() || len(d.Reports()) != 0 {
		for _, r := range d.Reports() {
			t.Log(r.Summary())
		}
		t.Fatalf("clean reopen: clean %v reports %d", d.CleanShutdown(), len(d.Reports()))
	}
	if ok, _ := checkpoint.CleanShutdownExists(filepath.Join(root, checkpoint.CleanShutdownFile)); ok {
		t.Fatal("marker still present while the directory is open")
	}
	l0, _ = d.Log(TopicPartition{Topic: "orders", Partition: 0})
	if l0.LogEndOffset() != leo || l0.LogStartOffset() != start {
		t.Fatalf("reopened LEO %d start %d, want %d %d", l0.LogEndOffset(), l0.LogStartOffset(), leo, start)
	}
	// A crash: the logs are abandoned without Close (their directory
	// locks are released by closing the logs' lock files only).
	for _, l := range d.Logs() {
		_ = unlockDir(l.lock)
	}
	_ = d.lockFile.Close()

	d, err = OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.CleanShutdown() || len(d.Reports()) != 2 {
		t.Fatalf("after a crash: clean %v, %d reports", d.CleanShutdown(), len(d.Reports()))
	}
	l0, _ = d.Log(TopicPartition{Topic: "orders", Partition: 0})
	if l0.LogEndOffset() != leo || l0.LogStartOffset() != start {
		t.Fatalf("recovered LEO %d start %d, want %d %d", l0.LogEndOffset(), l0.LogStartOffset(), leo, start)
	}
}

// TestLockLogDirConflicts checks that a second process cannot take the
// log directory's lock while it is held (POSIX record locks only conflict
// between processes, so the check runs in a child).
func TestLockLogDirConflicts(t *testing.T) {
	if dir := os.Getenv("PARTLOG_LOCK_CHILD"); dir != "" {
		_, err := LockLogDir(dir)
		if !errors.Is(err, ErrDirLocked) {
			t.Fatalf("child: LockLogDir = %v, want ErrDirLocked", err)
		}
		return
	}
	root := t.TempDir()
	f, err := LockLogDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockLogDirConflicts$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PARTLOG_LOCK_CHILD="+root)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestOpenDirBadCheckpoint: a malformed recovery-point checkpoint is
// reported and treated as missing (full recovery), not fatal.
func TestOpenDirBadCheckpoint(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "t-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, checkpoint.RecoveryPointFile), []byte("0\n2\nt 0 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	found := false
	for _, p := range d.Problems() {
		found = found || p.Kind == "bad-checkpoint"
	}
	if !found || len(d.Logs()) != 1 {
		t.Fatalf("problems %+v logs %d", d.Problems(), len(d.Logs()))
	}
}

// TestOpenDirFailedPartitionKeepsCheckpoints: a partition that fails to
// load keeps its recovery point and log start offset in the checkpoints
// (records deleted by a raised log start must not come back), and Close
// writes no clean-shutdown marker while it is not loaded.
func TestOpenDirFailedPartitionKeepsCheckpoints(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bad-0", "good-0"} {
		l, err := Open(filepath.Join(root, name), smallOpts(t))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			if _, err := l.AppendAsLeader(makeBatch(t, 5, 10, 1000), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.SetLogStartOffset(7); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = OpenDir(root, dirOpts(t)) // loads both, records their checkpoints
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range d.Logs() {
		if err := l.SetLogStartOffset(7); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	bad := TopicPartition{Topic: "bad", Partition: 0}
	rps0, _ := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
	starts0, _ := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.LogStartOffsetFile))
	if starts0[bad] != 7 {
		t.Fatalf("log starts %v, want bad-0 at 7", starts0)
	}
	// Damage bad-0 so that a strict open refuses it.
	logPath := filepath.Join(root, "bad-0", "00000000000000000000.log")
	st, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(logPath, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	o := dirOpts(t)
	o.Log.Strict = true
	d, err = OpenDir(root, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Log(bad); ok {
		t.Fatal("the damaged partition loaded under Strict")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	rps, _ := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
	starts, _ := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.LogStartOffsetFile))
	if rps[bad] != rps0[bad] || starts[bad] != 7 {
		t.Fatalf("after a failed load: recovery points %v log starts %v, want bad-0 kept at %d and 7", rps, starts, rps0[bad])
	}
	if ok, _ := checkpoint.CleanShutdownExists(filepath.Join(root, checkpoint.CleanShutdownFile)); ok {
		t.Fatal("clean-shutdown marker written although a partition was not loaded")
	}
}

// TestDirCheckpointsAfterTruncation: a truncation of one of the
// directory's logs rewrites the recovery-point checkpoint at once, as
// Kafka's LogManager.truncateTo does. The checkpoint written before held
// a recovery point above the cut; after a power cut, recovery would have
// trusted, unscanned, whatever was appended there next and not yet
// synced (TestPowerCutDir found a sealed segment with its preallocated
// zero tail trusted that way). TruncateFullyAndStartAt does the same.
func TestDirCheckpointsAfterTruncation(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tp := TopicPartition{Topic: "orders", Partition: 0}
	l, err := d.Create(tp.Topic, tp.Partition, TopicID{1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 100, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rp := func() int64 {
		rps, err := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
		if err != nil {
			t.Fatal(err)
		}
		return rps[tp]
	}
	if got := rp(); got != 12 {
		t.Fatalf("checkpointed recovery point %d, want 12", got)
	}
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if got := rp(); got != 4 {
		t.Errorf("after TruncateTo(4) the checkpointed recovery point is %d, want 4", got)
	}
	for range 4 {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 100, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(2); err != nil {
		t.Fatal(err)
	}
	if got := rp(); got != 2 {
		t.Errorf("after TruncateFullyAndStartAt(2) the checkpointed recovery point is %d, want 2", got)
	}
}

// TestDirCloseInParallel: Dir.Close closes its partitions at once, so
// one slow close (each is a few fsyncs) does not hold up the others: a
// partlog serve --fsync of 1 000 partitions closed them one after
// another and took seconds to stop on SIGTERM, past the 20 s a
// benchmark waited with more of them. Here all but two partitions cannot
// close (their append lock is held) until the two have; one after
// another, the close would stop at the first held one.
func TestDirCloseInParallel(t *testing.T) {
	const parts = 16
	root := t.TempDir()
	for i := range parts {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("t-%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := dirOpts(t)
	opts.Parallelism = parts
	d, err := OpenDir(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := makeBatch(t, 2, 100, 1)
	var held []*Log
	var free [2]*Log
	for tp, l := range d.Logs() {
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		if tp.Partition < 2 {
			free[tp.Partition] = l
			continue
		}
		l.appendMu.Lock()
		held = append(held, l)
	}
	release := func() {
		for _, l := range held {
			l.appendMu.Unlock()
		}
		held = nil
	}
	defer release()
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for !free[0].closed.Load() || !free[1].closed.Load() {
		if time.Now().After(deadline) {
			release()
			<-closed
			t.Fatal("the free partitions waited for the held ones to close")
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, checkpoint.CleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after the parallel close: %v", err)
	}
}
