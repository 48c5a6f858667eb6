package recovery

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/segment"
)

// writeBenchLog writes total bytes of ~1 KiB batches (no producer) as
// segments of segBytes each, with stamped offsets and epoch 0.
func writeBenchLog(b *testing.B, dir string, total, segBytes int64) {
	var bld batch.Builder
	recs := make([]batch.RecordSpec, 10)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: baseTs + int64(i), Value: make([]byte, 90)}
	}
	offset := int64(0)
	for written := int64(0); written < total; written += segBytes {
		base := offset
		buf := make([]byte, 0, segBytes+2048)
		for int64(len(buf)) < segBytes {
			spec := batch.NewBatchSpec(offset)
			spec.PartitionLeaderEpoch = 0
			var err error
			if buf, err = bld.AppendBatch(buf, &spec, recs); err != nil {
				b.Fatal(err)
			}
			offset += 10
		}
		if err := os.WriteFile(segPath(dir, base, filenames.Log), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// baseline walks the headers and checks the CRC of every batch of every
// segment: the least work any recovery must do over the same bytes.
func baseline(b *testing.B, dir string) {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		n, err := filenames.Parse(de.Name())
		if err != nil || n.Kind != filenames.Log {
			continue
		}
		o := Options{}
		m, err := o.openMapped(filepath.Join(dir, de.Name()), true)
		if err != nil {
			b.Fatal(err)
		}
		it := batch.NewIterator(m.data, 0)
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		if it.Err() != nil {
			b.Fatal(it.Err())
		}
		m.close()
	}
}

// BenchmarkRecover measures an unclean full recovery (RP missing: every
// segment validated, indexes rebuilt and compared, producer replay) beside
// the header+CRC baseline over the same bytes, with 1 and 2 workers. The
// 64 MiB log runs in smoke runs (-benchtime=1x); the 1 GiB one is skipped
// under -short.
func BenchmarkRecover(b *testing.B) {
	for _, size := range []struct {
		name           string
		total, segment int64
	}{{"64MiB", 64 << 20, 16 << 20}, {"1GiB", 1 << 30, 128 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			if testing.Short() && size.total > 64<<20 {
				b.Skip("1 GiB log skipped under -short; the 64 MiB variant covers the code")
			}
			dir := b.TempDir()
			writeBenchLog(b, dir, size.total, size.segment)
			cfg := segment.Config{SegmentBytes: size.segment * 2, MaxIndexBytes: 10 << 20, IndexIntervalBytes: 4096}
			if _, err := Run(dir, Options{RecoveryPoint: -1, Segment: cfg, Now: testNow}); err != nil {
				b.Fatal(err)
			}
			b.Run("baseline", func(b *testing.B) {
				b.SetBytes(size.total)
				for b.Loop() {
					baseline(b, dir)
				}
			})
			for _, par := range []int{1, 2} {
				b.Run(fmt.Sprintf("parallel%d", par), func(b *testing.B) {
					b.SetBytes(size.total)
					for b.Loop() {
						r, err := Run(dir, Options{RecoveryPoint: -1, Segment: cfg, Now: testNow, Parallelism: par})
						if err != nil || r.Status != StatusOK {
							b.Fatal(err, r.Status)
						}
					}
				})
			}
			// The CLI's recover --apply: every snapshot read, and a plan
			// before the repair so that a cut below the recovery point
			// can be refused (two scans).
			b.Run("cli-apply", func(b *testing.B) {
				b.SetBytes(size.total)
				for b.Loop() {
					r, err := Run(dir, Options{RecoveryPoint: -1, Segment: cfg, Now: testNow, Parallelism: 2,
						RefuseFlushedCut: true, CheckSnapshots: true})
					if err != nil || r.Status != StatusOK {
						b.Fatal(err, r.Status)
					}
				}
			})
		})
	}
}
