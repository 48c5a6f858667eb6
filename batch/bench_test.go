package batch

import (
	"fmt"
	"hash/crc32"
	"testing"

	kcrc "github.com/klauspost/crc32"
)

// benchSizes are the batch sizes of the issue: 256 B, 1 KiB, 16 KiB, 1 MiB.
var benchSizes = []int{256, 1 << 10, 16 << 10, 1 << 20}

// makeRegion builds a region of about total bytes made of uncompressed
// batches of exactly size bytes, each holding records of ~100 bytes.
func makeRegion(tb testing.TB, size, total int) []byte {
	tb.Helper()
	one := makeBatchOfSize(tb, size, 0)
	n := max(1, total/size)
	region := make([]byte, 0, n*size)
	for i := 0; i < n; i++ {
		region = append(region, one...)
		View(region[len(region)-size:]).SetBaseOffset(int64(i) * 1000)
	}
	return region
}

// makeBatchOfSize builds one uncompressed batch of exactly size bytes
// (size ≥ 80), with ~100-byte records and a padded last value.
func makeBatchOfSize(tb testing.TB, size int, baseOffset int64) []byte {
	tb.Helper()
	var b Builder
	spec := NewBatchSpec(baseOffset)
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	n := max(1, (size-HeaderSize)/112)
	recs := make([]RecordSpec, n)
	for i := range recs {
		recs[i] = RecordSpec{Timestamp: 1700000000000 + int64(i), Key: []byte("k"), Value: payload}
	}
	for range 10000 {
		out, err := b.AppendBatch(nil, &spec, recs)
		if err != nil {
			tb.Fatal(err)
		}
		last := &recs[len(recs)-1]
		d := len(out) - size
		switch {
		case d == 0:
			return out
		case d > 0 && len(last.Value) == 0 && len(recs) > 1:
			recs = recs[:len(recs)-1]
		case d > 0:
			// Shrink by the excess, one byte at a time near the end so
			// that a varint changing width cannot make it oscillate.
			cut := max(1, min(d, len(last.Value))-2)
			last.Value = last.Value[:len(last.Value)-min(cut, len(last.Value))]
		default:
			last.Value = append(last.Value[:len(last.Value):len(last.Value)], make([]byte, max(1, -d-2))...)
		}
	}
	tb.Fatalf("cannot build a batch of exactly %d bytes", size)
	return nil
}

const benchRegion = 8 << 20

// BenchmarkValidate walks a region of batches with Iterator (framing,
// header rules and CRC-32C of every batch), beside CRC-32C alone over the
// same bytes. Goal: ≥ 90% of the CRC speed at 16 KiB and above, ≥ 60% at
// 256 B.
func BenchmarkValidate(b *testing.B) {
	for _, size := range benchSizes {
		region := makeRegion(b, size, benchRegion)
		b.Run(fmt.Sprintf("size=%s/crc32c-only", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(len(region)))
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				for p := 0; p < len(region); p += size {
					sink += Checksum(region[p+OffAttributes : p+size])
				}
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("size=%s/iterate", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(len(region)))
			b.ReportAllocs()
			for b.Loop() {
				it := NewIterator(region, 0)
				for _, ok := it.Next(); ok; _, ok = it.Next() {
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
		})
		b.Run(fmt.Sprintf("size=%s/iterate+records", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(len(region)))
			b.ReportAllocs()
			for b.Loop() {
				it := NewIterator(region, 0)
				for v, ok := it.Next(); ok; v, ok = it.Next() {
					if err := CheckRecords(v, v.RecordsSection(), true); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCRC32C compares the standard library's CRC-32C with
// github.com/klauspost/crc32 on this machine.
func BenchmarkCRC32C(b *testing.B) {
	stdTable := crc32.MakeTable(crc32.Castagnoli)
	kTable := kcrc.MakeTable(kcrc.Castagnoli)
	for _, size := range benchSizes {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		b.Run(fmt.Sprintf("size=%s/hash-crc32", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(size))
			var sink uint32
			for b.Loop() {
				sink += crc32.Checksum(buf, stdTable)
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("size=%s/klauspost-crc32", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(size))
			var sink uint32
			for b.Loop() {
				sink += kcrc.Checksum(buf, kTable)
			}
			_ = sink
		})
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// TestValidateDoesNotAllocate guards the 0 allocs/op claim of the
// validation path (Check, Iterator, CheckRecords, setters).
func TestValidateDoesNotAllocate(t *testing.T) {
	region := makeRegion(t, 1<<10, 64<<10)
	allocs := testing.AllocsPerRun(50, func() {
		it := NewIterator(region, 0)
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			if err := CheckRecords(v, v.RecordsSection(), true); err != nil {
				t.Fatal(err)
			}
			v.SetBaseOffset(v.BaseOffset())
			v.SetPartitionLeaderEpoch(3)
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	})
	if allocs != 0 {
		t.Fatalf("validation allocates %v times per region", allocs)
	}
}

// TestCRCMatchesKlauspost makes sure both implementations agree, so the
// choice between them is about speed only.
func TestCRCMatchesKlauspost(t *testing.T) {
	kTable := kcrc.MakeTable(kcrc.Castagnoli)
	for _, n := range []int{0, 1, 9, 63, 64, 65, 4095, 70000} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i*31 + n)
		}
		if Checksum(buf) != kcrc.Checksum(buf, kTable) {
			t.Fatalf("CRC-32C differs at %d bytes", n)
		}
	}
	if Checksum([]byte("123456789")) != 0xE3069283 {
		t.Fatal("CRC-32C check value")
	}
	if ChecksumIEEE([]byte("123456789")) != 0xCBF43926 {
		t.Fatal("CRC-32 check value")
	}
}

// BenchmarkSummarizeRecords is the leader's walk of a client batch's
// records (Kafka's LogValidator: every record parsed, the max timestamp
// taken from them), per batch.
func BenchmarkSummarizeRecords(b *testing.B) {
	for _, size := range []int{256, 1 << 10, 16 << 10} {
		v := View(makeBatchOfSize(b, size, 0))
		b.Run("size="+sizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var sum RecordSummary
			for b.Loop() {
				if err := SummarizeRecords(v, v.RecordsSection(), true, &sum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
