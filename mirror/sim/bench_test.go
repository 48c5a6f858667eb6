package sim

import (
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

// fetchChunk builds what one fetch returns: n idempotent batches of 8
// records of 100 bytes from one producer, offsets from 0.
func fetchChunk(b *testing.B, n int) []byte {
	var out []byte
	var bld batch.Builder
	recs := make([]batch.RecordSpec, 8)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: startClock, Value: make([]byte, 100)}
	}
	for i := range n {
		spec := batch.NewBatchSpec(int64(i * len(recs)))
		spec.PartitionLeaderEpoch = InitialEpoch
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = FirstPID, 0, int32(i*len(recs))
		var err error
		if out, err = bld.AppendBatch(out, &spec, recs); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// shift renumbers the batches of chunk from base (the base offset is
// outside the CRC, so the bytes stay valid, as the source's would be).
func shift(chunk []byte, base int64) {
	for p := 0; p < len(chunk); {
		v := batch.View(chunk[p:])
		v.SetBaseOffset(base)
		base += int64(v.LastOffsetDelta()) + 1
		p += v.Size()
	}
}

// BenchmarkMirrorAppend compares, in one run, the mirror fetch loop's
// append (AppendAsMirror of fetched batches) with a follower's append of
// the same bytes (AppendAsFollower), and the rewriting designs' path
// beside them (copy, producer id → -(pid+2), CRC-32C recomputed, then
// AppendAsMirror).
func BenchmarkMirrorAppend(b *testing.B) {
	const batches = 64
	chunk := fetchChunk(b, batches)
	slots := int64(batches * 8)
	opts := &partlog.Options{SegmentBytes: 256 << 20, SegmentMs: -1, PrefaultBytes: -1, IndexIntervalBytes: 4096}
	for _, c := range []struct {
		name    string
		rewrite bool
		append  func(l *partlog.Log, records []byte) (partlog.AppendInfo, error)
	}{
		{"mirror", false, (*partlog.Log).AppendAsMirror},
		{"follower", false, (*partlog.Log).AppendAsFollower},
		{"mirror-negation-rewrite", true, (*partlog.Log).AppendAsMirror},
	} {
		b.Run(c.name, func(b *testing.B) {
			l, err := partlog.Open(b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			work := make([]byte, len(chunk))
			copy(work, chunk)
			b.SetBytes(int64(len(chunk)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if l.LogEndOffset() > 128<<10 {
					b.StopTimer()
					if err := l.TruncateTo(0); err != nil {
						b.Fatal(err)
					}
					i = 0
					b.StartTimer()
				}
				shift(work, int64(i)*slots)
				records := work
				if c.rewrite {
					records = append(records[:0:0], work...)
					if err := RewritePIDs(records, func(p int64) (int64, error) { return Negate(p), nil }); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := c.append(l, records); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
