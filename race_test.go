package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

// raceHeld is a view kept by a reader with a copy of its bytes.
type raceHeld struct {
	v    *ReadView
	copy []byte
}

// TestConcurrentReadersAndWriter runs readers at random offsets against
// one goroutine that appends, rolls, truncates and raises the log start.
// Readers validate every batch, and hold views across the writer's
// operations: the bytes of a view must not change until it is released,
// even when its segment was truncated, rolled, unmapped or deleted.
func TestConcurrentReadersAndWriter(t *testing.T) {
	dur := 1500 * time.Millisecond
	if testing.Short() {
		dur = 300 * time.Millisecond
	}
	opts := ltOpts(t)
	opts.SegmentMs = -1
	opts.MaxIndexBytes = 64 << 10
	// A cache smaller than the log, so sealed segments are evicted and
	// unmapped while readers hold views of them.
	cache, err := NewMappingCache(256 << 10)
	if err != nil {
		t.Fatal(err)
	}
	opts.MappingCache = cache
	l, dir := openTestLog(t, opts)
	// Batches are built here: t.Fatal must not run on other goroutines.
	pool := make([][]byte, 64)
	for i := range pool {
		pool[i] = makeBatch(t, 1+i%4, (i*37)%700, int64(1000+i))
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
		stop.Store(true)
	}
	var stats struct{ reads, batches, truncs, starts, rolls atomic.Int64 }

	const readers = 4
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					report(fmt.Errorf("reader panicked: %v", p))
				}
			}()
			rng := rand.New(rand.NewPCG(seed, 7))
			var held []raceHeld
			check := func(h raceHeld) bool {
				if !bytes.Equal(h.v.Records, h.copy) {
					report(fmt.Errorf("view at offset %d (segment %d, position %d) changed before Release", h.v.Offset, h.v.SegmentBaseOffset, h.v.Position))
					return false
				}
				h.v.Release()
				return true
			}
			defer func() {
				for _, h := range held {
					check(h)
				}
			}()
			for !stop.Load() {
				lso, leo := l.LogStartOffset(), l.LogEndOffset()
				o := lso + rng.Int64N(leo-lso+1)
				v, err := l.Read(o, 1+rng.IntN(4000), leo)
				if err != nil {
					if errors.Is(err, ErrOffsetOutOfRange) {
						continue // the writer moved the bounds meanwhile
					}
					report(fmt.Errorf("read %d: %w", o, err))
					return
				}
				stats.reads.Add(1)
				it := batch.NewIterator(v.Records, 0)
				first := true
				for b, ok := it.Next(); ok; b, ok = it.Next() {
					if first && b.LastOffset() < o {
						report(fmt.Errorf("read %d returned a first batch ending at %d", o, b.LastOffset()))
						return
					}
					first = false
					stats.batches.Add(1)
				}
				if err := it.Err(); err != nil {
					report(fmt.Errorf("read %d: invalid batch: %w", o, err))
					return
				}
				held = append(held, raceHeld{v, bytes.Clone(v.Records)})
				if rng.IntN(8) == 0 {
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				} else {
					runtime.Gosched()
				}
				// Keep up to 16 views, releasing a random one.
				if len(held) > 16 {
					i := rng.IntN(len(held))
					if !check(held[i]) {
						return
					}
					held = append(held[:i], held[i+1:]...)
				}
			}
		}(uint64(r + 1))
	}

	// The writer. bases holds the base offsets of the batches in the log,
	// the truncation points it knows.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if p := recover(); p != nil {
				report(fmt.Errorf("writer panicked: %v", p))
			}
		}()
		rng := rand.New(rand.NewPCG(99, 3))
		var bases []int64
		epoch := int32(1)
		deadline := time.Now().Add(dur)
		// Run for dur, and on (up to 10x dur) until every operation the
		// test is about has happened at least once: a slow machine must
		// not turn the run into one that exercises nothing.
		hardDeadline := time.Now().Add(10 * dur)
		more := func() bool {
			now := time.Now()
			if now.Before(deadline) {
				return true
			}
			return now.Before(hardDeadline) && (stats.truncs.Load() == 0 || stats.starts.Load() == 0 || stats.rolls.Load() == 0)
		}
		for i := 0; more() && !stop.Load(); i++ {
			switch k := rng.IntN(40); {
			case k == 0 && len(bases) > 4:
				// Truncate at a known batch boundary at or above the start.
				lso := l.LogStartOffset()
				var cand []int64
				for _, b := range bases {
					if b >= lso {
						cand = append(cand, b)
					}
				}
				if len(cand) == 0 {
					continue
				}
				target := cand[len(cand)/2+rng.IntN((len(cand)+1)/2)]
				if err := l.TruncateTo(target); err != nil {
					report(fmt.Errorf("TruncateTo(%d): %w", target, err))
					return
				}
				for len(bases) > 0 && bases[len(bases)-1] >= target {
					bases = bases[:len(bases)-1]
				}
				if l.LogEndOffset() != target {
					report(fmt.Errorf("LEO %d after TruncateTo(%d)", l.LogEndOffset(), target))
					return
				}
				stats.truncs.Add(1)
				epoch++
			case k == 1:
				lso, leo := l.LogStartOffset(), l.LogEndOffset()
				target := lso + (leo-lso)/3
				if err := l.SetLogStartOffset(target); err != nil {
					report(fmt.Errorf("SetLogStartOffset(%d): %w", target, err))
					return
				}
				stats.starts.Add(1)
			case k < 5:
				err := l.Roll()
				if err != nil {
					report(fmt.Errorf("Roll: %w", err))
					return
				}
				stats.rolls.Add(1)
			default:
				b := pool[rng.IntN(len(pool))]
				info, err := l.AppendAsLeader(b, epoch)
				if err != nil {
					report(fmt.Errorf("append: %w", err))
					return
				}
				bases = append(bases, info.FirstOffset)
			}
		}
		stop.Store(true)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d reads, %d batches; %d truncations, %d log-start raises, %d rolls; %d segments",
		stats.reads.Load(), stats.batches.Load(), stats.truncs.Load(), stats.starts.Load(), stats.rolls.Load(), len(l.Segments()))
	if stats.reads.Load() == 0 || stats.truncs.Load() == 0 || stats.starts.Load() == 0 {
		t.Fatal("the run did not exercise reads, truncations and log-start raises")
	}
	// Quiet again: the log is consistent and reopens to the same state.
	want := ltCapture(t, l)
	ltCheckReads(t, l, want.Batches)
	l2 := ltReopen(t, l, dir, opts)
	got := ltCapture(t, l2)
	// A log start inside the first segment is not kept across a reopen
	// (TestLogStartOffsetPersisted); the rest of the state is.
	if got.LSO != want.Segs[0] {
		t.Fatalf("reopened LSO %d, want the first segment's base %d", got.LSO, want.Segs[0])
	}
	var extra []ltBatch
	for _, b := range got.Batches {
		if b.Last < want.LSO {
			extra = append(extra, b)
		}
	}
	want.LSO, want.Batches = got.LSO, append(extra, want.Batches...)
	ltSameState(t, "reopened", got, want)
}

// TestMappingCacheSkipsZeroEviction: MappingCache's OnEvict ignores an
// item whose value is the zero value (ristretto removes a key from its
// store at once on Del, from its admission policy later, and an
// eviction in between hands over such an item).
func TestMappingCacheSkipsZeroEviction(t *testing.T) {
	if os.Getenv("PARTLOG_EVICT_CHILD") == "1" {
		raceEvictScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMappingCacheSkipsZeroEviction$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PARTLOG_EVICT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process failed: %v\n%s", err, out)
	}
}

// raceEvictScenario maps two sealed segments alternately through a cache
// that holds only one, forgetting each right after mapping the other.
func raceEvictScenario(t *testing.T) {
	dir := t.TempDir()
	cfg := segment.Config{SegmentBytes: 64 << 10, MaxIndexBytes: 4096, IndexIntervalBytes: 4096}
	data := makeBatch(t, 4, 2000, 1) // ~8 KB
	var segs []*segment.Segment
	for _, base := range []int64{0, 100} {
		s, err := segment.Create(dir, base, cfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var out segment.Appended
		hdrs, err := batch.CheckAll(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(data, hdrs, segment.Stamp{Assign: true, NextOffset: base}, &out); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		segs = append(segs, s)
	}
	c, err := NewMappingCache(int64(len(data)) * 3 / 2)
	if err != nil {
		t.Fatal(err)
	}
	touch := func(s *segment.Segment) uint64 {
		k := c.register(s)
		r, err := s.Read(s.BaseOffset(), 1<<20, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
		return k
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		k0 := touch(segs[0])
		c.Wait()
		k1 := touch(segs[1])
		c.forget(k0)
		c.forget(k1)
		c.Wait()
	}
}
