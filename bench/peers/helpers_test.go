package peers

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
)

// sizes are the batch sizes of the append goals.
var sizes = []int{256, 1 << 10, 16 << 10, 1 << 20}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// batchOfSize builds one uncompressed Kafka batch (magic 2, no producer)
// of exactly size bytes with partlog's Builder: records of ~100 bytes,
// the last value padded or trimmed to hit the size.
func batchOfSize(tb testing.TB, size int) []byte {
	tb.Helper()
	var b batch.Builder
	spec := batch.NewBatchSpec(0)
	val := make([]byte, 100)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	n := max(1, (size-batch.HeaderSize)/116)
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: 1700000000000 + int64(i), Key: []byte("key"), Value: val}
	}
	last := &recs[n-1]
	for range 1000 {
		out, err := b.AppendBatch(nil, &spec, recs)
		if err != nil {
			tb.Fatal(err)
		}
		switch d := len(out) - size; {
		case d == 0:
			return out
		case d > 0 && len(last.Value) > d:
			last.Value = last.Value[:len(last.Value)-d]
		case d > 0:
			last.Value = last.Value[:0]
		default:
			last.Value = append(last.Value[:len(last.Value):len(last.Value)], make([]byte, -d)...)
		}
	}
	tb.Fatalf("cannot build a batch of %d bytes", size)
	return nil
}

// regionOf is about total bytes of copies of one batch of size bytes
// with increasing base offsets.
func regionOf(tb testing.TB, size, total int) []byte {
	tb.Helper()
	one := batchOfSize(tb, size)
	n := max(1, total/size)
	region := make([]byte, 0, n*size)
	next := int64(0)
	for i := 0; i < n; i++ {
		region = append(region, one...)
		v := batch.View(region[len(region)-size:])
		v.SetBaseOffset(next)
		next = v.NextOffset()
	}
	return region
}

// warm writes and deletes a scratch file of n bytes (at least 64 MiB, at
// most 1 GiB) before a timed run, as bench/warm_test.go does: these VMs
// hand idle free memory back to the host, and the first use of a page then
// costs up to 10x; touching the pages first makes the run measure the
// code, not the hypervisor.
func warm(b *testing.B, n int64) {
	b.Helper()
	n = min(max(n, 64<<20), 1<<30)
	path := filepath.Join(b.TempDir(), "warm.scratch")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for w := int64(0); w < n; w += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	_ = f.Close()
	_ = os.Remove(path)
}
