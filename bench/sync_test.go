package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkDurableAppend measures appenders of 16 KiB batches that each
// wait until their batch is durable: with group commit (Log.Sync shares
// one flush among every waiter) and with one flush (fdatasync) per append
// (Log.Flush after each append), for 1, 8 and 64 concurrent appenders.
// Goal: at 64 appenders, ≥ 8x the batches/s of one fdatasync per append.
func BenchmarkDurableAppend(b *testing.B) {
	src := batchOfSize(b, 16<<10)
	for _, writers := range []int{1, 8, 64} {
		for _, mode := range []string{"group-commit", "fsync-per-append"} {
			b.Run(fmt.Sprintf("writers=%d/%s", writers, mode), func(b *testing.B) {
				l := openBenchLog(b)
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				var wg sync.WaitGroup
				per := (b.N + writers - 1) / writers
				start := time.Now()
				b.ResetTimer()
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < per; i++ {
							info, err := l.AppendAsLeader(src, 1)
							if err != nil {
								b.Error(err)
								return
							}
							if mode == "group-commit" {
								err = l.Sync(context.Background(), info.LastOffset+1)
							} else {
								err = l.Flush()
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(per*writers)/time.Since(start).Seconds(), "batches/s")
			})
		}
	}
}
