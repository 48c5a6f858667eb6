package bench

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/prefault"
)

// BenchmarkLoadShift is a broker whose load moves: 40 partitions append
// 16 KiB batches round robin (18.75 MiB each, enough for their windows
// to take the whole prefault budget), then stop; after
// prefault.Idle and the pool's sweep, a new partition appends
// b.N 1 KiB batches. It reports the process's RSS when the 40 stopped
// (busy-RSS-MiB) and after the wait (idle-RSS-MiB: the pages populated
// ahead of the idle partitions leave it), and the new partition's time
// per append and its writer thread's major faults per 1 000 appends
// (hot-majflt/kop: pages it had to fault in itself because no prefault
// budget was left for it). 8 partitions of 1.56 MiB with -short; either
// way the wait takes about 12 s.
func BenchmarkLoadShift(b *testing.B) {
	n, per := partitionCount(40, 8), 1200
	if testing.Short() {
		per = 100
	}
	needFiles(b, n, 2)
	big, src := batchOfSize(b, 16<<10), batchOfSize(b, 1<<10)
	// The load that moves away, once for the runs of the sub-benchmark
	// (b.N = 1 first, then the N asked for).
	logs := openRoundRobinLogs(b, n)
	warm(b, int64(n*per*len(big)))
	for range per {
		for _, l := range logs {
			if _, err := l.AppendAsLeader(big, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	busy := procStatus(b, "VmRSS")
	time.Sleep(prefault.Idle + 2*time.Second)
	idle := procStatus(b, "VmRSS")
	b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
		hot := openBenchLog(b)
		for range 8 { // the epoch checkpoint and the index files, as in BenchmarkRoundRobin
			if _, err := hot.AppendAsLeader(src, 1); err != nil {
				b.Fatal(err)
			}
		}
		// The VM took back memory during the wait: the pages touched
		// first after it would cost the hypervisor's time, not ours.
		warm(b, 256<<20)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		major, _ := threadFaults(b)
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			if _, err := hot.AppendAsLeader(src, 1); err != nil {
				b.Fatal(err)
			}
		}
		spent := time.Since(start)
		b.StopTimer()
		after, _ := threadFaults(b)
		b.ReportMetric(float64(busy)/(1<<20), "busy-RSS-MiB")
		b.ReportMetric(float64(idle)/(1<<20), "idle-RSS-MiB")
		b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "hot-ns/op")
		b.ReportMetric(float64(after-major)*1000/float64(b.N), "hot-majflt/kop")
	})
}
