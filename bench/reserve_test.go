package bench

import (
	"testing"
	"time"

	"github.com/partlog/partlog"
)

// BenchmarkReserve prices the disk reservation policy on the append path:
// 1 KiB leader appends into a log whose active segment is reserved in
// steps (the default, Options.ReserveMaxBytes) and into one reserved whole
// at creation (ReserveMaxBytes < 0, the behaviour before steps), both
// with the default prefault window, interleaved in rounds of 1 000
// appends. It reports each variant's time per append and steps/whole.
func BenchmarkReserve(b *testing.B) {
	src := batchOfSize(b, 1<<10)
	names := []string{"whole", "steps"}
	var logs []*partlog.Log
	for _, reserve := range []int64{-1, 0} {
		c, err := partlog.NewMappingCache(1 << 30)
		if err != nil {
			b.Fatal(err)
		}
		l, err := partlog.Open(b.TempDir(), &partlog.Options{MappingCache: c, ReserveMaxBytes: reserve})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		logs = append(logs, l)
	}
	warm(b, int64(b.N)*int64(len(src))*2)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	var spent [2]time.Duration
	done := 0
	b.ResetTimer()
	for round := 0; done < b.N; round++ {
		n := min(1000, b.N-done)
		for k := range logs {
			m := (round + k) % len(logs)
			start := time.Now()
			for range n {
				if _, err := logs[m].AppendAsLeader(src, 1); err != nil {
					b.Fatal(err)
				}
			}
			spent[m] += time.Since(start)
		}
		done += n
	}
	b.StopTimer()
	per := func(m int) float64 { return float64(spent[m].Nanoseconds()) / float64(done) }
	for m, name := range names {
		b.ReportMetric(per(m), name+"-ns/op")
	}
	b.ReportMetric(per(1)/per(0), "steps/whole")
}
