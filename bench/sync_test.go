package bench

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkDurableAppend measures appenders of 16 KiB batches that each
// wait until their batch is durable (AppendAsLeader, then Log.Sync of its
// offset: group commit), for W = 1, 8 and 64 concurrent appenders, paired
// in the same process with two baselines on the same disk, interleaved in
// rounds (each round runs every variant once, rotating the order):
//
//   - mutex: W goroutines, each write(2) of its batch then fdatasync, under
//     one mutex (a log without group commit);
//   - limit: the disk's limit for that concurrency, one pwrite(2) of the
//     bytes of W batches then one fdatasync, per group of W.
//
// b.N is the number of batches per variant. It reports batches/s of each
// variant and the ratios partlog/mutex and partlog/limit, and the median
// over the full rounds of each round's ratio (-median: one round's
// fdatasync stalls move it less). Goals: at 1 writer ≥ 0.9x mutex, at 8
// ≥ 3x, at 64 ≥ 10x.
//
// A round gives each variant a block of -bench.durableblock batches per
// writer (default 16; every variant gets the same blocks). Each block
// ends with writers that are done while others still append, which a
// steady stream of producers never has: with blocks of 2 (the block until
// stop 12) half of every block is its start or its end, and the group
// commit's wait for the writers a flush released is cut short at every
// end. With 16 per writer the rounds mostly measure the steady state; at
// 64 writers a round is then 1 024 batches, so -test.benchtime 4096x or
// more gives several rounds (-bench.durableblock 2 gives the old shape).
func BenchmarkDurableAppend(b *testing.B) {
	src := batchOfSize(b, 16<<10)
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			l := openBenchLog(b)
			dir := b.TempDir()
			mutexFile := newBaselineFile(b, filepath.Join(dir, "mutex.log"))
			limitFile := newBaselineFile(b, filepath.Join(dir, "limit.log"))
			group := bytes.Repeat(src, writers)
			variants := []func(n int){
				func(n int) { runBlock(b, l, src, n, true, writers) },
				func(n int) { mutexFile.perBatch(b, src, n, writers) },
				func(n int) { limitFile.grouped(b, group, len(src), n) },
			}
			block := writers * *durableBlock
			warm(b, int64(b.N)*int64(len(src))*3)
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			var spent [3]time.Duration
			// Per full round, partlog's speed over each baseline's (the
			// inverse ratio of their times): an fdatasync that stalls
			// for milliseconds moves one round, not the median.
			var vsMutex, vsLimit []float64
			done := 0
			b.ResetTimer()
			for round := 0; done < b.N; round++ {
				n := min(block, b.N-done)
				var t [3]time.Duration
				for k := range variants {
					m := (round + k) % len(variants)
					start := time.Now()
					variants[m](n)
					t[m] = time.Since(start)
					spent[m] += t[m]
				}
				if n == block && t[0] > 0 {
					vsMutex = append(vsMutex, float64(t[1])/float64(t[0]))
					vsLimit = append(vsLimit, float64(t[2])/float64(t[0]))
				}
				done += n
			}
			b.StopTimer()
			rate := func(m int) float64 { return float64(done) / spent[m].Seconds() }
			b.ReportMetric(rate(0), "partlog-batches/s")
			b.ReportMetric(rate(1), "mutex-batches/s")
			b.ReportMetric(rate(2), "limit-batches/s")
			b.ReportMetric(rate(0)/rate(1), "partlog/mutex")
			b.ReportMetric(rate(0)/rate(2), "partlog/limit")
			if len(vsMutex) > 0 {
				slices.Sort(vsMutex)
				slices.Sort(vsLimit)
				b.ReportMetric(vsMutex[len(vsMutex)/2], "partlog/mutex-median")
				b.ReportMetric(vsLimit[len(vsLimit)/2], "partlog/limit-median")
			}
		})
	}
}

var durableBlock = flag.Int("bench.durableblock", 16, "BenchmarkDurableAppend's batches per writer in each variant's block of a round")

// baselineFile is a plain file written by the baselines of
// BenchmarkDurableAppend.
type baselineFile struct {
	mu  sync.Mutex
	f   *os.File
	off int64
}

func newBaselineFile(b *testing.B, path string) *baselineFile {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	return &baselineFile{f: f}
}

// wrap starts the file again once it passes 1 GiB, like a roll. Caller
// holds mu.
func (bf *baselineFile) wrap() {
	if bf.off >= 1<<30 {
		_ = bf.f.Truncate(0)
		bf.off = 0
	}
}

// perBatch writes n batches from writers goroutines, each one write(2)
// and fdatasync under the mutex.
func (bf *baselineFile) perBatch(b *testing.B, src []byte, n, writers int) {
	fd := int(bf.f.Fd())
	one := func(count int) {
		for range count {
			bf.mu.Lock()
			bf.wrap()
			_, err := unix.Pwrite(fd, src, bf.off)
			if err == nil {
				err = unix.Fdatasync(fd)
			}
			bf.off += int64(len(src))
			bf.mu.Unlock()
			if err != nil {
				b.Error(err)
				return
			}
		}
	}
	splitAmong(writers, n, one)
}

// grouped writes n batches as groups of len(group)/size batches, each
// group one pwrite(2) and one fdatasync.
func (bf *baselineFile) grouped(b *testing.B, group []byte, size, n int) {
	fd := int(bf.f.Fd())
	for n > 0 {
		k := min(n, len(group)/size)
		bf.wrap()
		if _, err := unix.Pwrite(fd, group[:k*size], bf.off); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			b.Fatal(err)
		}
		bf.off += int64(k * size)
		n -= k
	}
}

// splitAmong runs one(count) on each of writers goroutines, the counts
// adding up to n, and waits for them.
func splitAmong(writers, n int, one func(count int)) {
	var wg sync.WaitGroup
	for w := range writers {
		count := n / writers
		if w < n%writers {
			count++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			one(count)
		}()
	}
	wg.Wait()
}
