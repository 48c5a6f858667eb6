package partlog

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/crashfs"
)

// Power-cut tests (internal/crashfs): the workload runs over the
// crash-simulating file system, which records every write and sync; the
// image a power cut at a chosen op would leave (pending writes lost,
// kept or torn, unsynced directory entries lost or kept) is then opened
// like a directory found after a power failure and checked. A process
// kill (TestCrashKill) keeps the page cache; these lose it.

// cutAck is an acknowledgement of the workload: everything below offset
// was acknowledged durable (Flush or Sync returned) when the file
// system had applied ops ops, so a cut after op ops keeps it.
type cutAck struct {
	ackRecord
	ops int64
}

// ackAt returns the last acknowledgement a cut before op cut must keep.
func ackAt(acks []cutAck, cut int64) ackRecord {
	var a ackRecord
	for _, x := range acks {
		if x.ops < cut {
			a = x.ackRecord
		}
	}
	return a
}

// powerCutRuns is how many workload runs a power-cut test makes, and
// the default cuts each run checks (crashfs.EnvCuts raises the cuts;
// -short lowers both).
func powerCutRuns() (runs, cuts int) {
	if testing.Short() {
		return 1, 12
	}
	return 1, 32
}

// TestPowerCutSync: what Flush and Sync acknowledged survives a power cut
// at any op of a workload that appends every kind of batch, rolls, syncs
// from one or several goroutines (group commit), lets the kernel write
// pages back between syncs (so a cut can keep or tear them), rolls in
// the middle of a flush (the new segment's directory entry is then the
// next flush's to sync) and closes. Each image is reopened (recovery
// runs, sometimes trusting the acknowledged recovery point as a broker's
// checkpoint would) and checked as TestCrashKill checks a killed child's
// directory (crashCheck, checkClosedDir).
func TestPowerCutSync(t *testing.T) {
	runs, cuts := powerCutRuns()
	sweep := crashfs.NewSweep(t, cuts)
	sweep.Loop(runs, func(run int) { powerCutSyncRun(t, sweep, run) })
	t.Logf("%d images checked", sweep.Done)
}

// cutPartition mounts a crash-simulating file system holding an empty
// partition directory topic-0; from is the first op of the workload.
func cutPartition(t *testing.T) (m *crashfs.Mount, dir string, from int64) {
	m = crashfs.New(t)
	dir = filepath.Join(m.Dir(), "topic-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	from, err := m.Settle()
	if err != nil {
		t.Fatal(err)
	}
	return m, dir, from
}

// checkAckedImages ends the workload on m (its log closed) and checks
// every image a cut of its history leaves: topic-0 reopened (half the
// images trusting the acknowledged recovery point, as a broker's
// checkpoint would) keeps what acks say was durable before the cut
// (crashCheckTo, checkClosedDirTail). segmentBytes is the workload's
// (0: crashOptions').
func checkAckedImages(t *testing.T, sweep *crashfs.Sweep, run int, m *crashfs.Mount, from int64, acks []cutAck, segmentBytes int64) {
	r, err := m.History()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	imgRng := sweep.Rand(uint64(run) + 1<<40)
	sweep.Run(t, run, r, from, func(img string, im *crashfs.Image) {
		a := ackAt(acks, im.Cut)
		o := crashOptions(nil)
		if segmentBytes != 0 {
			o.SegmentBytes = segmentBytes
		}
		defer func() {
			if t.Failed() {
				t.Logf("acknowledged before the cut: %+v (recovery point given: %d)", a, o.RecoveryPoint)
			}
		}()
		if imgRng.IntN(2) == 0 {
			o.RecoveryPoint = a.rp
		}
		l, err := Open(filepath.Join(img, "topic-0"), o)
		if err != nil {
			t.Fatalf("open after the cut (acknowledged %+v): %v", a, err)
		}
		crashCheckTo(t, l, a, -1, a.offset)
		if err := l.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		checkClosedDirTail(t, filepath.Join(img, "topic-0"), true)
	})
}

func powerCutSyncRun(t *testing.T, sweep *crashfs.Sweep, run int) {
	m, dir, from := cutPartition(t)
	rng := sweep.Rand(uint64(run))
	opts := crashOptions(nil)
	if rng.IntN(2) == 0 {
		opts.PrefaultBytes = 16 << 10
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	w := newCrashWorkload(l, rng)
	// A roll in the middle of a flush, with a batch in the new segment:
	// the flush that is running synced the directory before the new
	// segment existed, so the next one must.
	hookRng := rand.New(rand.NewPCG(rng.Uint64(), 7))
	inHook := false
	l.flushed = func(base, target int64) {
		if inHook || hookRng.IntN(4) != 0 {
			return
		}
		inHook = true
		defer func() { inHook = false }()
		if err := l.Roll(); err != nil {
			t.Errorf("roll during a flush: %v", err)
			return
		}
		if err := w.plain(); err != nil {
			t.Errorf("append during a flush: %v", err)
		}
	}
	var acks []cutAck
	at, digest := l.LogStartOffset(), uint32(0)
	// acked records that everything below off is durable now.
	acked := func(off int64) {
		ops, err := m.Ops()
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, cutAck{ackRecord{offset: off, digest: digest, rp: l.RecoveryPoint()}, ops})
	}
	digestTo := func(off int64) {
		var err error
		if digest, err = crashDigest(l, at, off, digest); err != nil {
			t.Fatal(err)
		}
		at = off
	}
	for w.bytes < 200<<10 {
		for range 1 + rng.IntN(6) {
			if err := w.step(true); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(4) == 0 {
			// Dirty pages reach the file system unsynced.
			if err := m.Writeback(); err != nil {
				t.Fatal(err)
			}
		}
		// The hook's batches land at or above off; a later sync covers
		// them.
		off := l.LogEndOffset()
		switch rng.IntN(3) {
		case 0:
			err = syncFromMany(l, off, 1+rng.IntN(4))
		case 1:
			err = l.Sync(t.Context(), off)
		default:
			err = l.Flush()
		}
		if err != nil {
			t.Fatalf("sync: %v", err)
		}
		digestTo(off)
		acked(off)
	}
	l.flushed = nil
	digestTo(l.LogEndOffset())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	acked(at) // a clean close made everything durable
	checkAckedImages(t, sweep, run, m, from, acks, 0)
}
