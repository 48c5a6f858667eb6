package partlog

import (
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
)

// tsBatch builds a batch whose records carry the given timestamps.
func tsBatch(t testing.TB, c batch.Compression, tss ...int64) []byte {
	t.Helper()
	spec := batch.NewBatchSpec(0)
	spec.Compression = c
	recs := make([]batch.RecordSpec, len(tss))
	for i, ts := range tss {
		recs[i] = batch.RecordSpec{Timestamp: ts, Value: make([]byte, 200)}
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type tsRecord struct {
	offset, ts int64
	epoch      int32
}

// tsAll decodes every record of the log (the reference answer).
func tsAll(t testing.TB, l *Log) []tsRecord {
	t.Helper()
	var out []tsRecord
	for next := l.LogStartOffset(); next < l.LogEndOffset(); {
		v, err := l.Read(next, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		it := batch.NewIterator(v.Records, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			data, err := b.RecordData(nil, 1<<24)
			if err != nil {
				t.Fatal(err)
			}
			ri := b.Records(data)
			for r, ok := ri.Next(); ok; r, ok = ri.Next() {
				if r.Offset >= l.LogStartOffset() {
					out = append(out, tsRecord{r.Offset, r.Timestamp, b.PartitionLeaderEpoch()})
				}
			}
			next = b.NextOffset()
		}
		v.Release()
	}
	return out
}

// tsLog builds a log of several segments: increasing timestamps with
// one batch whose records go back in time, one compressed batch, and
// a batch without timestamps.
func tsLog(t testing.TB) (*Log, string, *Options) {
	t.Helper()
	o := smallOpts(t)
	o.SegmentBytes = 4 << 10
	o.IndexIntervalBytes = 300
	l, dir := openTestLog(t, o)
	epoch := int32(1)
	ts := int64(1_000_000)
	for i := 0; i < 60; i++ {
		var b []byte
		switch i % 10 {
		case 3: // timestamps go down inside the batch
			b = tsBatch(t, batch.CompressionNone, ts+50, ts+10, ts+30)
		case 6:
			b = tsBatch(t, batch.CompressionGzip, ts, ts+5, ts+7)
		case 8:
			b = tsBatch(t, batch.CompressionNone, -1, -1)
		default:
			b = tsBatch(t, batch.CompressionNone, ts, ts+1)
		}
		if i%20 == 19 {
			epoch++
		}
		if _, err := l.AppendAsLeader(b, epoch); err != nil {
			t.Fatal(err)
		}
		ts += 100
	}
	return l, dir, o
}

// TestOffsetForTimestamp checks ListOffsets semantics against a brute
// force over the decoded records, for every target around every record
// timestamp, before and after a reopen (sealed segments then answer from
// their .timeindex files), and the special values.
func TestOffsetForTimestamp(t *testing.T) {
	l, dir, o := tsLog(t)
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, have %v", l.Segments())
	}
	check := func(l *Log, what string) {
		recs := tsAll(t, l)
		targets := []int64{0, 1, 1 << 62}
		for _, r := range recs {
			targets = append(targets, r.ts-1, r.ts, r.ts+1)
		}
		for _, target := range targets {
			if target < 0 {
				continue
			}
			var want *tsRecord
			for i := range recs {
				if recs[i].ts >= target {
					want = &recs[i]
					break
				}
			}
			got, found, err := l.OffsetForTimestamp(target)
			if err != nil {
				t.Fatalf("%s: OffsetForTimestamp(%d): %v", what, target, err)
			}
			if want == nil {
				if found {
					t.Fatalf("%s: OffsetForTimestamp(%d) = %+v, want none", what, target, got)
				}
				continue
			}
			if !found || got.Offset != want.offset || got.Timestamp != want.ts || got.LeaderEpoch != want.epoch {
				t.Fatalf("%s: OffsetForTimestamp(%d) = %+v %v, want %+v", what, target, got, found, *want)
			}
		}
		var maxRec tsRecord
		maxRec.ts = -1
		for _, r := range recs {
			if r.ts > maxRec.ts {
				maxRec = r
			}
		}
		start, end := l.LogStartOffset(), l.LogEndOffset()
		for _, c := range []struct {
			name string
			ts   int64
			want TimestampOffset
			ok   bool
		}{
			{"latest", ListLatest, TimestampOffset{Timestamp: -1, Offset: end, LeaderEpoch: 4}, true},
			{"earliest", ListEarliest, TimestampOffset{Timestamp: -1, Offset: start, LeaderEpoch: recs[0].epoch}, true},
			{"earliest local", ListEarliestLocal, TimestampOffset{Timestamp: -1, Offset: start, LeaderEpoch: recs[0].epoch}, true},
			{"max timestamp", ListMaxTimestamp, TimestampOffset{Timestamp: maxRec.ts, Offset: maxRec.offset, LeaderEpoch: maxRec.epoch}, true},
			{"latest tiered", ListLatestTiered, TimestampOffset{}, false},
		} {
			got, ok, err := l.OffsetForTimestamp(c.ts)
			if err != nil || ok != c.ok || got != c.want {
				t.Errorf("%s: %s: %+v %v %v, want %+v %v", what, c.name, got, ok, err, c.want, c.ok)
			}
		}
	}
	check(l, "open")
	if err := l.SetLogStartOffset(l.Segments()[1] + 2); err != nil {
		t.Fatal(err)
	}
	check(l, "log start raised")
	o.LogStartOffset = l.LogStartOffset() // as OpenDir passes it from its checkpoint
	l2 := ltReopen(t, l, dir, o)
	check(l2, "reopened")
}

// TestOffsetForTimestampEmpty: an empty log answers none for timestamps
// and for the max timestamp, and offsets for the others.
func TestOffsetForTimestampEmpty(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	for _, c := range []struct {
		ts int64
		ok bool
	}{{0, false}, {1000, false}, {ListMaxTimestamp, false}, {ListLatest, true}, {ListEarliest, true}} {
		r, ok, err := l.OffsetForTimestamp(c.ts)
		if err != nil || ok != c.ok || (ok && r.Offset != 0) {
			t.Errorf("OffsetForTimestamp(%d) = %+v %v %v", c.ts, r, ok, err)
		}
	}
}

// BenchmarkOffsetForTimestamp: a lookup in a 100-segment log.
func BenchmarkOffsetForTimestamp(b *testing.B) {
	o := smallOpts(b)
	o.SegmentBytes = 16 << 10
	l, _ := openTestLog(b, o)
	ts := int64(1_000_000)
	for i := 0; i < 5000; i++ {
		if _, err := l.AppendAsLeader(tsBatch(b, batch.CompressionNone, ts, ts+1), 1); err != nil {
			b.Fatal(err)
		}
		ts += 10
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		target := 1_000_000 + int64(i*7919%5000)*10
		if _, ok, err := l.OffsetForTimestamp(target); err != nil || !ok {
			b.Fatal(err)
		}
		i++
	}
}

// TestOffsetForTimestampConcurrent: lookups running beside appends,
// retention and truncation never fail and answer inside the log.
func TestOffsetForTimestampConcurrent(t *testing.T) {
	o := smallOpts(t)
	o.SegmentBytes = 4 << 10
	o.RetentionBytes = 16 << 10
	o.FileDeleteDelayMs = -1
	l, _ := openTestLog(t, o)
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(done)
		for i := 0; i < 400; i++ {
			ts := int64(1_000_000 + i*100)
			if _, err := l.AppendAsLeader(tsBatch(t, batch.CompressionNone, ts, ts+1), 1); err != nil {
				errs <- err
				return
			}
			l.SetHighWatermark(l.LogEndOffset())
			switch i % 40 {
			case 20:
				if _, err := l.DeleteOldSegments(time.UnixMilli(0)); err != nil {
					errs <- err
					return
				}
			case 30:
				if _, err := l.TruncateAt(l.LogEndOffset() - 3); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	for {
		select {
		case <-done:
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			return
		default:
		}
		for _, ts := range []int64{1_000_000, 1_020_000, ListMaxTimestamp, ListEarliest} {
			r, ok, err := l.OffsetForTimestamp(ts)
			if err != nil {
				t.Fatalf("OffsetForTimestamp(%d): %v", ts, err)
			}
			if ok && r.Offset < 0 {
				t.Fatalf("OffsetForTimestamp(%d) = %+v", ts, r)
			}
		}
	}
}
