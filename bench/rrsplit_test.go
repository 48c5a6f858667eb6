package bench

import (
	"fmt"
	"testing"

	"github.com/partlog/partlog"
)

// BenchmarkRoundRobinSplit is BenchmarkRoundRobin's two variants, each
// alone in its sub-benchmark (rr: 1 KiB batches to 1 000 partitions in
// turn; single: the same batches into one partition), with no warm-up
// file: for counting tools (callgrind's cache simulation), which price a
// variant by the difference of two runs of it in separate processes.
// Timed comparisons use BenchmarkRoundRobin, which interleaves the two.
func BenchmarkRoundRobinSplit(b *testing.B) {
	n := partitionCount(1000, 100)
	needFiles(b, n, 2)
	src := batchOfSize(b, 1<<10)
	for _, mode := range []string{"rr", "single"} {
		b.Run(fmt.Sprintf("partitions=%d/size=1KiB/%s", n, mode), func(b *testing.B) {
			var logs []*partlog.Log
			if mode == "rr" {
				logs = openRoundRobinLogs(b, n)
			} else {
				logs = []*partlog.Log{openBenchLog(b)}
			}
			// As BenchmarkRoundRobin: the epoch checkpoint and the lazily
			// made index files before the timer.
			for _, l := range logs {
				for range 8 {
					if _, err := l.AppendAsLeader(src, 1); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; {
				for _, l := range logs {
					if i == b.N {
						break
					}
					if _, err := l.AppendAsLeader(src, 1); err != nil {
						b.Fatal(err)
					}
					i++
				}
			}
		})
	}
}
