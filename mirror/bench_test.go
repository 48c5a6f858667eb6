package mirror

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

// benchChunk builds a fetched chunk of n batches of 16 records of 100
// bytes, producer 5, epoch 3, starting at offset 0.
func benchChunk(b *testing.B, n int) []byte {
	var out []byte
	var bl batch.Builder
	for i := range n {
		spec := batch.NewBatchSpec(int64(i * 16))
		spec.PartitionLeaderEpoch = 3
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = 5, 0, int32(i*16)
		recs := make([]batch.RecordSpec, 16)
		for j := range recs {
			recs[j] = batch.RecordSpec{Timestamp: time.Now().UnixMilli(), Value: bytes.Repeat([]byte{'v'}, 100)}
		}
		var err error
		if out, err = bl.AppendBatch(out, &spec, recs); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// rebase moves every batch of chunk to start at base (base offsets are
// outside the CRC; sequences are not checked for Replication/Mirror).
func rebase(chunk []byte, base int64) int64 {
	for p := 0; p < len(chunk); {
		v := batch.View(chunk[p:])
		v.SetBaseOffset(base)
		base = v.NextOffset()
		p += v.Size()
	}
	return base
}

func benchLogOptions() *partlog.Options {
	return &partlog.Options{SegmentBytes: 64 << 20, MaxIndexBytes: 1 << 20, PrefaultBytes: -1}
}

// BenchmarkMirrorAppend compares Partition.AppendMirror with
// Log.AppendAsFollower of the same bytes, interleaved in one loop so both
// see the same machine state; mirror/follower is the ratio (goal <= 1.05).
func BenchmarkMirrorAppend(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(map[int]string{1: "1batch", 8: "8batches"}[n], func(b *testing.B) {
			dir := b.TempDir()
			fl, err := partlog.Open(filepath.Join(dir, "follower"), benchLogOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer fl.Close()
			ml, err := partlog.Open(filepath.Join(dir, "mirror"), benchLogOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer ml.Close()
			p, err := Open(ml, Options{LeaderEpoch: 100})
			if err != nil {
				b.Fatal(err)
			}
			s, err := p.Start(StartRequest{SourceClusterID: "A", SourceLeaderEpoch: -1})
			if err != nil {
				b.Fatal(err)
			}
			fchunk, mchunk := benchChunk(b, n), benchChunk(b, n)
			var fnext, mnext int64
			var fdur, mdur time.Duration
			b.SetBytes(int64(len(fchunk)))
			b.ResetTimer()
			for i := range b.N {
				// Alternate which goes first so neither always pays for a
				// cold cache line or a roll.
				for k := range 2 {
					if (i+k)%2 == 0 {
						fnext = rebase(fchunk, fnext)
						t0 := time.Now()
						if _, err := fl.AppendAsFollower(fchunk); err != nil {
							b.Fatal(err)
						}
						fdur += time.Since(t0)
					} else {
						mnext = rebase(mchunk, mnext)
						t0 := time.Now()
						if _, err := p.AppendMirror(s, mchunk); err != nil {
							b.Fatal(err)
						}
						mdur += time.Since(t0)
					}
				}
			}
			b.ReportMetric(float64(fdur.Nanoseconds())/float64(b.N), "follower-ns/op")
			b.ReportMetric(float64(mdur.Nanoseconds())/float64(b.N), "mirror-ns/op")
			b.ReportMetric(float64(mdur)/float64(fdur), "mirror/follower")
		})
	}
}

// BenchmarkStopToWritable measures a stop request until the partition is
// writable, on a log with an unflushed mirrored tail of about 16 MiB and
// a transaction open in its middle (TRUNCATE_LSO cuts half of it away;
// ABORT_OPEN keeps it and writes one marker). The phases are reported in
// milliseconds: s0 (intent checkpoint), s2 (TRUNCATE_LSO: the LSO
// truncation; ABORT_OPEN: fsync of the whole tail plus S3), s2-flush
// (fsync of the tail that survives, TRUNCATED checkpoint), s3 (position), s4
// (epoch), s5 (markers + fsync + checkpoint), s6 (barrier append + fsync
// + checkpoint), s7 (STOPPED).
func BenchmarkStopToWritable(b *testing.B) {
	for _, policy := range []StopPolicy{TruncateLSO, AbortOpen} {
		b.Run(policy.String(), func(b *testing.B) {
			phases := map[string]time.Duration{}
			var total time.Duration
			for range b.N {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "t-0")
				l, err := partlog.Open(dir, &partlog.Options{SegmentBytes: 4 << 20, MaxIndexBytes: 1 << 20, PrefaultBytes: -1})
				if err != nil {
					b.Fatal(err)
				}
				var last time.Time
				var cur string
				mark := func(next string) {
					now := time.Now()
					phases[cur] += now.Sub(last)
					last, cur = now, next
				}
				opts := Options{LeaderEpoch: 100, crash: func(pt crashPoint) bool {
					switch pt {
					case crashStopIntent:
						mark("s2")
					case crashStopTruncatedUnflushed:
						mark("s2-flush")
					case crashStopTruncated:
						mark("s3")
					case crashStopPositionRecorded:
						mark("s4")
					case crashStopEpochBumped:
						mark("s5")
					case crashStopAbortsWritten:
						mark("s6")
					case crashStopBarrierWritten:
						mark("s7")
					}
					return false
				}}
				p, err := Open(l, opts)
				if err != nil {
					b.Fatal(err)
				}
				s, err := p.Start(StartRequest{SourceClusterID: "A", SourceLeaderEpoch: -1})
				if err != nil {
					b.Fatal(err)
				}
				chunk := benchChunk(b, 8) // ~14 KiB
				var next int64
				const chunks = 1200 // ~16 MiB
				for i := range chunks {
					if i == chunks/2 {
						txn := dataBatch(b, 9, 0, 0, 1, true, batch.CompressionNone)
						batch.View(txn).SetPartitionLeaderEpoch(3)
						rebase(txn, next)
						next = batch.View(txn).NextOffset()
						if _, err := p.AppendMirror(s, txn); err != nil {
							b.Fatal(err)
						}
					}
					next = rebase(chunk, next)
					if _, err := p.AppendMirror(s, chunk); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				t0 := time.Now()
				last, cur = t0, "s0"
				if _, err := p.Stop(bg, policy); err != nil {
					b.Fatal(err)
				}
				mark("")
				total += time.Since(t0)
				b.StopTimer()
				if _, err := p.AppendClient(dataBatch(b, 5, 0, 0, 1, false, batch.CompressionNone), 200); err != nil {
					b.Fatal(err)
				}
				_ = l.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "stop-ms")
			for name, d := range phases {
				if name != "" {
					b.ReportMetric(float64(d.Microseconds())/1000/float64(b.N), name+"-ms")
				}
			}
		})
	}
}
