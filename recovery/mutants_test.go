package recovery

// Tests that kill the mutants a mutation pass found surviving in this
// package (issue 10 item 11): each pins one rule the other tests did not
// look at closely enough to notice a small edit.

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/segment"
)

// TestReplayStartsAtRecoveredSegment: in a clean directory whose S1 lost
// its offset index (so S1 is recovered and its .txnindex rebuilt), the
// producer replay must start at or below S1's base, not at the snapshot
// at the log end: a replay from that snapshot sees none of S1's aborted
// transactions and the rebuilt .txnindex loses them (read_committed
// consumers would then see aborted records as committed).
func TestReplayStartsAtRecoveredSegment(t *testing.T) {
	dir := fixture(t)
	txnPath := segPath(dir, 300, filenames.TxnIndex)
	before, err := os.ReadFile(txnPath)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := index.DecodeTxnIndex(before)
	if err != nil || len(entries) != 1 || entries[0].ProducerID != 2 || entries[0].LastOffset != 409 {
		t.Fatalf("fixture .txnindex of S1: %+v (%v)", entries, err)
	}
	if err := os.Remove(segPath(dir, 300, filenames.Index)); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, dir, clean())
	expectCut(t, r, 750, "")
	if r.SnapshotsUsed != nil && *r.SnapshotsUsed > 300 {
		t.Errorf("producer state loaded from the snapshot at %d, above the recovered segment 300", *r.SnapshotsUsed)
	}
	after, err := os.ReadFile(txnPath)
	if err != nil {
		t.Fatalf("S1's .txnindex after recovery: %v (removed: %v)", err, r.RemovedFiles)
	}
	if !bytes.Equal(after, before) {
		got, _ := index.DecodeTxnIndex(after)
		t.Fatalf("S1's .txnindex rebuilt as %+v, want %+v", got, entries)
	}
	if r.Producers != 2 || r.LastStableOffset != 730 {
		t.Errorf("producers %d, LSO %d; want 2 and 730 (P2's open transaction)", r.Producers, r.LastStableOffset)
	}
}

// TestReplayAppliesBatchAtSnapshotOffset: a one-record batch at exactly
// the offset of the snapshot the replay starts from (its last offset is
// the snapshot offset) is after the snapshot and must be replayed.
func TestReplayAppliesBatchAtSnapshotOffset(t *testing.T) {
	dir := fixture(t)
	raw := encodeBatch(fixtureBatch{records: 1, pid: 3}, 750, map[int64]int32{})
	v := batch.View(raw)
	v.SetBaseOffset(750)
	v.SetPartitionLeaderEpoch(1)
	for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex} {
		var b []byte
		if k == filenames.Log {
			b = raw
		}
		if err := os.WriteFile(segPath(dir, 750, k), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := mustRun(t, dir, unclean(750))
	expectCut(t, r, 751, "")
	if r.SnapshotsUsed == nil || *r.SnapshotsUsed != 750 {
		t.Fatalf("snapshot used %v, want the one at 750", r.SnapshotsUsed)
	}
	if r.Producers != 3 {
		t.Fatalf("%d producers after the replay, want 3: the batch of producer 3 at offset 750 was not replayed", r.Producers)
	}
}

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

// TestRebuiltIndexIntervalIsMoreThan: with batches of exactly
// IndexIntervalBytes, an index entry is due only when more than the
// interval was appended since the last one (the live writer and Kafka's
// LogSegment: bytesSinceLastIndexEntry > indexIntervalBytes), so the
// rebuilt offset and time indexes are byte-identical to those the live
// writer left.
func TestRebuiltIndexIntervalIsMoreThan(t *testing.T) {
	dir := t.TempDir()
	one := func(offset int64) []byte {
		spec := batch.NewBatchSpec(0)
		recs := make([]batch.RecordSpec, 2)
		for i := range recs {
			recs[i] = batch.RecordSpec{Timestamp: baseTs + offset + int64(i), Key: []byte("k"), Value: []byte("0123456789")}
		}
		var bld batch.Builder
		out, err := bld.AppendBatch(nil, &spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	size := int64(len(one(0)))
	cfg := testCfg
	cfg.IndexIntervalBytes = size
	s, err := segment.Create(dir, 0, cfg, testNow())
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := int64(0); i < n; i++ {
		raw := one(2 * i)
		if int64(len(raw)) != size {
			t.Fatalf("batch %d is %d bytes, want %d", i, len(raw), size)
		}
		var out segment.Appended
		if err := s.Append(raw, segment.Stamp{Assign: true, NextOffset: 2 * i, LeaderEpoch: 1}, &out); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	live := map[string][]byte{}
	for _, k := range []string{filenames.Index, filenames.TimeIndex} {
		b, err := os.ReadFile(segPath(dir, 0, k))
		if err != nil {
			t.Fatal(err)
		}
		live[k] = b
		if err := os.Remove(segPath(dir, 0, k)); err != nil {
			t.Fatal(err)
		}
	}
	// "More than" the interval: entries at positions 2·size, 4·size, …
	var want []index.OffsetEntry
	for i := int64(2); i < n; i += 2 {
		want = append(want, index.OffsetEntry{Offset: 2*i + 1, Position: int32(i * size)})
	}
	got := decodeOffsets(t, live[filenames.Index])
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("live writer's offset index %+v, want %+v", got, want)
	}
	o := unclean(0)
	o.Segment = cfg
	r := mustRun(t, dir, o)
	expectRebuilt(t, r, 0)
	for _, k := range []string{filenames.Index, filenames.TimeIndex} {
		b, err := os.ReadFile(segPath(dir, 0, k))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, live[k]) {
			t.Errorf("rebuilt %s differs from the live writer's: %d bytes, want %d (offset entries %+v)",
				k, len(b), len(live[k]), decodeOffsets(t, b))
		}
	}
}

// decodeOffsets decodes an offset index file of segment 0.
func decodeOffsets(t testing.TB, b []byte) []index.OffsetEntry {
	t.Helper()
	var out []index.OffsetEntry
	for len(b) >= 8 {
		rel := int64(int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])))
		pos := int32(uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]))
		out = append(out, index.OffsetEntry{Offset: rel, Position: pos})
		b = b[8:]
	}
	return out
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

// TestSwapAtSmallestCleanedRolledBack: a .swap whose base offset equals
// the smallest .cleaned one belongs to the interrupted replacement (Kafka
// deletes every swap at or above the smallest cleaned offset): it is
// rolled back and the original segment stays as it was, even when the
// swap is itself a valid segment.
func TestSwapAtSmallestCleanedRolledBack(t *testing.T) {
	dir := fixture(t)
	orig, err := os.ReadFile(segPath(dir, 300, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	copySegment(t, dir, 300, 300, filenames.Cleaned)
	copySegment(t, dir, 300, 300, filenames.Swap)
	// A valid but shorter swap: only S1's first five batches.
	cut := batchesOf(t, dir, 300)[5].pos
	if err := os.Truncate(segPath(dir, 300, filenames.Log)+filenames.Swap, cut); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, dir, clean())
	expectChange(t, r, kindSwap)
	expectCut(t, r, 750, "")
	got, err := os.ReadFile(segPath(dir, 300, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, orig) {
		t.Fatalf("S1 is %d bytes after recovery, want the original %d: the swap at the smallest cleaned offset was completed", len(got), len(orig))
	}
	if exists(dir, filenames.Make(300, filenames.Log)+filenames.Swap) {
		t.Error("the swap was left in place")
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

// writeLiveSegment writes a closed segment at base with the live writer,
// one batch per element of bs (stamped from base on at epoch 1).
func writeLiveSegment(t testing.TB, dir string, base int64, bs [][]byte) {
	t.Helper()
	s, err := segment.Create(dir, base, testCfg, testNow())
	if err != nil {
		t.Fatal(err)
	}
	next := base
	for _, raw := range bs {
		var out segment.Appended
		if err := s.Append(raw, segment.Stamp{Assign: true, NextOffset: next, LeaderEpoch: 1}, &out); err != nil {
			t.Fatal(err)
		}
		next = out.LastOffset + 1
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
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

// TestReplayProducerIDZero: producer id 0 is a valid producer id; its
// batches are replayed into the producer state like any other.
func TestReplayProducerIDZero(t *testing.T) {
	dir := t.TempDir()
	var bs [][]byte
	seq := map[int64]int32{}
	for i := int64(0); i < 3; i++ {
		bs = append(bs, encodeBatch(fixtureBatch{records: 2, pid: 0}, 2*i, seq))
	}
	writeLiveSegment(t, dir, 0, bs)
	r := mustRun(t, dir, unclean(0))
	if r.Producers != 1 {
		t.Fatalf("%d producers after replaying batches of producer 0, want 1", r.Producers)
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

// TestSwapReplacingTwoSegments: a completed compaction's .swap at 300
// holding the data of S1 and S2 replaces both originals: S2 is removed
// with the others of the swap's range, not left to overlap it.
func TestSwapReplacingTwoSegments(t *testing.T) {
	dir := fixture(t)
	s1, err := os.ReadFile(segPath(dir, 300, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := os.ReadFile(segPath(dir, 600, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	merged := append(append([]byte(nil), s1...), s2...)
	if err := os.WriteFile(segPath(dir, 300, filenames.Log)+filenames.Swap, merged, 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, dir, clean())
	expectChange(t, r, kindSwap)
	if hasProblem(r, kindOverlap) {
		t.Errorf("overlap after the swap: %+v", r.Problems)
	}
	if exists(dir, filenames.Make(600, filenames.Log)) {
		t.Error("S2 left beside the swap that replaced it")
	}
	got, err := os.ReadFile(segPath(dir, 300, filenames.Log))
	if err != nil || !bytes.Equal(got, merged) {
		t.Fatalf("segment 300 after the swap: %d bytes (%v), want the %d of the swap", len(got), err, len(merged))
	}
	if r.LogEndOffset != 750 {
		t.Errorf("LEO %d, want 750", r.LogEndOffset)
	}
}

// TestIndexesRebuiltListed: every segment whose index Run rewrote or
// removed is listed once in IndexesRebuilt.
func TestIndexesRebuiltListed(t *testing.T) {
	dir := fixture(t)
	for _, base := range []int64{0, 300} {
		if err := os.Remove(segPath(dir, base, filenames.Index)); err != nil {
			t.Fatal(err)
		}
	}
	// S0 holds no aborted transaction: a .txnindex entry there is stale.
	stale := index.AppendAbortedTxn(nil, index.AbortedTxn{ProducerID: 2, FirstOffset: 10, LastOffset: 20, LastStableOffset: 10})
	if err := os.WriteFile(segPath(dir, 0, filenames.TxnIndex), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, dir, clean())
	if want := []int64{0, 300}; !reflect.DeepEqual(r.IndexesRebuilt, want) {
		t.Fatalf("indexes rebuilt %v, want %v", r.IndexesRebuilt, want)
	}
	if exists(dir, filenames.Make(0, filenames.TxnIndex)) {
		t.Error("stale .txnindex of S0 kept")
	}

	// A stale .txnindex alone also counts as a rebuild.
	dir = fixture(t)
	if err := os.WriteFile(segPath(dir, 600, filenames.TxnIndex), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, dir, unclean(600))
	if !slices.Contains(r.IndexesRebuilt, 600) {
		t.Fatalf("indexes rebuilt %v, want 600 (stale .txnindex removed)", r.IndexesRebuilt)
	}
}

// TestSummaryLimitsProblems: Summary names the first three problems and
// counts the rest.
func TestSummaryLimitsProblems(t *testing.T) {
	r := &Report{Status: StatusProblems}
	for i := range 5 {
		r.Problems = append(r.Problems, Problem{File: fmt.Sprintf("f%d", i), Position: -1, Kind: "k", Detail: "d"})
	}
	s := r.Summary()
	for i, want := range []bool{true, true, true, false, false} {
		if got := strings.Contains(s, fmt.Sprintf("f%d:", i)); got != want {
			t.Errorf("Summary %q names problem %d: %v, want %v", s, i, got, want)
		}
	}
	if !strings.Contains(s, "and 2 more problems") {
		t.Errorf("Summary %q does not count the other two problems", s)
	}
}

// TestSecondRunWithManyProducers: with many producers (spread over the
// producer-state shards, whose order is unspecified) the snapshot at the
// log end that the first run wrote is recognised by the second, which
// changes nothing.
func TestSecondRunWithManyProducers(t *testing.T) {
	dir := t.TempDir()
	var bs [][]byte
	seq := map[int64]int32{}
	for pid := int64(10); pid < 74; pid++ {
		bs = append(bs, encodeBatch(fixtureBatch{records: 1, pid: pid}, pid-10, seq))
	}
	writeLiveSegment(t, dir, 0, bs)
	r := mustRun(t, dir, unclean(0))
	if r.Producers != 64 {
		t.Fatalf("%d producers, want 64", r.Producers)
	}
	before := hashDir(t, dir)
	o := unclean(r.RecoveryPoint)
	r2 := mustRun(t, dir, o)
	if d := diffHashes(before, hashDir(t, dir)); len(d) > 0 || r2.Status != StatusOK {
		t.Fatalf("second run: status %s, changed %v, problems %+v", r2.Status, d, r2.Problems)
	}
}
