package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/testutil"
	"golang.org/x/sys/unix"
)

// benchBaseDir is where the many-partition benchmarks put their log
// directories: $PARTLOG_BENCH_DIR if set (a small loop-mounted file system
// keeps a mistake from filling the host disk), else a test temporary
// directory.
func benchBaseDir(b *testing.B) string {
	if d := os.Getenv("PARTLOG_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// makePartitionDirs creates n empty partition directories t-0 … t-(n-1).
func makePartitionDirs(b *testing.B, dir string, n int) {
	for i := range n {
		if err := os.Mkdir(filepath.Join(dir, "t-"+strconv.Itoa(i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
}

// procStatus returns a field of /proc/self/status in bytes (kB fields).
func procStatus(b *testing.B, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			f := bytes.Fields(rest)
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// mappings counts the process's memory mappings.
func mappings(b *testing.B) int {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	return n
}

// allocated sums the disk blocks allocated to the files under dir.
func allocated(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

// needFiles skips the benchmark when the descriptor limit cannot hold n
// open partitions holding per descriptors each: an idle partition holds 1
// (its directory lock; the active .log's descriptor is opened on its first
// write or sync, and the mapped indexes keep none), one that is written
// to holds 2.
func needFiles(b *testing.B, n, per int) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		b.Fatal(err)
	}
	if want := uint64(per*n + 500); r.Cur < want {
		b.Skipf("RLIMIT_NOFILE %d below the %d that %d partitions need (raise it with ulimit -n)", r.Cur, want, n)
	}
}

// partitionCount is the number of partitions of the many-partition
// benchmarks: large unless -short (CI's smoke run).
// $PARTLOG_BENCH_PARTITIONS overrides the large count (a machine whose
// descriptor limit is 20 000 fits 10 000 idle ones).
func partitionCount(large, short int) int {
	if testing.Short() {
		return short
	}
	if n, err := strconv.Atoi(os.Getenv("PARTLOG_BENCH_PARTITIONS")); err == nil && n > 0 && large >= 10_000 {
		return n
	}
	return large
}

// openFiles counts the process's open descriptors.
func openFiles(b *testing.B) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	return len(entries)
}

// BenchmarkOpenDir opens a log directory of N partitions at the default
// Options (1 GiB segments, 10 MiB indexes, 8 MiB prefault window): fresh
// (empty partition directories: every log creates its first segment) and
// reopened after a clean Close with a few batches appended to each. It
// reports, for the open: seconds (and CPU seconds, user and system, of the
// whole process while it runs), goroutines beyond those before it, RSS
// growth, memory mappings added, and the disk allocated to the directory.
// N is 10 000 (200 with -short). Goals at 10 000: fresh ≤ 2 s, reopen
// ≤ 3 s, ≤ 2 goroutines per core, RSS ≤ 200 MiB, disk ≤ 10 GiB, and ≤ 3
// mappings per partition (10 000 partitions under vm.max_map_count).
func BenchmarkOpenDir(b *testing.B) {
	n := partitionCount(10_000, 200)
	needFiles(b, n, 1)
	src := batchOfSize(b, 1<<10)
	for _, mode := range []string{"fresh", "reopen"} {
		b.Run(fmt.Sprintf("partitions=%d/%s", n, mode), func(b *testing.B) {
			b.ReportAllocs()
			var open, cpu time.Duration
			var goroutines, rss, maps, fds, disk float64
			for range b.N {
				b.StopTimer()
				dir := benchBaseDir(b)
				makePartitionDirs(b, dir, n)
				if mode == "reopen" {
					d, err := partlog.OpenDir(dir, nil)
					if err != nil {
						b.Fatal(err)
					}
					for _, l := range d.Logs() {
						for range 3 {
							if _, err := l.AppendAsLeader(src, 1); err != nil {
								b.Fatal(err)
							}
						}
					}
					if err := d.Close(); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				g0, rss0, m0, fd0 := runtime.NumGoroutine(), procStatus(b, "VmRSS"), mappings(b), openFiles(b)
				b.StartTimer()
				// CPU time: on a shared machine the open's varies less
				// than its wall time.
				start, cpu0 := time.Now(), testutil.ProcessCPU(b)
				d, err := partlog.OpenDir(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				open += time.Since(start)
				cpu += testutil.ProcessCPU(b) - cpu0
				b.StopTimer()
				if p := d.Problems(); len(p) > 0 || len(d.Logs()) != n {
					b.Fatalf("%d logs, problems %v", len(d.Logs()), p)
				}
				time.Sleep(10 * time.Millisecond) // let finished goroutines exit
				goroutines += float64(runtime.NumGoroutine() - g0)
				rss += float64(procStatus(b, "VmRSS") - rss0)
				maps += float64(mappings(b) - m0)
				fds += float64(openFiles(b) - fd0)
				disk += float64(allocated(b, dir))
				if err := d.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			nb := float64(b.N)
			b.ReportMetric(open.Seconds()/nb, "open-s")
			b.ReportMetric(cpu.Seconds()/nb, "cpu-s")
			b.ReportMetric(goroutines/nb, "goroutines")
			b.ReportMetric(rss/nb/(1<<20), "RSS-MiB")
			b.ReportMetric(maps/nb/float64(n), "mappings/partition")
			b.ReportMetric(disk/nb/(1<<30), "disk-GiB")
			b.ReportMetric(fds/nb/float64(n), "fds/partition")
		})
	}
}

// threadCPU is the CPU time the calling thread has used
// (CLOCK_THREAD_CPUTIME_ID); the caller is locked to its thread.
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// threadFaults returns the calling thread's page faults so far: major
// (the page had to be read in, or zeroed for a file's hole or unwritten
// blocks) and minor (the page was in the page cache, or only its write
// protection had to go).
func threadFaults(b *testing.B) (major, minor int64) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Majflt, ru.Minflt
}

// reportMedian reports the median of ratios (per-round ratios of a
// paired benchmark) as the metric unit, if there are any.
func reportMedian(b *testing.B, ratios []float64, unit string) {
	if len(ratios) > 0 {
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], unit)
	}
}

// openRoundRobinLogs opens a directory of n new partitions of topic t
// (closed at cleanup) and returns their logs, partition 0 first.
func openRoundRobinLogs(b *testing.B, n int) []*partlog.Log {
	dir := benchBaseDir(b)
	makePartitionDirs(b, dir, n)
	d, err := partlog.OpenDir(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	logs := make([]*partlog.Log, 0, n)
	for i := range n {
		l, ok := d.Log(partlog.TopicPartition{Topic: "t", Partition: int32(i)})
		if !ok {
			b.Fatalf("partition %d missing", i)
		}
		logs = append(logs, l)
	}
	return logs
}

// BenchmarkRoundRobin appends 1 KiB batches spread round-robin over 1 000
// partitions (one batch to each in turn) and the same batches into one
// partition, interleaved in rounds of 1 000 appends per variant, and
// reports each variant's time per append and the throughput ratio
// rr/single. The same rounds also time the machine's ceiling for that
// ratio, BenchmarkRoundRobinCeiling's copies alone (ceiling-single: the
// batch copied into one mapped, prefaulted file; ceiling-rr: into one
// such file per partition), so the goal is read against it in one run:
// of-ceiling, the median of the per-round (rr/single) ÷ (ceiling
// rr/single), ≥ 0.9. The logs use the default Options (1 GiB segments,
// the shared prefault pool). 100 partitions with -short.
// On a shared machine a round where another process takes the CPU from
// one variant moves the overall ratio a lot, so the median of the
// per-round ratios is reported beside it (rr/single-median), and the
// median of the per-round ratios of the writer thread's CPU time
// (rr/single-cpu-median: the loop runs locked to its thread; time the
// thread was not running, taken by other processes or by the
// hypervisor, is left out of both variants alike). The writer thread's
// page faults per 1 000 appends of each variant (majflt/kop: pages read
// in or zeroed under the append; minflt/kop: pages found in the page
// cache, or write-protected) tell whether the prefault pool kept ahead.
func BenchmarkRoundRobin(b *testing.B) {
	n := partitionCount(1000, 100)
	needFiles(b, n, 2)
	src := batchOfSize(b, 1<<10)
	b.Run(fmt.Sprintf("partitions=%d/size=1KiB", n), func(b *testing.B) {
		logs := openRoundRobinLogs(b, n)
		single := openBenchLog(b)
		// Before the timer, for every log: the first append at a leader
		// epoch writes the epoch checkpoint (an fsync), and the first
		// index entry (after index.interval.bytes, 4 KiB) creates the
		// active segment's index files (made lazily): one-time costs of a
		// new partition, not of the steady state measured here.
		for _, l := range append(logs, single) {
			for range 8 {
				if _, err := l.AppendAsLeader(src, 1); err != nil {
					b.Fatal(err)
				}
			}
		}
		size := int64(len(src))
		warm(b, int64(b.N)*size*4)
		// The ceiling's files last, prefaulted just before the timer
		// (idle prefaulted pages get slow to write: see
		// BenchmarkRoundRobinCeiling).
		dir := benchBaseDir(b)
		perPart := (int64(b.N+n-1)/int64(n))*size + 4096
		cSingle := ceilingFile(b, dir, "ceiling-single", int64(b.N)*size+4096, 0).Bytes()
		cData := make([][]byte, n)
		cPos := make([]int, n)
		for i := range n {
			cData[i] = ceilingFile(b, dir, "ceiling-rr-"+strconv.Itoa(i), perPart, 0).Bytes()
		}
		cSinglePos := 0
		b.SetBytes(size)
		b.ReportAllocs()
		const variants = 4 // single, rr, ceiling-single, ceiling-rr
		var spent [variants]time.Duration
		var major, minor [2]int64
		ratios := make([]float64, 0, b.N/n+1)
		cpuRatios := make([]float64, 0, b.N/n+1)
		ofCeiling := make([]float64, 0, b.N/n+1)
		done := 0
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.ResetTimer()
		for round := 0; done < b.N; round++ {
			k := min(n, b.N-done)
			var t, cpu [variants]time.Duration
			for v := range variants {
				m := (round + v) % variants
				// One loop per variant, not one with a choice of log: a
				// profile then tells the variants apart by their call
				// sites.
				majStart, minStart := threadFaults(b)
				cpuStart := threadCPU(b)
				start := time.Now()
				switch m {
				case 0:
					for range k {
						if _, err := single.AppendAsLeader(src, 1); err != nil {
							b.Fatal(err)
						}
					}
				case 1:
					for _, l := range logs[:k] {
						if _, err := l.AppendAsLeader(src, 1); err != nil {
							b.Fatal(err)
						}
					}
				case 2:
					for range k {
						cSinglePos += copy(cSingle[cSinglePos:], src)
					}
				case 3:
					for i := range k {
						cPos[i] += copy(cData[i][cPos[i]:], src)
					}
				}
				t[m] = time.Since(start)
				cpu[m] = threadCPU(b) - cpuStart
				spent[m] += t[m]
				if m < 2 {
					maj, mnr := threadFaults(b)
					major[m] += maj - majStart
					minor[m] += mnr - minStart
				}
			}
			if t[1] > 0 && t[3] > 0 && t[2] > 0 {
				rr := float64(t[0]) / float64(t[1])
				ratios = append(ratios, rr)
				ofCeiling = append(ofCeiling, rr/(float64(t[2])/float64(t[3])))
			}
			if cpu[1] > 0 {
				cpuRatios = append(cpuRatios, float64(cpu[0])/float64(cpu[1]))
			}
			done += k
		}
		b.StopTimer()
		per := func(m int) float64 { return float64(spent[m].Nanoseconds()) / float64(done) }
		b.ReportMetric(per(0), "single-ns/op")
		b.ReportMetric(per(1), "rr-ns/op")
		b.ReportMetric(per(0)/per(1), "rr/single")
		reportMedian(b, ratios, "rr/single-median")
		reportMedian(b, cpuRatios, "rr/single-cpu-median")
		b.ReportMetric(per(2)/per(3), "ceiling-rr/single")
		reportMedian(b, ofCeiling, "of-ceiling-median")
		perK := func(n int64) float64 { return float64(n) * 1000 / float64(done) }
		b.ReportMetric(perK(major[0]), "single-majflt/kop")
		b.ReportMetric(perK(major[1]), "rr-majflt/kop")
		b.ReportMetric(perK(minor[0]), "single-minflt/kop")
		b.ReportMetric(perK(minor[1]), "rr-minflt/kop")
	})
}
