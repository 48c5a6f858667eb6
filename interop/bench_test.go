package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The benchmarks move the same records (b.N of recordSize bytes) through
// `partlog serve` with kgo on loopback and directly through the library,
// in one run, so that their ratio is what the server and the protocol
// cost. Compare the MB/s of the server/… and library/… lines of one
// size and mode.

var benchSizes = []int{1 << 10, 16 << 10}

// libBatchBytes is how many record bytes the library path puts in one
// batch: about what kgo puts in one batch at full speed (its default
// batch max, 1000012 bytes, under Kafka's default max.message.bytes).
const libBatchBytes = 1_000_000

// benchValue returns size bytes that do not compress (kgo compresses
// with snappy by default; the benchmarks turn compression off, and
// random bytes keep any codec honest).
func benchValue(size int) []byte {
	v := make([]byte, size)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[i] = byte(x)
	}
	return v
}

func BenchmarkProduce(b *testing.B) {
	for _, size := range benchSizes {
		for _, mode := range []struct {
			name  string
			fsync bool
		}{{"acks=1", false}, {"acks=-1+fsync", true}} {
			b.Run(fmt.Sprintf("%dKiB/%s/server", size>>10, mode.name), func(b *testing.B) {
				benchServerProduce(b, size, mode.fsync)
			})
			b.Run(fmt.Sprintf("%dKiB/%s/library", size>>10, mode.name), func(b *testing.B) {
				benchLibraryProduce(b, size, mode.fsync)
			})
		}
	}
}

func benchServerProduce(b *testing.B, size int, fsync bool) {
	args := []string{}
	if fsync {
		args = append(args, "--fsync")
	}
	s := startServer(b, b.TempDir(), args...)
	opts := []kgo.Opt{kgo.SeedBrokers(s.addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("bench"),
		kgo.MaxBufferedBytes(64 << 20),
		kgo.ProducerBatchCompression(kgo.NoCompression())}
	if fsync {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	} else {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	c, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Warm up: the topic is created and the connection set up.
	value := benchValue(size)
	if err := c.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	errs := make(chan error, 1)
	for i := 0; i < b.N; i++ {
		c.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// libBatch builds one batch of n records of size bytes.
func libBatch(b *testing.B, n, size int) []byte {
	spec := batch.NewBatchSpec(0)
	value := benchValue(size)
	rs := make([]batch.RecordSpec, n)
	now := time.Now().UnixMilli()
	for i := range rs {
		rs[i] = batch.RecordSpec{Timestamp: now, Value: value}
	}
	var bl batch.Builder
	out, err := bl.AppendBatch(nil, &spec, rs)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func benchLibraryProduce(b *testing.B, size int, fsync bool) {
	l, err := partlog.Open(filepath.Join(b.TempDir(), "bench-0"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	per := max(libBatchBytes/size, 1)
	full := libBatch(b, per, size)
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(per, b.N-done)
		recs := full
		if n != per {
			recs = libBatch(b, n, size)
		}
		info, err := l.AppendAsLeader(recs, 0)
		if err != nil {
			b.Fatal(err)
		}
		if fsync {
			if err := l.Sync(ctx, info.LastOffset+1); err != nil {
				b.Fatal(err)
			}
		}
		l.SetHighWatermark(info.LastOffset + 1)
		done += n
	}
}

// preload writes n records of size bytes to partition bench-0 of the log
// directory dir through the library, and closes it.
func preload(b *testing.B, dir string, n, size int) {
	d, err := partlog.OpenDir(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	var id partlog.TopicID
	id[0] = 1
	l, err := d.Create("bench", 0, id, nil)
	if err != nil {
		b.Fatal(err)
	}
	per := max(libBatchBytes/size, 1)
	for done := 0; done < n; done += per {
		if _, err := l.AppendAsLeader(libBatch(b, min(per, n-done), size), 0); err != nil {
			b.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
}

// fetchDataBytes bounds what the fetch benchmarks write: they read the
// preloaded records again from the start as often as b.N needs.
const fetchDataBytes = 256 << 20

func BenchmarkFetch(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dKiB/server", size>>10), func(b *testing.B) {
			dir := b.TempDir()
			n := min(b.N, fetchDataBytes/size)
			preload(b, dir, n, size)
			s := startServer(b, dir)
			c, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ConsumeTopics("bench"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(32<<20))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for got := 0; got < b.N; {
				fs := c.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					b.Fatalf("read %d of %d: %v", got, b.N, err)
				}
				fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
				fs.EachRecord(func(r *kgo.Record) {
					got++
					if r.Offset == int64(n-1) && got < b.N {
						// Read it all again from the start.
						c.SetOffsets(map[string]map[int32]kgo.EpochOffset{"bench": {0: {Epoch: -1, Offset: 0}}})
					}
				})
			}
		})
		b.Run(fmt.Sprintf("%dKiB/library", size>>10), func(b *testing.B) {
			dir := b.TempDir()
			n := min(b.N, fetchDataBytes/size)
			preload(b, dir, n, size)
			l, err := partlog.Open(filepath.Join(dir, "bench-0"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			l.SetHighWatermark(l.LogEndOffset())
			sink := 0
			b.SetBytes(int64(size))
			b.ResetTimer()
			off := int64(0)
			for got := 0; got < b.N; {
				if off == int64(n) {
					off = 0
				}
				v, err := l.Read(off, 32<<20, l.HighWatermark())
				if err != nil {
					b.Fatal(err)
				}
				rs := v.Records
				// Walk and check the batches as a consumer does.
				for len(rs) >= 61 {
					bv, err := batch.Check(rs)
					if err != nil {
						b.Fatal(err)
					}
					off = bv.LastOffset() + 1
					got += int(bv.RecordsCount())
					sink += bv.Size()
					rs = rs[bv.Size():]
				}
				v.Release()
			}
			_ = sink
		})
	}
}
