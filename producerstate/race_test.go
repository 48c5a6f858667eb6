package producerstate

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

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
