package bench

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/mmapfile"
)

// ceilingPart is the per-partition state of BenchmarkRoundRobinCeiling's
// rr+state variant: one small heap object per partition, read and
// written by every append to it (as any design keeps a write position and
// a mapping per partition somewhere), allocated one by one like a
// partition's Log and Segment.
type ceilingPart struct {
	data []byte
	pos  int
	n    int64 // appends, so the object is written as well as read
}

// ceilingPages is the number of heap pages of the rr+pages variant's
// per-partition state beside the data page.
const ceilingPages = 2

// ceilingPaged is a per-partition state of the rr+pages variant: a
// ceilingPart and ceilingPages blocks of a page each, allocated apart.
type ceilingPaged struct {
	ceilingPart
	pages [ceilingPages]*[512]int64
}

// ceilingFile creates a file under dir whose first size bytes are
// fallocated, mapped and prefaulted (every page populated for writing),
// and returns it with its descriptor released (the mapping stays). The
// mapping is size bytes long, or capacity bytes if capacity > size (the
// file's length then too, a hole past size: an active segment's layout
// before its mapping grew with its reservation).
func ceilingFile(b *testing.B, dir string, name string, size, capacity int64) *mmapfile.File {
	var f *mmapfile.File
	var err error
	if capacity > size {
		f, err = mmapfile.Open(filepath.Join(dir, name), mmapfile.Options{Create: true, Ahead: true, Reserve: size, Capacity: capacity})
		if err == nil {
			// CreateAhead maps the reservation only: map the capacity.
			var g *mmapfile.File
			if g, err = f.Remap(capacity); err == nil {
				err = f.Close()
				f = g
			}
		}
	} else {
		f, err = mmapfile.Open(filepath.Join(dir, name), mmapfile.Options{Create: true, Reserve: size})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	if err := f.Prefault(0, size); err != nil {
		b.Fatal(err)
	}
	if err := f.ReleaseDescriptor(); err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkRoundRobinCeiling is the machine's limit for
// BenchmarkRoundRobin: the same 1 KiB appends, interleaved in the same
// rounds of N appends per variant, doing nothing but the copy (no
// validation, no CRC, no index, no bookkeeping), into files that are
// fallocated, mapped and prefaulted in full before the timer starts:
//
//   - single: every copy into one file, back to back;
//   - rr: copy i of a round into file i of N (one file per partition),
//     write positions and mappings in two dense slices;
//   - rr+state: as rr, but each partition's mapping and position live
//     in a small heap object of its own, read and written by each copy;
//   - rr+1GiB: as rr, but each file is mapped (and sized, a hole past
//     the prefaulted part) at 1 GiB, as an active segment was at the
//     default segment.bytes before its mapping grew with its
//     reservation: the mappings are spread over 1 TiB of
//     address space instead of packed, so each copy's page walk shares
//     less with the others'.
//   - rr+pages: as rr+state, but each copy also reads and writes a word
//     in each of ceilingPages other per-partition heap blocks of 4 KiB
//     (about what an append of the engine adds to the data page: with
//     1 000 partitions a round touches ~320 pages of Log objects, 1 280
//     bytes each, ~100 of Segments, ~50 of producer-state managers, and
//     250 offset-index pages and their objects at index entries), to show
//     what that working set of pages costs once it no longer fits the
//     TLB.
//
// It reports each variant's time per copy and its throughput ratio to
// single, overall and as the median of the per-round ratios (see
// BenchmarkRoundRobin). What rr and rr+state lose here (a cold
// destination line, a TLB miss per copy, no sequential store stream) is
// what any design with one mapped file per partition pays on this
// machine, so BenchmarkRoundRobin's goal of 0.8 is to be read against
// those ratios; rr+1GiB and rr+pages price two properties of the
// engine's layout.
// The timed loop starts right after the prefault and warm: prefaulted
// pages left idle are written back as zeros and write-protected by the
// flusher, and fault again on the copies (bench/RESULTS.md,
// BenchmarkRoundRobinCeiling).
// The files take 5 × b.N KiB of page cache. 100 partitions with -short.
func BenchmarkRoundRobinCeiling(b *testing.B) {
	n := partitionCount(1000, 100)
	src := batchOfSize(b, 1<<10)
	b.Run(fmt.Sprintf("partitions=%d/size=1KiB", n), func(b *testing.B) {
		dir := benchBaseDir(b)
		size := int64(len(src))
		// Partition i gets one copy in every round of more than i
		// copies: at most ceil(b.N/n) copies.
		perPart := (int64(b.N+n-1)/int64(n))*size + 4096
		single := ceilingFile(b, dir, "single", int64(b.N)*size+4096, 0).Bytes()
		rrData := make([][]byte, n)
		rrPos := make([]int, n)
		parts := make([]*ceilingPart, n)
		wideData := make([][]byte, n)
		widePos := make([]int, n)
		for i := range n {
			rrData[i] = ceilingFile(b, dir, "rr-"+strconv.Itoa(i), perPart, 0).Bytes()
		}
		for i := range n {
			parts[i] = &ceilingPart{data: ceilingFile(b, dir, "state-"+strconv.Itoa(i), perPart, 0).Bytes()}
		}
		for i := range n {
			wideData[i] = ceilingFile(b, dir, "wide-"+strconv.Itoa(i), perPart, 1<<30).Bytes()
		}
		paged := make([]*ceilingPaged, n)
		for i := range n {
			paged[i] = &ceilingPaged{ceilingPart: ceilingPart{data: ceilingFile(b, dir, "paged-"+strconv.Itoa(i), perPart, 0).Bytes()}}
		}
		for j := range ceilingPages { // page j of every partition, then j+1: apart, as separate objects are
			for _, p := range paged {
				p.pages[j] = new([512]int64)
			}
		}
		warm(b, int64(b.N)*size*5)
		b.SetBytes(size)
		b.ReportAllocs()
		const variants = 5
		var spent [variants]time.Duration
		var ratios [variants][]float64 // per round: single's time / the variant's
		for m := 1; m < variants; m++ {
			ratios[m] = make([]float64, 0, b.N/n+1)
		}
		singlePos, done := 0, 0
		b.ResetTimer()
		for round := 0; done < b.N; round++ {
			k := min(n, b.N-done)
			var t [variants]time.Duration
			for v := range variants {
				m := (round + v) % variants
				start := time.Now()
				switch m {
				case 0:
					for range k {
						singlePos += copy(single[singlePos:], src)
					}
				case 1:
					for i := range k {
						rrPos[i] += copy(rrData[i][rrPos[i]:], src)
					}
				case 2:
					for _, p := range parts[:k] {
						p.pos += copy(p.data[p.pos:], src)
						p.n++
					}
				case 3:
					for i := range k {
						widePos[i] += copy(wideData[i][widePos[i]:], src)
					}
				case 4:
					for _, p := range paged[:k] {
						for _, pg := range p.pages {
							pg[p.n&511]++
						}
						p.pos += copy(p.data[p.pos:], src)
						p.n++
					}
				}
				t[m] = time.Since(start)
				spent[m] += t[m]
			}
			for m := 1; m < variants; m++ {
				if t[m] > 0 {
					ratios[m] = append(ratios[m], float64(t[0])/float64(t[m]))
				}
			}
			done += k
		}
		b.StopTimer()
		per := func(m int) float64 { return float64(spent[m].Nanoseconds()) / float64(done) }
		b.ReportMetric(per(0), "single-ns/op")
		b.ReportMetric(per(1), "rr-ns/op")
		b.ReportMetric(per(2), "rr+state-ns/op")
		b.ReportMetric(per(0)/per(1), "rr/single")
		b.ReportMetric(per(3), "rr+1GiB-ns/op")
		b.ReportMetric(per(0)/per(2), "rr+state/single")
		b.ReportMetric(per(4), "rr+pages-ns/op")
		b.ReportMetric(per(0)/per(3), "rr+1GiB/single")
		b.ReportMetric(per(0)/per(4), "rr+pages/single")
		reportMedian(b, ratios[1], "rr/single-median")
		reportMedian(b, ratios[2], "rr+state/single-median")
		reportMedian(b, ratios[3], "rr+1GiB/single-median")
		reportMedian(b, ratios[4], "rr+pages/single-median")
	})
}
