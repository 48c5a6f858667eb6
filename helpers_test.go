package partlog

import (
	"fmt"
	"testing"

	"github.com/partlog/partlog/batch"
)

// smallOpts are options for tests: small segments and indexes, no
// prefault goroutine, a private mapping cache.
func smallOpts(t testing.TB) *Options {
	t.Helper()
	c, err := NewMappingCache(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	return &Options{SegmentBytes: 64 << 10, MaxIndexBytes: 4096, IndexIntervalBytes: 512,
		PrefaultBytes: -1, MappingCache: c}
}

// openTestLog opens a log in a fresh directory and closes it at cleanup,
// after checking that it reads back consistently.
func openTestLog(t testing.TB, opts *Options) (*Log, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := verifyLog(l); err != nil {
			t.Errorf("consistency check: %v", err)
		}
		_ = l.Close()
	})
	return l, dir
}

// verifyLog reads the whole log and checks that batches are valid and
// offsets increase and stay within [start, end).
func verifyLog(l *Log) error {
	if l.closed.Load() {
		return nil
	}
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		v, err := l.Read(next, 1<<20, l.LogEndOffset())
		if err != nil {
			return err
		}
		if len(v.Records) == 0 {
			v.Release()
			return fmt.Errorf("empty read at %d below end %d", next, l.LogEndOffset())
		}
		it := batch.NewIterator(v.Records, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			if b.LastOffset() < next && b.BaseOffset() < l.LogStartOffset() {
				continue
			}
			next = b.NextOffset()
		}
		err = it.Err()
		v.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// makeBatch builds an uncompressed batch of n records of valueSize bytes
// with producer-side fields (base offset 0, epoch -1).
func makeBatch(t testing.TB, n, valueSize int, ts int64) []byte {
	t.Helper()
	var b batch.Builder
	spec := batch.NewBatchSpec(0)
	recs := make([]batch.RecordSpec, n)
	val := make([]byte, valueSize)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: ts + int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: val}
	}
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// makeFollowerBatch builds a batch at baseOffset with leader epoch epoch.
func makeFollowerBatch(t testing.TB, baseOffset int64, epoch int32, n, valueSize int, ts int64) []byte {
	t.Helper()
	b := makeBatch(t, n, valueSize, ts)
	v := batch.View(b)
	v.SetBaseOffset(baseOffset)
	v.SetPartitionLeaderEpoch(epoch)
	return b
}
