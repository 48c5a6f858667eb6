package recovery

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		_ = os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

func mustRun(t testing.TB, dir string, o Options) *Report {
	t.Helper()
	r, err := Run(dir, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r
}

// tcase is one damaged directory of recovery.md §8.2.
type tcase struct {
	id     string
	opts   Options
	damage func(t testing.TB, dir string)
	check  func(t testing.TB, r *Report, dir string)
	// persistent: the second run still reports problems (ignored foreign
	// files); otherwise it must report ok.
	persistent bool
}

func expectCut(t testing.TB, r *Report, leo int64, class string) {
	t.Helper()
	if r.LogEndOffset != leo {
		t.Errorf("LEO %d, want %d", r.LogEndOffset, leo)
	}
	if class == "" {
		if r.Truncation != nil {
			t.Errorf("unexpected truncation %+v", *r.Truncation)
		}
		return
	}
	if r.Truncation == nil {
		t.Fatalf("no truncation, want class %s", class)
	}
	if r.Truncation.Class != class {
		t.Errorf("class %s (%s), want %s", r.Truncation.Class, r.Truncation.Reason, class)
	}
	if r.Truncation.Offset != leo {
		t.Errorf("truncation offset %d, want %d", r.Truncation.Offset, leo)
	}
}

func hasProblem(r *Report, kind string) bool {
	return slices.ContainsFunc(r.Problems, func(p Problem) bool { return p.Kind == kind })
}

func expectProblem(t testing.TB, r *Report, kind string) {
	t.Helper()
	if !hasProblem(r, kind) {
		t.Errorf("no %q problem in %+v", kind, r.Problems)
	}
}

func hasChange(r *Report, kind string) bool {
	return slices.ContainsFunc(r.Changes, func(c Change) bool { return c.Kind == kind })
}

// expectChange checks that a change of the kind is listed and that it is
// not reported as a problem (routine normalisation is not damage).
func expectChange(t testing.TB, r *Report, kind string) {
	t.Helper()
	if !hasChange(r, kind) {
		t.Errorf("no %q change in %+v", kind, r.Changes)
	}
	if hasProblem(r, kind) {
		t.Errorf("%q reported as a problem: %+v", kind, r.Problems)
	}
}

func expectNote(t testing.TB, r *Report, kind string) {
	t.Helper()
	if !slices.ContainsFunc(r.Notes, func(p Problem) bool { return p.Kind == kind }) {
		t.Errorf("no %q note in %+v", kind, r.Notes)
	}
	if hasProblem(r, kind) {
		t.Errorf("%q reported as a problem: %+v", kind, r.Problems)
	}
}

func expectStatus(t testing.TB, r *Report, status string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %s, want %s (problems %+v)", r.Status, status, r.Problems)
	}
}

func expectRebuilt(t testing.TB, r *Report, base int64) {
	t.Helper()
	if !slices.Contains(r.IndexesRebuilt, base) {
		t.Errorf("indexes of %d not rebuilt: %v", base, r.IndexesRebuilt)
	}
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// setLen sets the length field of the batch at pos of a segment.
func setField(t testing.TB, dir string, base, pos int64, off int, v []byte) {
	patch(t, segPath(dir, base, filenames.Log), func(b []byte) []byte {
		copy(b[pos+int64(off):], v)
		return b
	})
}

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func appendBytes(t testing.TB, path string, extra []byte) {
	patch(t, path, func(b []byte) []byte { return append(b, extra...) })
}

// writeSegment writes a segment of plain batches (no producer) covering
// [from, to) in batches of 10 at epoch 1, with empty indexes.
func writeSegment(t testing.TB, dir string, base, from, to int64) {
	var out []byte
	var bld batch.Builder
	for o := from; o < to; o += 10 {
		spec := batch.NewBatchSpec(o)
		spec.PartitionLeaderEpoch = 1
		recs := make([]batch.RecordSpec, 10)
		for i := range recs {
			recs[i] = batch.RecordSpec{Timestamp: baseTs + o + int64(i), Value: []byte("x")}
		}
		var err error
		if out, err = bld.AppendBatch(out, &spec, recs); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex} {
		var b []byte
		if k == filenames.Log {
			b = out
		}
		if err := os.WriteFile(segPath(dir, base, k), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func cases() []tcase {
	mid := func(t testing.TB, dir string) batchPos { return batchAt(t, dir, 600, 650) }
	last := func(t testing.TB, dir string) batchPos { return batchAt(t, dir, 600, 740) }
	return []tcase{
		{id: "A1", opts: clean(), check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			expectStatus(t, r, StatusOK)
			if r.RecoveryPoint != 750 || r.LogStartOffset != 0 {
				t.Errorf("RP %d LogStart %d", r.RecoveryPoint, r.LogStartOffset)
			}
		}},
		{id: "A2", opts: unclean(600), check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			expectStatus(t, r, StatusOK)
			if r.RecoveryPoint != 600 || r.Producers != 2 || r.LastStableOffset != 730 {
				t.Errorf("RP %d producers %d LSO %d", r.RecoveryPoint, r.Producers, r.LastStableOffset)
			}
		}},
		{id: "A3", opts: unclean(-1), check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			expectStatus(t, r, StatusOK)
			expectNote(t, r, kindFullRecovery)
			if r.RecoveryPoint != 0 {
				t.Errorf("RP %d", r.RecoveryPoint)
			}
		}},
		{id: "A4", opts: unclean(10000), check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			if r.RecoveryPoint != 750 {
				t.Errorf("RP %d", r.RecoveryPoint)
			}
		}},
		{id: "B1", opts: unclean(600), damage: func(t testing.TB, dir string) {
			b := last(t, dir)
			if err := os.Truncate(segPath(dir, 600, filenames.Log), b.pos+100); err != nil {
				t.Fatal(err)
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 740, ClassTornTail)
			expectStatus(t, r, StatusRepaired)
			if !slices.Contains(r.SnapshotsDiscarded, 750) || !exists(dir, "00000000000000000740.snapshot") || exists(dir, "00000000000000000750.snapshot") {
				t.Errorf("snapshots: discarded %v", r.SnapshotsDiscarded)
			}
			if r.LastStableOffset != 730 || r.Producers != 2 {
				t.Errorf("LSO %d producers %d", r.LastStableOffset, r.Producers)
			}
		}},
		{id: "B2", opts: unclean(600), damage: func(t testing.TB, dir string) {
			if err := os.Truncate(segPath(dir, 600, filenames.Log), last(t, dir).pos+30); err != nil {
				t.Fatal(err)
			}
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 740, ClassTornTail) }},
		{id: "B3", opts: unclean(600), damage: func(t testing.TB, dir string) {
			appendBytes(t, segPath(dir, 600, filenames.Log), []byte("0123456789"))
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, ClassTornTail)
			if r.Truncation.BytesRemoved != 10 {
				t.Errorf("bytes removed %d", r.Truncation.BytesRemoved)
			}
		}},
		{id: "B4", opts: unclean(600), damage: func(t testing.TB, dir string) {
			appendBytes(t, segPath(dir, 600, filenames.Log), make([]byte, 1<<20))
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 750, ClassZeroTail) }},
		{id: "B5", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, last(t, dir).pos, batch.OffBatchLength, be32(900<<10))
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 740, ClassTornTail) }},
		{id: "B6", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, last(t, dir).pos, batch.OffCRC, []byte{1, 2, 3, 4})
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 740, ClassTornTail) }},
		{id: "B7", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, mid(t, dir).pos, batch.OffCRC, []byte{1, 2, 3, 4})
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 650, ClassCorruptUnflushed)
			if r.Salvage == nil || r.Salvage.Batches != 9 || r.Salvage.FirstOffset != 660 || r.Salvage.LastOffset != 749 {
				t.Errorf("salvage %+v", r.Salvage)
			}
			expectProblem(t, r, kindSalvage)
		}},
		{id: "B8", opts: unclean(600), damage: func(t testing.TB, dir string) {
			patch(t, segPath(dir, 600, filenames.Log), func(b []byte) []byte { clear(b[8192:12288]); return b })
		}, check: func(t testing.TB, r *Report, dir string) {
			if r.Truncation == nil || r.Truncation.Class != ClassCorruptUnflushed || r.Truncation.Position > 8192 || r.Salvage == nil {
				t.Errorf("truncation %+v salvage %+v", r.Truncation, r.Salvage)
			}
		}},
		{id: "B9", opts: unclean(600), damage: func(t testing.TB, dir string) {
			if err := os.Truncate(segPath(dir, 600, filenames.Log), 64<<10); err != nil {
				t.Fatal(err)
			}
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 750, ClassZeroTail) }},
		{id: "B10", opts: unclean(600), damage: func(t testing.TB, dir string) {
			if err := os.WriteFile(segPath(dir, 750, filenames.Log), make([]byte, 64<<10), 0o644); err != nil {
				t.Fatal(err)
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, ClassZeroTail)
			if r.Truncation.SegmentBaseOffset != 750 || r.Truncation.Position != 0 || len(r.Segments) != 4 {
				t.Errorf("truncation %+v segments %d", r.Truncation, len(r.Segments))
			}
		}},
		{id: "B11", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, mid(t, dir).pos, batch.OffBatchLength, be32(0))
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 650, ClassCorruptUnflushed) }},
		{id: "B12", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, mid(t, dir).pos, batch.OffBatchLength, be32(-5))
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 650, ClassCorruptUnflushed) }},
		{id: "B13", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, batchAt(t, dir, 600, 610).pos, batch.OffBatchLength, be32(10<<10))
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 610, ClassCorruptUnflushed) }},
		{id: "C1", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, mid(t, dir).pos, batch.OffBaseOffset, be64(640))
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 650, ClassCorruptUnflushed) }},
		{id: "C2", opts: unclean(600), damage: func(t testing.TB, dir string) {
			p := last(t, dir).pos
			setField(t, dir, 600, p, batch.OffBaseOffset, be64(0))
			setField(t, dir, 600, p, batch.OffPartitionLeaderEpoch, be32(-1))
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 740, ClassCorruptUnflushed) }},
		// C3, C4: a leader epoch that rises and falls again, or falls, in
		// the middle of the data. The epoch is outside the CRC, but Kafka
		// keeps and serves such batches (its epoch cache takes only
		// increases): the data is kept and the drop reported as a note.
		{id: "C3", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, mid(t, dir).pos, batch.OffPartitionLeaderEpoch, be32(1<<31-1))
		}, check: func(t testing.TB, r *Report, dir string) {
			expectKeptWithEpochNote(t, r, 750)
			// The spike is not in the cache: a later batch's epoch is
			// below it (see envelope), so a leader of epoch 2 can append.
			for _, e := range r.Epochs {
				if e.Epoch > 1 {
					t.Errorf("epoch cache holds %d", e.Epoch)
				}
			}
		}},
		{id: "C4", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, mid(t, dir).pos, batch.OffPartitionLeaderEpoch, be32(0))
		}, check: func(t testing.TB, r *Report, dir string) { expectKeptWithEpochNote(t, r, 750) }},
		{id: "C5", opts: unclean(600), damage: func(t testing.TB, dir string) {
			setField(t, dir, 600, mid(t, dir).pos, batch.OffMagic, []byte{3})
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 650, ClassCorruptUnflushed) }},
		{id: "C6", opts: unclean(600), damage: func(t testing.TB, dir string) {
			for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex, filenames.TxnIndex} {
				if err := os.Rename(segPath(dir, 300, k), segPath(dir, 350, k)); err != nil {
					t.Fatal(err)
				}
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			if r.LogEndOffset != 300 || len(r.Segments) != 1 {
				t.Errorf("LEO %d segments %+v", r.LogEndOffset, r.Segments)
			}
			expectStatus(t, r, StatusRepaired)
			expectProblem(t, r, kindSegmentDropped)
		}},
		{id: "C7", opts: unclean(600), damage: func(t testing.TB, dir string) {
			a, b := batchAt(t, dir, 600, 650), batchAt(t, dir, 600, 660)
			patch(t, segPath(dir, 600, filenames.Log), func(d []byte) []byte {
				x := slices.Clone(d[a.pos : a.pos+int64(a.size)])
				y := slices.Clone(d[b.pos : b.pos+int64(b.size)])
				copy(d[a.pos:], y)
				copy(d[a.pos+int64(len(y)):], x)
				return d
			})
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 670, ClassCorruptUnflushed) }},
		{id: "D1", opts: clean(), damage: func(t testing.TB, dir string) {
			appendBytes(t, segPath(dir, 300, filenames.Index), make([]byte, 1<<20))
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			expectRebuilt(t, r, 300)
			expectProblem(t, r, kindIndex)
		}},
		{id: "D2", opts: clean(), damage: func(t testing.TB, dir string) {
			appendBytes(t, segPath(dir, 0, filenames.TimeIndex), make([]byte, 1200))
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 0) }},
		{id: "D3", opts: clean(), damage: func(t testing.TB, dir string) {
			if err := os.Truncate(segPath(dir, 600, filenames.TimeIndex), testCfg.MaxIndexBytes/12*12); err != nil {
				t.Fatal(err)
			}
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 600) }},
		{id: "D4", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.Remove(segPath(dir, 300, filenames.Index))
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 300); expectCut(t, r, 750, "") }},
		{id: "D5", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.Remove(segPath(dir, 300, filenames.TimeIndex))
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 300) }},
		{id: "D6", opts: clean(), damage: func(t testing.TB, dir string) {
			appendBytes(t, segPath(dir, 300, filenames.Index), []byte{1, 2, 3})
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 300) }},
		{id: "D7", opts: clean(), damage: func(t testing.TB, dir string) {
			patch(t, segPath(dir, 300, filenames.Index), func(b []byte) []byte {
				copy(b[len(b)-4:], be32(1<<20))
				return b
			})
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 300) }},
		{id: "D8", opts: clean(), damage: func(t testing.TB, dir string) {
			patch(t, segPath(dir, 300, filenames.Index), func(b []byte) []byte {
				x := slices.Clone(b[0:8])
				copy(b[0:8], b[8:16])
				copy(b[8:16], x)
				return b
			})
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 300) }},
		{id: "D9", opts: unclean(600), damage: func(t testing.TB, dir string) {
			if err := os.Truncate(segPath(dir, 600, filenames.Log), last(t, dir).pos+100); err != nil {
				t.Fatal(err)
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 740, ClassTornTail)
			expectRebuilt(t, r, 600)
		}},
		{id: "D10", opts: clean(), damage: func(t testing.TB, dir string) {
			if err := os.Truncate(segPath(dir, 600, filenames.Log), batchAt(t, dir, 600, 700).pos+100); err != nil {
				t.Fatal(err)
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 700, ClassTornTail)
			expectProblem(t, r, kindCleanMarker)
			expectRebuilt(t, r, 600)
		}},
		{id: "D11", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.WriteFile(segPath(dir, 900, filenames.Index), make([]byte, 16), 0o644)
		}, check: func(t testing.TB, r *Report, dir string) {
			// Without a .deleted sibling, the segment's data is missing.
			expectProblem(t, r, kindOrphanIndex)
			if !hasChange(r, kindOrphanIndex) || exists(dir, "00000000000000000900.index") {
				t.Error("orphan index kept")
			}
		}},
		{id: "D11b", opts: clean(), damage: func(t testing.TB, dir string) {
			// An interrupted deletion: the .log renamed, its index not yet.
			_ = os.WriteFile(segPath(dir, 900, filenames.Log)+filenames.Deleted, []byte("x"), 0o644)
			_ = os.WriteFile(segPath(dir, 900, filenames.Index), make([]byte, 16), 0o644)
		}, check: func(t testing.TB, r *Report, dir string) {
			expectChange(t, r, kindOrphanIndex)
			expectChange(t, r, kindLeftover)
			if exists(dir, "00000000000000000900.index") {
				t.Error("orphan index kept")
			}
		}},
		{id: "D12", opts: unclean(0), damage: func(t testing.TB, dir string) {
			_ = os.Remove(segPath(dir, 300, filenames.TxnIndex))
		}, check: func(t testing.TB, r *Report, dir string) {
			expectRebuilt(t, r, 300)
			if !exists(dir, "00000000000000000300.txnindex") {
				t.Error("txnindex not rebuilt")
			}
		}},
		{id: "D13", opts: clean(), damage: func(t testing.TB, dir string) {
			patch(t, segPath(dir, 300, filenames.TxnIndex), func(b []byte) []byte { copy(b[18:], be64(250)); return b })
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 300) }},
		{id: "D14", opts: clean(), damage: func(t testing.TB, dir string) {
			appendBytes(t, segPath(dir, 300, filenames.TxnIndex), make([]byte, 20))
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 300) }},
		{id: "D15", opts: clean(), damage: func(t testing.TB, dir string) {
			patch(t, segPath(dir, 300, filenames.TxnIndex), func(b []byte) []byte { b[0] = 1; return b })
		}, check: func(t testing.TB, r *Report, dir string) { expectRebuilt(t, r, 300) }},
		{id: "D16", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.WriteFile(segPath(dir, 750, filenames.Log), nil, 0o644)
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			if hasProblem(r, kindIndex) || hasProblem(r, kindCleanMarker) {
				t.Errorf("problems %+v", r.Problems)
			}
			if !exists(dir, "00000000000000000750.index") || !exists(dir, "00000000000000000750.timeindex") {
				t.Error("indexes not created")
			}
		}},
		{id: "E1", opts: unclean(300), damage: func(t testing.TB, dir string) {
			setField(t, dir, 300, batchAt(t, dir, 300, 500).pos, batch.OffCRC, []byte{9, 9, 9, 9})
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 500, ClassCorruptUnflushed)
			if len(r.Segments) != 2 || exists(dir, "00000000000000000600.log") || r.RecoveryPoint != 300 {
				t.Errorf("segments %+v RP %d", r.Segments, r.RecoveryPoint)
			}
			if !slices.Contains(r.SnapshotsDiscarded, 600) || !slices.Contains(r.SnapshotsDiscarded, 750) {
				t.Errorf("discarded %v", r.SnapshotsDiscarded)
			}
			if len(r.Epochs) != 2 {
				t.Errorf("epochs %+v", r.Epochs)
			}
		}},
		{id: "E3", opts: unclean(600), damage: func(t testing.TB, dir string) {
			for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex, filenames.TxnIndex} {
				_ = os.Remove(segPath(dir, 300, k))
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			expectNote(t, r, kindGap) // a gap is legal in Kafka (compaction): noted, not damage
			if exists(dir, "00000000000000000300.snapshot") {
				t.Error("stray snapshot 300 kept")
			}
		}, persistent: true},
		{id: "E4", opts: unclean(600), damage: func(t testing.TB, dir string) {
			writeSegment(t, dir, 700, 700, 800)
		}, check: func(t testing.TB, r *Report, dir string) {
			if r.LogEndOffset != 800 || r.Truncation == nil || r.Truncation.Offset != 700 || r.Truncation.SegmentBaseOffset != 600 {
				t.Errorf("truncation %+v", r.Truncation)
			}
			expectProblem(t, r, kindOverlap)
		}},
		{id: "E5", opts: unclean(300), damage: func(t testing.TB, dir string) {
			for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex} {
				_ = os.Remove(segPath(dir, 600, k))
			}
			writeSegment(t, dir, 500, 0, 0)
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 600, "")
			if !exists(dir, "00000000000000000600.log") || exists(dir, "00000000000000000500.log") {
				t.Error("empty segment not moved to 600")
			}
		}},
		{id: "E6", opts: unclean(600), damage: func(t testing.TB, dir string) {
			writeSegment(t, dir, 900, 0, 0)
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 900, "")
			if hasProblem(r, kindGap) || hasProblem(r, kindOverlap) {
				t.Errorf("legal gap reported: %+v", r.Problems)
			}
		}},
		{id: "E7", opts: unclean(-1), damage: func(t testing.TB, dir string) { emptyDir(t, dir) },
			check: func(t testing.TB, r *Report, dir string) {
				expectCut(t, r, 0, "")
				if !exists(dir, "00000000000000000000.log") {
					t.Error("no segment created")
				}
			}},
		{id: "E8", opts: Options{RecoveryPoint: -1, LogStartOffset: 500, Segment: testCfg, Now: testNow},
			damage: func(t testing.TB, dir string) { emptyDir(t, dir) },
			check: func(t testing.TB, r *Report, dir string) {
				expectCut(t, r, 500, "")
				if !exists(dir, "00000000000000000500.log") || r.LogStartOffset != 500 {
					t.Error("no segment at 500")
				}
			}},
		{id: "E9", opts: Options{RecoveryPoint: 600, LogStartOffset: 1000, Segment: testCfg, Now: testNow},
			check: func(t testing.TB, r *Report, dir string) {
				expectCut(t, r, 1000, "")
				if len(r.Segments) != 1 || r.Segments[0].BaseOffset != 1000 || len(r.Epochs) != 0 || r.Producers != 0 {
					t.Errorf("segments %+v epochs %+v producers %d", r.Segments, r.Epochs, r.Producers)
				}
				expectProblem(t, r, kindLogStart)
			}, persistent: false},
		{id: "E11", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.WriteFile(filepath.Join(dir, "foo.log"), []byte("x"), 0o644)
			_ = os.WriteFile(filepath.Join(dir, "bar.index"), []byte("x"), 0o644)
		}, check: func(t testing.TB, r *Report, dir string) {
			expectProblem(t, r, kindForeignName)
			if !exists(dir, "foo.log") || !exists(dir, "bar.index") {
				t.Error("foreign files touched")
			}
		}, persistent: true},
		{id: "E12", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.WriteFile(filepath.Join(dir, "5.log"), []byte("x"), 0o644)
		}, check: func(t testing.TB, r *Report, dir string) {
			expectProblem(t, r, kindForeignName)
			if exists(dir, "00000000000000000005.log") {
				t.Error("canonical segment 5 created")
			}
		}, persistent: true},
		{id: "F1", opts: clean(), damage: func(t testing.TB, dir string) {
			copySegment(t, dir, 300, 300, filenames.Cleaned)
		}, check: func(t testing.TB, r *Report, dir string) { expectChange(t, r, kindSwap); expectCut(t, r, 750, "") }},
		{id: "F2", opts: clean(), damage: func(t testing.TB, dir string) {
			copySegment(t, dir, 600, 600, filenames.Swap)
			copySegment(t, dir, 300, 300, filenames.Cleaned)
		}, check: func(t testing.TB, r *Report, dir string) { expectChange(t, r, kindSwap); expectCut(t, r, 750, "") }},
		{id: "F3", opts: clean(), damage: func(t testing.TB, dir string) {
			copySegment(t, dir, 300, 300, filenames.Swap)
			copySegment(t, dir, 600, 600, filenames.Swap)
		}, check: func(t testing.TB, r *Report, dir string) {
			expectChange(t, r, kindSwap)
			expectCut(t, r, 750, "")
			if exists(dir, "00000000000000000300.log.swap") || !exists(dir, "00000000000000000300.log") {
				t.Error("swap not completed")
			}
		}},
		{id: "F4", opts: clean(), damage: func(t testing.TB, dir string) {
			copySegment(t, dir, 300, 300, filenames.Swap)
			renameSegment(t, dir, 300, filenames.Deleted)
		}, check: func(t testing.TB, r *Report, dir string) { expectCut(t, r, 750, ""); expectChange(t, r, kindLeftover) }},
		{id: "F5", opts: clean(), damage: func(t testing.TB, dir string) {
			if err := os.Rename(segPath(dir, 300, filenames.Index), segPath(dir, 300, filenames.Index)+filenames.Swap); err != nil {
				t.Fatal(err)
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			if !exists(dir, "00000000000000000300.index") {
				t.Error("index swap not renamed")
			}
		}},
		{id: "F6", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.WriteFile(filepath.Join(dir, "00000000000000000100.log.deleted"), []byte("x"), 0o644)
			_ = os.WriteFile(filepath.Join(dir, "00000000000000000100.snapshot.deleted"), []byte("x"), 0o644)
		}, check: func(t testing.TB, r *Report, dir string) {
			if exists(dir, "00000000000000000100.log.deleted") || len(r.RemovedFiles) != 2 {
				t.Errorf("removed %v", r.RemovedFiles)
			}
		}},
		{id: "F7", opts: clean(), damage: func(t testing.TB, dir string) {
			copySegment(t, dir, 300, 300, filenames.Swap)
			setField(t, dir, 300, 0, 0, nil)
			patch(t, segPath(dir, 300, filenames.Log)+filenames.Swap, func(b []byte) []byte { b[batch.OffCRC] ^= 0xff; return b })
		}, check: func(t testing.TB, r *Report, dir string) {
			expectProblem(t, r, kindSwap)
			expectCut(t, r, 750, "")
			if exists(dir, "00000000000000000300.log.swap") {
				t.Error("invalid swap kept")
			}
		}},
		{id: "G1", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.Truncate(filepath.Join(dir, "00000000000000000750.snapshot"), 20)
		}, check: func(t testing.TB, r *Report, dir string) {
			if r.SnapshotsUsed == nil || *r.SnapshotsUsed != 600 || !slices.Contains(r.SnapshotsDiscarded, 750) || !exists(dir, "00000000000000000750.snapshot") {
				t.Errorf("used %v discarded %v", r.SnapshotsUsed, r.SnapshotsDiscarded)
			}
			if r.Producers != 2 || r.LastStableOffset != 730 {
				t.Errorf("producers %d LSO %d", r.Producers, r.LastStableOffset)
			}
		}},
		{id: "G2", opts: clean(), damage: func(t testing.TB, dir string) {
			for _, o := range []int64{300, 600, 750} {
				patch(t, filepath.Join(dir, filenames.Make(o, filenames.Snapshot)), func(b []byte) []byte { b[3] ^= 0xff; return b })
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			if r.SnapshotsUsed != nil || len(r.SnapshotsDiscarded) != 3 || r.Producers != 2 || r.LastStableOffset != 730 {
				t.Errorf("used %v discarded %v producers %d", r.SnapshotsUsed, r.SnapshotsDiscarded, r.Producers)
			}
		}},
		{id: "G3", opts: clean(), damage: func(t testing.TB, dir string) {
			for _, o := range []int64{300, 600, 750} {
				_ = os.Remove(filepath.Join(dir, filenames.Make(o, filenames.Snapshot)))
			}
		}, check: func(t testing.TB, r *Report, dir string) {
			if r.Producers != 2 || r.LastStableOffset != 730 || !exists(dir, "00000000000000000750.snapshot") {
				t.Errorf("producers %d LSO %d", r.Producers, r.LastStableOffset)
			}
		}},
		{id: "G4", opts: clean(), damage: func(t testing.TB, dir string) {
			copyFileT(t, filepath.Join(dir, "00000000000000000750.snapshot"), filepath.Join(dir, "00000000000000000900.snapshot"))
		}, check: func(t testing.TB, r *Report, dir string) {
			if !slices.Contains(r.SnapshotsDiscarded, 900) || exists(dir, "00000000000000000900.snapshot") {
				t.Errorf("discarded %v", r.SnapshotsDiscarded)
			}
		}},
		{id: "G5", opts: clean(), damage: func(t testing.TB, dir string) {
			copyFileT(t, filepath.Join(dir, "00000000000000000300.snapshot"), filepath.Join(dir, "00000000000000000450.snapshot"))
		}, check: func(t testing.TB, r *Report, dir string) {
			if exists(dir, "00000000000000000450.snapshot") || !exists(dir, "00000000000000000750.snapshot") {
				t.Error("stray snapshot kept")
			}
		}},
		{id: "G6", opts: clean(), damage: func(t testing.TB, dir string) {
			patch(t, filepath.Join(dir, "00000000000000000750.snapshot"), func(b []byte) []byte { copy(b[6:], be32(1000)); return b })
		}, check: func(t testing.TB, r *Report, dir string) {
			if r.SnapshotsUsed == nil || *r.SnapshotsUsed != 600 {
				t.Errorf("used %v", r.SnapshotsUsed)
			}
		}},
		{id: "G7", opts: clean(), damage: func(t testing.TB, dir string) {
			writeEpochs(t, dir, []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 450}, {Epoch: 2, StartOffset: 900}})
		}, check: func(t testing.TB, r *Report, dir string) { expectEpochs(t, r, dir) }},
		{id: "G8", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.WriteFile(filepath.Join(dir, epochFileName), []byte("0\n5\nbad line\n"), 0o644)
		}, check: func(t testing.TB, r *Report, dir string) {
			expectEpochs(t, r, dir)
			expectProblem(t, r, kindEpochCheckpoint)
		}},
		{id: "G9", opts: clean(), damage: func(t testing.TB, dir string) {
			_ = os.Remove(filepath.Join(dir, epochFileName))
		}, check: func(t testing.TB, r *Report, dir string) {
			expectEpochs(t, r, dir)
			expectProblem(t, r, kindEpochCheckpoint) // missing, rebuilt
		}},
		{id: "H3", opts: clean(), damage: func(t testing.TB, dir string) {
			appendBytes(t, segPath(dir, 600, filenames.Log), []byte("torn!"))
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, ClassTornTail)
			expectProblem(t, r, kindCleanMarker)
		}},
		{id: "H4", opts: clean(), damage: func(t testing.TB, dir string) {
			appendBytes(t, segPath(dir, 300, filenames.Log), make([]byte, 64<<10))
		}, check: func(t testing.TB, r *Report, dir string) {
			expectCut(t, r, 750, "")
			expectProblem(t, r, kindLostTrim)
			expectStatus(t, r, StatusRepaired)
		}},
	}
}

func emptyDir(t testing.TB, dir string) {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		_ = os.RemoveAll(filepath.Join(dir, de.Name()))
	}
}

func copyFileT(t testing.TB, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copySegment copies the files of segment from to segment to with a
// transient suffix.
func copySegment(t testing.TB, dir string, from, to int64, suffix string) {
	for _, k := range segmentKinds {
		if exists(dir, filenames.Make(from, k)) {
			copyFileT(t, segPath(dir, from, k), segPath(dir, to, k)+suffix)
		}
	}
}

func renameSegment(t testing.TB, dir string, base int64, suffix string) {
	for _, k := range segmentKinds {
		if exists(dir, filenames.Make(base, k)) {
			if err := os.Rename(segPath(dir, base, k), segPath(dir, base, k)+suffix); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkVerdict checks the rules that make a report's verdict trustworthy:
// the status is "problems" under DryRun exactly when a problem is named;
// the cause of a truncation is a problem naming the cut segment's .log at
// the cut's position; every problem names a file or the directory with a
// kind and a detail; a change names its file, action, kind and reason.
func checkVerdict(t testing.TB, r *Report, dryRun bool) {
	t.Helper()
	if dryRun && (r.Status == StatusProblems) != (len(r.Problems) > 0) {
		t.Errorf("DryRun status %s with problems %+v", r.Status, r.Problems)
	}
	if !dryRun && r.Status == StatusProblems && len(r.Problems) == 0 {
		t.Errorf("status problems naming none")
	}
	if tr := r.Truncation; tr != nil {
		// Every cut is a problem at its position, but a zero tail (the
		// unwritten end of an active segment) is a note.
		name := filenames.Make(tr.SegmentBaseOffset, filenames.Log)
		named := func(p Problem) bool { return p.File == name && p.Position == tr.Position }
		if tr.Class == ClassZeroTail {
			if slices.ContainsFunc(r.Problems, named) || !slices.ContainsFunc(r.Notes, named) {
				t.Errorf("zero-tail truncation %+v: want a note, not a problem (problems %+v, notes %+v)", tr, r.Problems, r.Notes)
			}
		} else if !slices.ContainsFunc(r.Problems, named) {
			t.Errorf("truncation %+v not among the problems %+v", tr, r.Problems)
		}
	}
	for _, p := range r.Problems {
		if p.Kind == "" || p.Detail == "" {
			t.Errorf("problem %+v", p)
		}
	}
	for _, c := range r.Changes {
		if c.File == "" || c.Action == "" || c.Kind == "" || c.Reason == "" {
			t.Errorf("change %+v", c)
		}
	}
}

// changeKeys lists a report's changes as file/action/kind, sorted.
func changeKeys(r *Report) []string {
	var out []string
	for _, c := range r.Changes {
		out = append(out, c.File+" "+c.Action+" "+c.Kind)
	}
	sort.Strings(out)
	return out
}

func writeEpochs(t testing.TB, dir string, e []checkpoint.EpochEntry) {
	if err := checkpoint.WriteLeaderEpochs(filepath.Join(dir, epochFileName), e); err != nil {
		t.Fatal(err)
	}
}

func expectEpochs(t testing.TB, r *Report, dir string) {
	t.Helper()
	want := []EpochReport{{0, 0}, {1, 450}}
	if !slices.Equal(r.Epochs, want) {
		t.Errorf("epochs %+v", r.Epochs)
	}
	got, err := checkpoint.ReadLeaderEpochs(filepath.Join(dir, epochFileName))
	if err != nil || len(got) != 2 || got[1] != (checkpoint.EpochEntry{Epoch: 1, StartOffset: 450}) {
		t.Errorf("file %+v %v", got, err)
	}
}

// TestCases runs every damage case three ways: DryRun (every file
// byte-identical afterwards, same findings), the repair (checked, then the
// directory must be loadable by the Log), and a second run (J2: ok,
// nothing changed).
func TestCases(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.id, func(t *testing.T) {
			dir := fixture(t)
			if c.damage != nil {
				c.damage(t, dir)
			}
			before := testutil.HashTree(t, dir)
			dry := c.opts
			dry.DryRun = true
			dr := mustRun(t, dir, dry)
			if d := diffHashes(before, testutil.HashTree(t, dir)); len(d) > 0 {
				t.Fatalf("DryRun changed %v", d)
			}
			r := mustRun(t, dir, c.opts)
			c.check(t, r, dir)
			if dr.LogEndOffset != r.LogEndOffset || (dr.Truncation == nil) != (r.Truncation == nil) ||
				(r.Truncation != nil && *dr.Truncation != *r.Truncation) {
				t.Errorf("DryRun predicted LEO %d truncation %+v; the repair gave LEO %d truncation %+v",
					dr.LogEndOffset, dr.Truncation, r.LogEndOffset, r.Truncation)
			}
			checkVerdict(t, dr, true)
			checkVerdict(t, r, false)
			if d, w := changeKeys(dr), changeKeys(r); !slices.Equal(d, w) {
				t.Errorf("DryRun predicted changes %v; the repair made %v", d, w)
			}
			checkLoadable(t, dir)
			// J2: a second run finds nothing to do.
			mid := testutil.HashTree(t, dir)
			o2 := c.opts
			o2.Clean = false
			o2.RecoveryPoint = r.RecoveryPoint
			o2.LogStartOffset = r.LogStartOffset
			r2 := mustRun(t, dir, o2)
			if d := diffHashes(mid, testutil.HashTree(t, dir)); len(d) > 0 {
				t.Errorf("second run changed %v (report %+v)", d, r2.Problems)
			}
			if !c.persistent && r2.Status != StatusOK {
				t.Errorf("second run status %s: %+v", r2.Status, r2.Problems)
			}
			if r2.LogEndOffset != r.LogEndOffset {
				t.Errorf("second run LEO %d", r2.LogEndOffset)
			}
		})
	}
}

// expectKeptWithEpochNote checks that nothing was cut, the log ends at
// leo and the leader-epoch drop is reported as a note.
func expectKeptWithEpochNote(t testing.TB, r *Report, leo int64) {
	t.Helper()
	if r.Truncation != nil {
		t.Errorf("cut %+v, want none (Kafka keeps batches whose epoch decreases)", r.Truncation)
	}
	if r.LogEndOffset != leo {
		t.Errorf("LEO %d, want %d", r.LogEndOffset, leo)
	}
	found := false
	for _, p := range r.Notes {
		found = found || p.Kind == kindEpochDecrease
	}
	if !found {
		t.Errorf("no %s note in %+v", kindEpochDecrease, r.Notes)
	}
}

// TestRunLeavesNoMapping: a clean run checks each sealed segment's tail
// through a mapping when the .log is too large to read (here a zero tail
// past readSmallBytes) and unmaps it: a mapping kept per segment would
// hold a map area for each segment of every partition a broker opens
// (vm.max_map_count).
func TestRunLeavesNoMapping(t *testing.T) {
	dir := fixture(t)
	appendBytes(t, segPath(dir, 0, filenames.Log), make([]byte, 2*readSmallBytes))
	mustRun(t, dir, clean())
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if strings.Contains(line, dir) {
			t.Errorf("still mapped after the run: %s", line)
		}
	}
}
