package partlog

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/recovery"
)

// twentyBatches makes a log directory with one partition t-0 of 20
// batches in one segment, cleanly closed, and returns the root and the
// segment's path.
func twentyBatches(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Create("t", 0, TopicID{1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 100, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return root, filepath.Join(root, "t-0", "00000000000000000000.log")
}

func flipByte(t *testing.T, path string, pos int) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[pos] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCleanShutdownDamageIsKept: after a clean shutdown, a corrupt first
// batch of the active segment made the open drop the whole segment (19
// intact batches below the recovery point with it), say nothing and reuse
// the offsets. Kafka trusts a clean shutdown and cuts nothing; partlog
// cuts nothing either: the partition is refused, named with the damage
// (ErrFlushedDamage), its files left byte for byte, and the next open
// refuses it again instead of cutting it as after a crash. A forced
// repair cuts it as Kafka's crash recovery would.
func TestCleanShutdownDamageIsKept(t *testing.T) {
	root, seg := twentyBatches(t)
	damaged := flipByte(t, seg, 70)
	for round := 0; round < 2; round++ {
		d, err := OpenDir(root, dirOpts(t))
		if err != nil {
			t.Fatal(err)
		}
		if !d.CleanShutdown() {
			t.Fatalf("round %d: the directory was not clean", round)
		}
		if _, ok := d.Log(TopicPartition{Topic: "t"}); ok {
			t.Fatalf("round %d: the damaged partition was served", round)
		}
		ps := d.Problems()
		if len(ps) != 1 || ps[0].Kind != "flushed-damage" || !strings.Contains(ps[0].Detail, "00000000000000000000.log") ||
			!strings.Contains(ps[0].Detail, "crc mismatch") || !strings.Contains(ps[0].Detail, "--force") {
			t.Fatalf("round %d: problems %+v", round, ps)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(seg); !bytes.Equal(b, damaged) {
			t.Fatalf("round %d: the segment changed", round)
		}
		if ok, _ := checkpoint.CleanShutdownExists(filepath.Join(root, checkpoint.CleanShutdownFile)); !ok {
			t.Fatalf("round %d: no clean-shutdown marker though nothing changed", round)
		}
	}
	rp, err := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
	if err != nil {
		t.Fatal(err)
	}
	opts := recovery.Options{Clean: true, RecoveryPoint: rp[TopicPartition{Topic: "t"}], RefuseFlushedCut: true}
	rep, err := recovery.Run(filepath.Join(root, "t-0"), opts)
	if err != nil || rep.Refused == "" || rep.Truncation == nil || rep.Truncation.Class != recovery.ClassCorruptFlushed {
		t.Fatalf("recover --apply without --force: refused %q, truncation %+v, %v", rep.Refused, rep.Truncation, err)
	}
	opts.RefuseFlushedCut, opts.CutFlushed = false, true
	if rep, err = recovery.Run(filepath.Join(root, "t-0"), opts); err != nil || rep.LogEndOffset != 0 {
		t.Fatalf("forced repair: %+v %v", rep, err)
	}
}

// TestCrashCutIsReported: after a crash, a corrupt batch in the middle
// of the segment is cut as Kafka cuts it, and the open's recovery report
// says so (where, how many bytes, why).
func TestCrashCutIsReported(t *testing.T) {
	root, seg := twentyBatches(t)
	if err := os.Remove(filepath.Join(root, checkpoint.CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(seg)
	flipByte(t, seg, len(b)/2)
	d, err := OpenDir(root, &DirOptions{Log: smallOpts(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, ok := d.Log(TopicPartition{Topic: "t"})
	if !ok {
		t.Fatalf("not served: %+v", d.Problems())
	}
	rep := d.Reports()[TopicPartition{Topic: "t"}]
	if rep == nil || rep.Truncation == nil || rep.Truncation.BytesRemoved == 0 || l.LogEndOffset() >= 40 {
		t.Fatalf("report %+v, log end %d", rep, l.LogEndOffset())
	}
}

// TestFileNamedLikePartition: a regular file named like a partition
// directory was skipped without a word; it is reported and left alone.
func TestFileNamedLikePartition(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "file-0"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ps := d.Problems()
	if len(ps) != 1 || ps[0].Name != "file-0" || ps[0].Kind != "not-a-directory" {
		t.Fatalf("problems %+v", ps)
	}
}

// TestImmutablePartitionKeepsOthersClean: a partition directory made
// immutable (chattr +i) cannot take its producer snapshot at close; that
// failed the whole shutdown and no clean-shutdown marker was written, so
// every partition was recovered at the next start. The close reports the
// error, but the data is flushed, so the marker is written and the next
// open is clean.
func TestImmutablePartitionKeepsOthersClean(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr not installed")
	}
	root := fullMountTmpfs(t, "64m")
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		l, err := d.Create("t", p, TopicID{1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(psData(t, 7, 0, 0, 3, false), 0); err != nil {
			t.Fatal(err)
		}
	}
	frozen := filepath.Join(root, "t-1")
	if out, err := exec.Command("chattr", "+i", frozen).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	defer exec.Command("chattr", "-i", frozen).Run()
	if err := d.Close(); err == nil || !errors.Is(err, os.ErrPermission) {
		t.Fatalf("close with an immutable partition directory: %v", err)
	}
	if out, err := exec.Command("chattr", "-i", frozen).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	d, err = OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.CleanShutdown() || len(d.Logs()) != 3 {
		t.Fatalf("reopened: clean %v, %d partitions, problems %+v", d.CleanShutdown(), len(d.Logs()), d.Problems())
	}
	for tp, l := range d.Logs() {
		if l.LogEndOffset() != 3 {
			t.Fatalf("%s: log end %d", tp, l.LogEndOffset())
		}
	}
}

// TestOpenDirReadOnlyWhenFull: a directory whose checkpoints cannot be
// written at open (a full disk) failed to open, so a broker killed on a
// full disk could not start. It opens read-only: reads are served, every
// write is refused (ErrFailed naming the cause), and it opens writable
// again once the checkpoints can be written.
func TestOpenDirReadOnlyWhenFull(t *testing.T) {
	root, _ := twentyBatches(t)
	if err := os.Remove(filepath.Join(root, checkpoint.CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	hook := func(path string) error {
		if filepath.Dir(path) == root {
			return syscall.ENOSPC
		}
		return nil
	}
	testhook.WriteFile.Store(&hook)
	d, err := OpenDir(root, dirOpts(t))
	testhook.WriteFile.Store(nil)
	if err != nil {
		t.Fatalf("open with the checkpoints unwritable: %v", err)
	}
	if err := d.ReadOnly(); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("ReadOnly: %v", err)
	}
	l, ok := d.Log(TopicPartition{Topic: "t"})
	if !ok {
		t.Fatalf("not served: %+v", d.Problems())
	}
	v, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil || len(v.Records) == 0 {
		t.Fatalf("read: %v", err)
	}
	v.Release()
	if _, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1000), 0); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("append to a read-only directory: %v", err)
	}
	if _, err := d.Create("new", 0, TopicID{2}, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("create in a read-only directory: %v", err)
	}
	_ = d.Close()
	d, err = OpenDir(root, dirOpts(t))
	if err != nil || d.ReadOnly() != nil {
		t.Fatalf("reopen with space: %v, read-only %v", err, d.ReadOnly())
	}
	defer d.Close()
	l, _ = d.Log(TopicPartition{Topic: "t"})
	if _, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1000), 0); err != nil {
		t.Fatal(err)
	}
}
