package recovery

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/segment"
)

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
		hdrs, err := batch.CheckAll(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(raw, hdrs, segment.Stamp{Assign: true, NextOffset: 2 * i, LeaderEpoch: 1}, &out); err != nil {
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
