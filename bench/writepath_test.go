package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/partlog/partlog"
)

// writePaths are the Options.WritePath variants BenchmarkWritePath pairs.
var writePaths = []struct {
	name string
	path partlog.WritePath
}{{"mapped", partlog.WriteMapped}, {"pwrite", partlog.WritePwrite}, {"auto", partlog.WriteAuto}}

// BenchmarkWritePath chooses how appended bytes reach the page cache: it
// runs the three Options.WritePath variants on three logs in the same
// process, interleaved in blocks (each block runs every variant once, in
// a rotating order, so disk and CPU noise from the other tenants of the
// machine hits all three alike), and reports each variant's time per
// append as a metric (mapped-ns/op, pwrite-ns/op, auto-ns/op) and the
// ratios pwrite/mapped and auto/best. b.N is the number of appends per
// variant.
//
//   - sync=false: AppendAsLeader only (the default, Kafka-like use);
//   - sync=true: AppendAsLeader then Log.Sync of its offset, by W writers
//     (group commit).
func BenchmarkWritePath(b *testing.B) {
	type config struct {
		size    int
		durable bool
		writers int
	}
	var configs []config
	for _, size := range []int{256, 1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		configs = append(configs, config{size, false, 1})
	}
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		configs = append(configs, config{size, true, 1}, config{size, true, 8})
	}
	for _, c := range configs {
		name := fmt.Sprintf("size=%s/sync=%v", sizeName(c.size), c.durable)
		if c.durable {
			name += fmt.Sprintf("/writers=%d", c.writers)
		}
		b.Run(name, func(b *testing.B) {
			src := batchOfSize(b, c.size)
			var logs []*partlog.Log
			for _, wp := range writePaths {
				cache, err := partlog.NewMappingCache(1 << 30)
				if err != nil {
					b.Fatal(err)
				}
				l, err := partlog.Open(b.TempDir(), &partlog.Options{MappingCache: cache, WritePath: wp.path})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = l.Close() })
				logs = append(logs, l)
			}
			block := max(64, c.writers)
			if c.durable {
				block = max(8, c.writers)
			}
			if c.size >= 256<<10 {
				block = c.writers
			}
			warm(b, int64(b.N)*int64(c.size)*int64(len(logs)))
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			var spent [3]time.Duration
			appends := 0
			b.ResetTimer()
			for round := 0; appends < b.N; round++ {
				n := min(block, b.N-appends)
				for k := range logs {
					m := (round + k) % len(logs)
					start := time.Now()
					runBlock(b, logs[m], src, n, c.durable, c.writers)
					spent[m] += time.Since(start)
				}
				appends += n
			}
			b.StopTimer()
			per := func(m int) float64 { return float64(spent[m].Nanoseconds()) / float64(appends) }
			for m, wp := range writePaths {
				b.ReportMetric(per(m), wp.name+"-ns/op")
			}
			b.ReportMetric(per(1)/per(0), "pwrite/mapped")
			b.ReportMetric(per(2)/min(per(0), per(1)), "auto/best")
		})
	}
}

// runBlock appends n batches to l (and, if durable, syncs each), spread
// over writers goroutines.
func runBlock(b *testing.B, l *partlog.Log, src []byte, n int, durable bool, writers int) {
	one := func(count int) {
		for range count {
			info, err := l.AppendAsLeader(src, 1)
			if err == nil && durable {
				err = l.Sync(context.Background(), info.LastOffset+1)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	}
	if writers <= 1 {
		one(n)
		return
	}
	splitAmong(writers, n, one)
}
