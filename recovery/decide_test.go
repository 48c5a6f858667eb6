package recovery

import (
	"math"
	"os"
	"reflect"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
)

// TestBatchBaseAtPreviousLastOffsetCut: a batch whose base offset equals
// the previous batch's last offset reuses an offset; the scan must stop
// there (offsets strictly increase), not keep it.
func TestBatchBaseAtPreviousLastOffsetCut(t *testing.T) {
	dir := fixture(t)
	last := batchAt(t, dir, 600, 740) // 740..749, after 730..739
	setField(t, dir, 600, last.pos, batch.OffBaseOffset, be64(739))
	r := mustRun(t, dir, unclean(600))
	expectCut(t, r, 740, ClassCorruptUnflushed)
	if r.Truncation != nil && r.Truncation.Position != last.pos {
		t.Errorf("cut at position %d, want %d", r.Truncation.Position, last.pos)
	}
}

// TestZeroTailBeforeOverlappingSegment: zeros after the data of a sealed
// segment are a lost trim only when the next segment continues at or
// after its end. When the next segment starts inside the zero-tailed
// segment's offsets, it does not continue it: the zeros are a failure of
// that segment and the cut goes there, dropping the later segment.
func TestZeroTailBeforeOverlappingSegment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		next    int64 // base (and first offset) of the segment after S1
		leo     int64
		class   string
		trimmed bool
	}{
		{name: "continues", next: 600, leo: 750, class: "", trimmed: true},
		{name: "overlaps", next: 550, leo: 600, class: ClassCorruptUnflushed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t)
			appendBytes(t, segPath(dir, 300, filenames.Log), make([]byte, 4096))
			if tc.next != 600 {
				for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex, filenames.TxnIndex} {
					_ = os.Remove(segPath(dir, 600, k))
				}
				_ = os.Remove(dir + "/00000000000000000600.snapshot")
				_ = os.Remove(dir + "/00000000000000000750.snapshot")
				writeSegment(t, dir, tc.next, tc.next, tc.next+100)
			}
			r := mustRun(t, dir, unclean(300))
			expectCut(t, r, tc.leo, tc.class)
			if got := hasProblem(r, kindLostTrim); got != tc.trimmed {
				t.Errorf("lost-trim reported %v, want %v (problems %+v)", got, tc.trimmed, r.Problems)
			}
			if !tc.trimmed {
				if exists(dir, filenames.Make(tc.next, filenames.Log)) {
					t.Errorf("segment %d kept after the cut in S1", tc.next)
				}
			}
		})
	}
}

// TestDamageInRecoveryPointPage: corruption below the recovery point's
// position but inside the 4 KiB page holding it may be a page the kernel
// had not written back (recovery.md §2.8): it is corrupt-unflushed; only
// corruption in an earlier page is corrupt-flushed.
func TestDamageInRecoveryPointPage(t *testing.T) {
	probe := fixture(t)
	bs := batchesOf(t, probe, 600)
	j := -1
	for i := 1; i < len(bs); i++ {
		page := bs[i].pos &^ (pageSize - 1)
		if page > 0 && bs[i-1].pos >= page && bs[i-1].pos > bs[0].pos {
			j = i
			break
		}
	}
	if j < 0 {
		t.Fatalf("no two batches of S2 share a page after the first: %+v", bs)
	}
	rp := bs[j].base
	page := bs[j].pos &^ (pageSize - 1)
	earlier := -1
	for i := range bs {
		if bs[i].pos+int64(bs[i].size) <= page && bs[i].pos > 0 {
			earlier = i
		}
	}
	if earlier < 0 {
		t.Fatalf("no batch of S2 wholly in a page before %d", page)
	}
	for _, tc := range []struct {
		name   string
		damage int
		class  string
	}{
		{"same page", j - 1, ClassCorruptUnflushed},
		{"earlier page", earlier, ClassCorruptFlushed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t)
			b := bs[tc.damage]
			patch(t, segPath(dir, 600, filenames.Log), func(data []byte) []byte {
				data[b.pos+batch.HeaderSize+2] ^= 0xff // a record byte: CRC mismatch
				return data
			})
			r := mustRun(t, dir, unclean(rp))
			expectCut(t, r, b.base, tc.class)
			if r.Truncation != nil && r.Truncation.Position != b.pos {
				t.Errorf("cut at %d, want %d (recovery point %d at position %d, page %d)", r.Truncation.Position, b.pos, rp, bs[j].pos, page)
			}
		})
	}
}

// TestRecoveryPointAfterRun: a clean directory that needed no cut is
// durable to its end, so the recovery point Run hands the log is the log
// end even when the checkpointed one lags; an unclean run keeps the
// checkpointed value (what lies above it was validated, not synced).
func TestRecoveryPointAfterRun(t *testing.T) {
	o := clean()
	o.RecoveryPoint = 0
	if r := mustRun(t, fixture(t), o); r.RecoveryPoint != 750 {
		t.Errorf("clean run with recovery point 0: %d, want the log end 750", r.RecoveryPoint)
	}
	if r := mustRun(t, fixture(t), unclean(300)); r.RecoveryPoint != 300 {
		t.Errorf("unclean run from 300: recovery point %d, want 300", r.RecoveryPoint)
	}
}

// TestOverlapDropsEpochsOfCutRegion: when a later segment overlaps S2,
// S2 is cut before it, and the leader epochs first seen in the cut part
// of S2 must not enter the rebuilt epoch list (they would shadow the
// kept segment's lower epochs).
func TestOverlapDropsEpochsOfCutRegion(t *testing.T) {
	dir := fixture(t)
	for _, b := range batchesOf(t, dir, 600) {
		if b.base >= 720 {
			setField(t, dir, 600, b.pos, batch.OffPartitionLeaderEpoch, be32(2))
		}
	}
	writeSegment(t, dir, 700, 700, 800) // epoch 1, offsets 700..799
	r := mustRun(t, dir, unclean(600))
	if r.LogEndOffset != 800 || r.Truncation == nil || r.Truncation.Offset != 700 {
		t.Fatalf("LEO %d, truncation %+v; want 800 and S2 cut at 700", r.LogEndOffset, r.Truncation)
	}
	expectProblem(t, r, kindOverlap)
	if want := []EpochReport{{0, 0}, {1, 450}}; !reflect.DeepEqual(r.Epochs, want) {
		t.Fatalf("epochs %+v, want %+v: an epoch of the cut region of S2 was kept", r.Epochs, want)
	}
}

// TestRelativeOffsetBoundary: a batch whose last offset is exactly
// MaxInt32 above the segment base still fits the index's relative
// offsets (Kafka: offset - baseOffset <= Int.MaxValue) and is kept; one
// more does not fit and is cut.
func TestRelativeOffsetBoundary(t *testing.T) {
	for _, tc := range []struct {
		last int64 // last offset of the second batch
		leo  int64
	}{
		{last: math.MaxInt32, leo: math.MaxInt32 + 1},
		{last: math.MaxInt32 + 1, leo: 10},
	} {
		dir := t.TempDir()
		var out []byte
		var bld batch.Builder
		for _, base := range []int64{0, tc.last} {
			n := 10
			if base != 0 {
				n = 1
			}
			spec := batch.NewBatchSpec(base)
			spec.PartitionLeaderEpoch = 1
			recs := make([]batch.RecordSpec, n)
			for i := range recs {
				recs[i] = batch.RecordSpec{Timestamp: baseTs + int64(i), Value: []byte("x")}
			}
			var err error
			if out, err = bld.AppendBatch(out, &spec, recs); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(segPath(dir, 0, filenames.Log), out, 0o644); err != nil {
			t.Fatal(err)
		}
		r := mustRun(t, dir, unclean(0))
		if r.LogEndOffset != tc.leo {
			t.Errorf("batch with last offset %d in segment 0: LEO %d, want %d (truncation %+v)", tc.last, r.LogEndOffset, tc.leo, r.Truncation)
		}
	}
}

// TestLogStartIsFirstSegmentBase: the log start offset is at least the
// first remaining segment's base, whatever the checkpoint says.
func TestLogStartIsFirstSegmentBase(t *testing.T) {
	dir := fixture(t)
	for _, k := range segmentKinds {
		_ = os.Remove(segPath(dir, 0, k))
	}
	r := mustRun(t, dir, unclean(300))
	if r.LogStartOffset != 300 {
		t.Fatalf("log start %d with segments from 300 on, want 300", r.LogStartOffset)
	}
}

// TestZeroSegmentBeforeInvalidSegmentIsTheCut: a sealed segment whose
// bytes are all zeros (a power cut kept its trim and lost its data)
// followed by a segment that begins with invalid bytes is no lost trim:
// nothing valid follows it, so the log is cut there, at its base, and
// the later segment goes. Reading the zeros as a lost trim put the cut
// in the later segment, above the log end the recovery left.
func TestZeroSegmentBeforeInvalidSegmentIsTheCut(t *testing.T) {
	dir := fixture(t)
	patch(t, segPath(dir, 300, filenames.Log), func(b []byte) []byte { return make([]byte, len(b)) })
	patch(t, segPath(dir, 600, filenames.Log), func(b []byte) []byte { clear(b[:512]); return b })
	r := mustRun(t, dir, unclean(300))
	expectCut(t, r, 300, ClassCorruptUnflushed)
	if r.Truncation != nil && (r.Truncation.SegmentBaseOffset != 300 || r.Truncation.Offset != 300) {
		t.Errorf("cut %+v, want segment 300 at offset 300", *r.Truncation)
	}
	if hasProblem(r, kindLostTrim) {
		t.Errorf("zeros before an invalid segment reported as a lost trim: %+v", r.Problems)
	}
	if exists(dir, filenames.Make(600, filenames.Log)) {
		t.Error("segment 600 kept after the cut in segment 300")
	}
}
