package peers

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkPeerAppend appends the same pre-built Kafka batch, as an
// opaque entry, to each store without durability (no fsync per append).
// Every run starts in a fresh directory.
func BenchmarkPeerAppend(b *testing.B) { benchPeers(b, false) }

// BenchmarkPeerAppendDurable is BenchmarkPeerAppend with each append
// durable before the next one starts (one fsync or fdatasync per
// append, or the store's equivalent). Keep b.N small at 1 MiB.
func BenchmarkPeerAppendDurable(b *testing.B) { benchPeers(b, true) }

func benchPeers(b *testing.B, durable bool) {
	for _, size := range sizes {
		src := batchOfSize(b, size)
		for _, p := range peers {
			b.Run("size="+sizeName(size)+"/"+p.name, func(b *testing.B) {
				s, err := p.open(b.TempDir(), durable)
				if err != nil {
					b.Fatal(err)
				}
				warm(b, int64(b.N)*int64(size))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.append(src); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := s.close(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// decodeRegion is the size of the regions of BenchmarkDecode.
const decodeRegion = 8 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BenchmarkDecode decodes a region of batches of each size completely:
// every batch checked (framing, header, CRC-32C) and every record
// decoded. partlog: batch.Check + View.Records; kmsg:
// RecordBatch.ReadFrom, CRC-32C of the covered bytes with hash/crc32, and
// Record.ReadFrom of each record (split by its length varint).
func BenchmarkDecode(b *testing.B) {
	for _, size := range sizes {
		region := regionOf(b, size, decodeRegion)
		b.Run("size="+sizeName(size)+"/partlog", func(b *testing.B) {
			b.SetBytes(int64(len(region)))
			b.ReportAllocs()
			for b.Loop() {
				for p := 0; p < len(region); {
					v, err := batch.Check(region[p:])
					if err != nil {
						b.Fatal(err)
					}
					it := v.Records(v.RecordsSection())
					for _, ok := it.Next(); ok; _, ok = it.Next() {
					}
					if it.Err() != nil {
						b.Fatal(it.Err())
					}
					p += len(v)
				}
			}
		})
		b.Run("size="+sizeName(size)+"/kmsg", func(b *testing.B) {
			b.SetBytes(int64(len(region)))
			b.ReportAllocs()
			var rb kmsg.RecordBatch
			var r kmsg.Record
			for b.Loop() {
				for p := 0; p < len(region); {
					n := int(int32(binary.BigEndian.Uint32(region[p+8:]))) + 12
					if n < 61 || p+n > len(region) {
						b.Fatal("bad batch length")
					}
					if err := rb.ReadFrom(region[p : p+n]); err != nil {
						b.Fatal(err)
					}
					if crc32.Checksum(region[p+21:p+n], castagnoli) != uint32(rb.CRC) {
						b.Fatal("crc mismatch")
					}
					recs := rb.Records
					for i := int32(0); i < rb.NumRecords; i++ {
						l, k := binary.Varint(recs)
						if k <= 0 || int(l)+k > len(recs) {
							b.Fatal("bad record length")
						}
						if err := r.ReadFrom(recs[:int(l)+k]); err != nil {
							b.Fatal(err)
						}
						recs = recs[int(l)+k:]
					}
					p += n
				}
			}
		})
	}
}
