package cleaner

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
)

// benchLog is a log of `batches` batches of 10 records (100-byte values)
// over `keys` keys, in segments of about 1 MiB, written once per
// configuration and copied into a fresh directory for each cleaning.
func benchLog(b *testing.B, batches, keys int, comp batch.Compression) (template string, size int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	var segs [][]tb
	var cur []tb
	curSize := 0
	for i := 0; i < batches; i++ {
		var recs []rec
		for j := 0; j < 10; j++ {
			recs = append(recs, rec{key: fmt.Sprintf("key-%08d", rng.IntN(keys)), value: fmt.Sprintf("%0100d", i*10+j)})
		}
		cur = append(cur, tb{recs: recs, comp: comp})
		if curSize += 1300; curSize >= 1<<20 {
			segs, cur, curSize = append(segs, cur), nil, 0
		}
	}
	if len(cur) > 0 {
		segs = append(segs, cur)
	}
	l := buildLog(b, segs)
	for _, s := range l.segs {
		size += s.Size()
	}
	return l.dir, size
}

// BenchmarkCleanRound cleans a whole log once per iteration (the offset
// map built over it, every segment rewritten): bytes are the log's, so
// MB/s is cleaning throughput; allocations are per round.
func BenchmarkCleanRound(b *testing.B) {
	batches := 20_000
	if testing.Short() {
		batches = 2_000
	}
	for _, c := range []struct {
		name string
		comp batch.Compression
	}{{"none", batch.CompressionNone}, {"lz4", batch.CompressionLZ4}} {
		b.Run(c.name, func(b *testing.B) {
			b.StopTimer()
			template, size := benchLog(b, batches, batches, c.comp)
			w := newTestWorker(b, 64<<20)
			b.SetBytes(size)
			b.ReportAllocs()
			var res Result
			for i := 0; i < b.N; i++ {
				l := &testLog{t: b, dir: b.TempDir()}
				copyFiles(b, template, l.dir)
				l.open()
				b.StartTimer()
				res = l.clean(w, 0, nil, 1<<40, testCfg)
				b.StopTimer()
			}
			b.ReportMetric(float64(res.RecordsKept)/float64(max(res.RecordsRead, 1)), "kept/read")
			b.ReportMetric(float64(w.Map().Size()*slotSize)/(1<<20), "map-MiB")
		})
	}
}

func copyFiles(b *testing.B, from, to string) {
	ents, err := os.ReadDir(from)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
