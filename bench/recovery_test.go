package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/segment"
)

// writeLog appends total bytes of batches of size bytes to a new log in
// dir, with segments of segBytes, and closes it cleanly.
func writeLog(b *testing.B, dir string, size int, total, segBytes int64, idx int64) {
	b.Helper()
	c, err := partlog.NewMappingCache(1 << 30)
	if err != nil {
		b.Fatal(err)
	}
	l, err := partlog.Open(dir, &partlog.Options{MappingCache: c, SegmentBytes: segBytes, MaxIndexBytes: idx})
	if err != nil {
		b.Fatal(err)
	}
	src := batchOfSize(b, size)
	for n := int64(0); n < total; n += int64(size) {
		if _, err := l.AppendAsLeader(src, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

// walkDir is the header walk + CRC of every .log file of dir, mapped.
func walkDir(b *testing.B, dir string) int64 {
	des, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, de := range des {
		if fn, err := filenames.Parse(de.Name()); err == nil && fn.Kind == filenames.Log && fn.Transient == "" {
			n += walkMapped(b, filepath.Join(dir, de.Name()))
		}
	}
	return n
}

// BenchmarkRecovery runs a full unclean recovery (recovery.Run with no
// recovery point: every segment validated, indexes rebuilt, producer
// state replayed) of a 256 MiB log of 1 KiB batches in 64 MiB segments
// (32 MiB in 8 MiB segments under -short), beside its ceiling over the
// same files: the mapped header walk + CRC of every batch.
func BenchmarkRecovery(b *testing.B) {
	total, segBytes := int64(256<<20), int64(64<<20)
	if testing.Short() {
		total, segBytes = 32<<20, 8<<20
	}
	name := fmt.Sprintf("size=%dMiB", total>>20)
	dir := b.TempDir()
	writeLog(b, dir, 1<<10, total, segBytes, 10<<20)
	cfg := segment.Config{SegmentBytes: segBytes, MaxIndexBytes: 10 << 20, IndexIntervalBytes: partlog.DefaultIndexIntervalBytes}
	b.Run(name+"/header-walk", func(b *testing.B) {
		walkDir(b, dir)
		b.SetBytes(total)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			walkDir(b, dir)
		}
	})
	b.Run(name+"/recover", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			r, err := recovery.Run(dir, recovery.Options{RecoveryPoint: -1, Segment: cfg})
			if err != nil {
				b.Fatal(err)
			}
			if r.Status != recovery.StatusOK {
				b.Fatalf("recovery status %v", r.Status)
			}
		}
	})
}

// BenchmarkOpen times partlog.Open + Close of a cleanly closed directory
// of 1 000 segments (goal < 50 ms), and of 10 segments; the 1 000 are
// skipped under -short. The directory is built once per variant with a
// roll after each small append.
func BenchmarkOpen(b *testing.B) {
	src := batchOfSize(b, 1<<10)
	for _, segs := range []int{10, 1_000} {
		b.Run(fmt.Sprintf("segments=%d", segs), func(b *testing.B) {
			if testing.Short() && segs > 10 {
				b.Skip("1 000 segments skipped under -short")
			}
			dir := b.TempDir()
			c, err := partlog.NewMappingCache(1 << 30)
			if err != nil {
				b.Fatal(err)
			}
			opts := &partlog.Options{MappingCache: c, SegmentBytes: 1 << 20, MaxIndexBytes: 4096}
			l, err := partlog.Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < segs; i++ {
				if _, err := l.AppendAsLeader(src, 0); err != nil {
					b.Fatal(err)
				}
				if i+1 < segs {
					if err := l.Roll(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			// Reopen as a log directory with its clean-shutdown marker
			// does: nothing but the active segment's tail is read.
			clean := *opts
			clean.CleanShutdown = true
			opts = &clean
			b.ReportAllocs()
			b.ResetTimer()
			var opening, closing time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				l, err := partlog.Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				opening += t1.Sub(t0)
				closing += time.Since(t1)
			}
			b.StopTimer()
			if l, err := partlog.Open(dir, opts); err != nil {
				b.Fatal(err)
			} else if n := len(l.Segments()); n != segs {
				b.Fatalf("%d segments, want %d", n, segs)
			} else {
				_ = l.Close()
			}
			b.ReportMetric(float64(opening)/1e6/float64(b.N), "ms-open/op")
			b.ReportMetric(float64(closing)/1e6/float64(b.N), "ms-close/op")
		})
	}
}
