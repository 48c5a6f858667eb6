package partlog

import (
	"encoding/binary"
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

// openTestLog opens a log in a fresh directory and closes it at cleanup
// (the shared consistency check runs as it closes).
func openTestLog(t testing.TB, opts *Options) (*Log, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, dir
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

// edited applies f to the header of batch b and stores the CRC of the
// result, so that a batch breaking one rule passes the CRC check.
func edited(b []byte, f func(v batch.View)) []byte {
	v := batch.View(b)
	f(v)
	binary.BigEndian.PutUint32(v[batch.OffCRC:], v.ComputeCRC())
	return b
}
