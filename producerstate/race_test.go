package producerstate

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
)

// setPIDSeq rewrites a data batch's producer id and base sequence in place
// (benchmarks and concurrency tests; the PSM does not check CRCs).
func setPIDSeq(v batch.View, pid int64, seq int32) {
	binary.BigEndian.PutUint64(v[batch.OffProducerID:], uint64(pid))
	binary.BigEndian.PutUint32(v[batch.OffBaseSequence:], uint32(seq))
}

// TestConcurrentReaders runs Producer/Producers/SnapshotEntries/
// LastStableOffset readers while one goroutine appends (data,
// transactions, markers, barriers) and expires; run it with -race.
func TestConcurrentReaders(t *testing.T) {
	m := New(Config{Shards: 4})
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				switch (i + r) % 5 {
				case 0:
					if e, ok := m.Producer(int64(i % 50)); ok && e.NumBatches > MaxCachedBatches {
						t.Error("bad entry")
					}
				case 1:
					ps := m.Producers()
					for j := 1; j < len(ps); j++ {
						if ps[j-1].ProducerID >= ps[j].ProducerID {
							t.Error("not sorted")
						}
					}
				case 2:
					_ = m.SnapshotEntries()
				case 3:
					if lso := m.LastStableOffset(m.MapEndOffset()); lso > m.MapEndOffset()+1<<40 {
						t.Error("lso")
					}
				case 4:
					_, _ = m.FirstUnstableOffset()
					_ = m.Barriers()
				}
			}
		}(r)
	}
	d := build(t, data(0, 0, 0, 1))
	tx := build(t, txnData(0, 0, 0, 1))
	var a Append
	seqs := map[int64]int32{}
	off := int64(0)
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	for i := 0; i < iters; i++ {
		pid := int64(i % 50)
		m.Begin(&a, Replication, 0)
		var v batch.View
		switch {
		case i%997 == 0:
			v = build(t, barrier())
			clear(seqs)
		case i%13 == 0:
			v = build(t, commit(pid, 0, 0))
		case pid%7 == 0:
			v = tx
		default:
			v = d
		}
		if !v.IsControl() {
			setPIDSeq(v, pid, seqs[pid])
			seqs[pid]++
		}
		if err := m.Validate(&a, v, off); err != nil {
			if v.IsControl() || pid%7 != 0 {
				continue // non-transactional data inside an open txn
			}
			t.Fatal(err)
		}
		m.Commit(&a)
		off += span(v)
		if i%5000 == 0 {
			m.RemoveExpired(0)
			m.OnHighWatermarkUpdated(off)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// TestKnownCommitsWithReaders: Client appends of the next batch of known
// producers (the known path, whose commit writes the entry without its
// shard lock unless a reader is at work) while readers copy entries
// (Producer, Producers, SnapshotEntries) and load the MEO. Every copy
// must be a state some commit left: the cached batches one sequence
// apart and one offset apart per producer's turn, the derived fields
// those of the newest batch, the MEO never going back. Run it with
// -race: the readers and the lock-free commits must be ordered by the
// reader count and the append lock alone (held around each append, as
// the log holds its own).
func TestKnownCommitsWithReaders(t *testing.T) {
	const producers = 8
	var appendMu sync.Mutex
	m := New(Config{Shards: 2})
	m.SetAppendLock(&appendMu)
	d := build(t, data(0, 0, 0, 1))
	var a Append
	off := int64(0)
	appendNext := func(pid int64, seq int32) {
		setPIDSeq(d, pid, seq)
		appendMu.Lock()
		defer appendMu.Unlock()
		m.Begin(&a, Client, 0)
		if err := m.Validate(&a, d, off); err != nil {
			t.Fatal(err)
		}
		m.Commit(&a)
		off++
	}
	for pid := range int64(producers) {
		appendNext(pid, 0)
	}
	check := func(e Entry) {
		bs := e.CachedBatches()
		if len(bs) == 0 || len(bs) > MaxCachedBatches {
			t.Errorf("producer %d: %d cached batches", e.ProducerID, len(bs))
			return
		}
		for i := 1; i < len(bs); i++ {
			if bs[i].LastSequence != bs[i-1].LastSequence+1 || bs[i].LastOffset != bs[i-1].LastOffset+producers {
				t.Errorf("producer %d: torn cache %+v", e.ProducerID, bs)
			}
		}
		last := bs[len(bs)-1]
		if e.LastSequence != last.LastSequence || e.LastOffset != last.LastOffset || e.LastOffset%producers != e.ProducerID {
			t.Errorf("producer %d: entry %+v does not match its newest batch", e.ProducerID, e)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			meo := int64(0)
			for i := 0; !stop.Load(); i++ {
				switch (i + r) % 4 {
				case 0:
					if e, ok := m.Producer(int64(i % producers)); ok {
						check(e)
					}
				case 1:
					for _, e := range m.Producers() {
						check(e)
					}
				case 2:
					for _, x := range m.SnapshotEntries() {
						if x.LastOffset%producers != x.ProducerID {
							t.Errorf("snapshot entry %+v", x)
						}
					}
				case 3:
					if v := m.MapEndOffset(); v < meo {
						t.Errorf("MEO %d after %d", v, meo)
					} else {
						meo = v
					}
				}
			}
		}()
	}
	iters := 200_000
	if testing.Short() {
		iters = 20_000
	}
	for i := range iters {
		appendNext(int64(i%producers), int32(1+i/producers))
	}
	stop.Store(true)
	wg.Wait()
	if got, want := m.MapEndOffset(), off; got != want {
		t.Fatalf("MEO %d, want %d", got, want)
	}
}

// TestKnownCommitLocksOnlyForReaders: the commit of a known batch writes
// the entry without its shard lock when no reader is at work (it
// completes while another goroutine holds that lock), and under the lock
// when one is (it waits for the lock); a reader that starts while such a
// commit's append holds the append lock waits for the append's end.
func TestKnownCommitLocksOnlyForReaders(t *testing.T) {
	var appendMu sync.Mutex
	m := New(Config{})
	m.SetAppendLock(&appendMu)
	d := build(t, data(5, 0, 0, 1))
	var a Append
	stage := func(seq int32, off int64) {
		setPIDSeq(d, 5, seq)
		m.Begin(&a, Client, 0)
		if err := m.Validate(&a, d, off); err != nil {
			t.Fatal(err)
		}
	}
	stage(0, 0)
	m.Commit(&a)
	sh := m.shardFor(5)

	// No reader: done while the shard lock is held elsewhere.
	stage(1, 1)
	if !a.knownPending {
		t.Fatal("the known path did not stage the batch")
	}
	sh.mu.Lock()
	done := make(chan struct{})
	go func() { appendMu.Lock(); m.Commit(&a); appendMu.Unlock(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Commit of a known batch waited for the shard lock without readers")
	}
	sh.mu.Unlock()

	// A reader at work: the commit waits for the shard lock.
	stage(2, 2)
	m.readers.Add(1)
	sh.mu.Lock()
	done = make(chan struct{})
	go func() { appendMu.Lock(); m.Commit(&a); appendMu.Unlock(); close(done) }()
	select {
	case <-done:
		t.Fatal("Commit of a known batch did not take the shard lock while a reader was at work")
	case <-time.After(50 * time.Millisecond):
	}
	// A reader starting now waits for the commit.
	read := make(chan Entry)
	go func() { e, _ := m.Producer(5); read <- e }()
	select {
	case e := <-read:
		t.Fatalf("Producer returned %+v while a commit was writing", e)
	case <-time.After(50 * time.Millisecond):
	}
	sh.mu.Unlock()
	<-done
	m.readers.Add(-1)
	if e := <-read; e.LastSequence != 2 || e.LastOffset != 2 {
		t.Fatalf("reader after the commit: %+v", e)
	}
	if got := m.MapEndOffset(); got != 3 {
		t.Fatalf("MEO %d, want 3", got)
	}
}

// TestReloadWithReaders: readers of entries (Producer, Producers) beside
// a writer that reloads the state again and again (a truncation's reset
// and rebuild, under the append lock) never see the empty state between
// the two: they read again when a reload ran during their read.
func TestReloadWithReaders(t *testing.T) {
	var appendMu sync.Mutex
	m := New(Config{Shards: 2})
	m.SetAppendLock(&appendMu)
	var a Append
	d := build(t, data(7, 0, 0, 1))
	m.Begin(&a, Client, 0)
	if err := m.Validate(&a, d, 0); err != nil {
		t.Fatal(err)
	}
	m.Commit(&a)
	snap := m.SnapshotEntries()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			appendMu.Lock()
			err := m.Reload(&Rebuild{Snapshot: snap, SnapshotOffset: 1, HasSnapshot: true, End: 1})
			appendMu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		if _, ok := m.Producer(7); !ok {
			t.Fatalf("read %d: producer 7 missing during a reload", i)
		}
		if ps := m.Producers(); len(ps) != 1 {
			t.Fatalf("read %d: %d producers during a reload, want 1", i, len(ps))
		}
		if es := m.SnapshotEntries(); len(es) != 1 {
			t.Fatalf("read %d: %d snapshot entries during a reload, want 1", i, len(es))
		}
	}
	close(stop)
	<-done
}
