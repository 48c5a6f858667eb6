package recovery

import (
	"bytes"
	"os"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testutil"
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
	before := testutil.HashTree(t, dir)
	o := unclean(r.RecoveryPoint)
	r2 := mustRun(t, dir, o)
	if d := diffHashes(before, testutil.HashTree(t, dir)); len(d) > 0 || r2.Status != StatusOK {
		t.Fatalf("second run: status %s, changed %v, problems %+v", r2.Status, d, r2.Problems)
	}
}
