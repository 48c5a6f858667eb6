package producerstate

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/partlog/partlog/snapshot"
)

// SnapshotEntries returns a consistent copy of the state in snapshot form
// (formats.md §5.2): one entry per producer with only its newest cached
// batch. The order is unspecified (as in Kafka); sort it if you compare.
func (m *Manager) SnapshotEntries() []snapshot.Entry {
	return readEntries(m, func() []snapshot.Entry {
		m.mu.Lock() // after beginRead: appends take mu inside the append lock
		defer m.mu.Unlock()
		return m.snapshotEntriesLocked()
	})
}

// snapshotEntriesLocked is SnapshotEntries for a caller holding mu and
// either serialised with appends (TakeSnapshot) or between beginRead and
// endRead (SnapshotEntries).
func (m *Manager) snapshotEntriesLocked() []snapshot.Entry {
	// Each shard fills its own range of out. With many producers the
	// walk is bound by memory latency (a table walk chasing entry
	// pointers), so the shards are split between two goroutines.
	starts := make([]int, len(m.shards)+1)
	for i := range m.shards {
		starts[i+1] = starts[i] + m.shards[i].producers.count
	}
	out := make([]snapshot.Entry, starts[len(m.shards)])
	fill := func(from, to int) {
		for s := from; s < to; s++ {
			i := starts[s]
			sh := &m.shards[s]
			sh.mu.Lock() // an append of one batch changes an entry under it alone
			for _, sl := range sh.producers.slots {
				if sl.e != nil {
					exportSnapshotEntry(&out[i], sl.e)
					i++
				}
			}
			sh.mu.Unlock()
		}
	}
	if len(out) < parallelSnapshotEntries || len(m.shards) < 2 {
		fill(0, len(m.shards))
		return out
	}
	half := len(m.shards) / 2
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); fill(half, len(m.shards)) }()
	fill(0, half)
	wg.Wait()
	return out
}

// parallelSnapshotEntries is the producer count from which
// snapshotEntriesLocked uses a second goroutine.
const parallelSnapshotEntries = 64 << 10

// exportSnapshotEntry fills x with e in snapshot form: only the newest
// cached batch is kept (formats.md §5.2).
func exportSnapshotEntry(x *snapshot.Entry, e *entry) {
	x.ProducerID = e.producerID
	x.ProducerEpoch = e.epoch
	x.Timestamp = e.lastTimestamp
	x.CoordinatorEpoch = e.coordinatorEpoch
	x.CurrentTxnFirstOffset = e.txnFirstOffset
	if e.n > 0 {
		b := e.newest()
		x.LastSequence, x.LastOffset, x.OffsetDelta = b.LastSequence, b.LastOffset, b.OffsetDelta
	} else {
		x.LastSequence, x.LastOffset, x.OffsetDelta = -1, -1, 0
	}
}

// LoadSnapshot replaces the state with entries, the content of the
// snapshot named mapEndOffset (§5.4 step 3): every producer, open
// transaction, decided transaction and barrier is dropped first; then
// each entry is loaded unless it has no open transaction and
// nowMs-Timestamp >= ProducerIDExpirationMs (Kafka drops such expired
// entries while loading). An entry with LastOffset >= 0 gets one cached
// batch (LastSequence, LastOffset, OffsetDelta, Timestamp); an entry with
// CurrentTxnFirstOffset >= 0 opens a transaction there. MEO and the last
// snapshot offset become mapEndOffset. Duplicate producer ids (not written
// by Kafka) keep the last one.
func (m *Manager) LoadSnapshot(entries []snapshot.Entry, mapEndOffset int64, nowMs int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resetLocked(mapEndOffset)

	// One backing array for all entries keeps a million-producer load to
	// a handful of allocations.
	// The tables are filled off to the side and each is swapped in under
	// its shard lock: Producer(pid) reads them with only that lock.
	slab := make([]entry, 0, len(entries))
	per := len(entries) / len(m.shards)
	tables := make([]pidTable, len(m.shards))
	for i := range tables {
		tables[i].skip = m.shards[i].producers.skip
		if per > 0 {
			n := minTableSlots
			for per*4 > n*3 {
				n *= 2
			}
			tables[i].resize(n)
		}
	}
	for i := range entries {
		x := &entries[i]
		if x.CurrentTxnFirstOffset < 0 && nowMs-x.Timestamp >= m.expirationMs {
			continue
		}
		slab = append(slab, entry{
			producerID:       x.ProducerID,
			lastTimestamp:    x.Timestamp,
			txnFirstOffset:   max(x.CurrentTxnFirstOffset, -1),
			coordinatorEpoch: x.CoordinatorEpoch,
			epoch:            x.ProducerEpoch,
			seqTop:           -1,
		})
		e := &slab[len(slab)-1]
		if x.LastOffset >= 0 {
			e.n, e.seqTop = 1, x.LastSequence
			e.batches[0] = BatchMetadata{LastSequence: x.LastSequence, OffsetDelta: x.OffsetDelta,
				LastOffset: x.LastOffset, Timestamp: x.Timestamp}
		}
		if old := tables[m.shardIndex(x.ProducerID)].put(x.ProducerID, e); old == nil {
			m.count++
		} else if old.txnFirstOffset >= 0 {
			m.ongoing = slices.DeleteFunc(m.ongoing, func(t txnRecord) bool { return t.producerID == x.ProducerID })
		}
		if e.txnFirstOffset >= 0 {
			m.ongoing = append(m.ongoing, txnRecord{producerID: e.producerID, firstOffset: e.txnFirstOffset, lastOffset: -1})
		}
	}
	slices.SortFunc(m.ongoing, func(x, y txnRecord) int { return cmp64(x.firstOffset, y.firstOffset) })
	m.slab = slab
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.producers = tables[i]
		s.mu.Unlock()
	}
}

// TakeSnapshot writes the state as <MEO>.snapshot in dir, atomically
// (snapshot.Write: temp file, fsync, rename, directory fsync), if MEO is
// above the last snapshot offset (§5.2: "a snapshot is written only if
// MEO > lastSnapOffset"); otherwise it writes nothing. On success the
// last snapshot offset becomes MEO. It must not run concurrently with
// another TakeSnapshot, a load or an append of the same Manager (the
// entries and the MEO it names the file by must describe the same
// batches; see the package doc, Locking).
func (m *Manager) TakeSnapshot(dir string) error {
	m.mu.Lock()
	offset := m.loadMEO()
	if offset <= m.lastSnapOffset {
		m.mu.Unlock()
		return nil
	}
	entries := m.snapshotEntriesLocked()
	m.mu.Unlock()
	if err := snapshot.Write(dir, offset, entries); err != nil {
		return fmt.Errorf("partlog/producerstate: snapshot at %d: %w", offset, err)
	}
	m.mu.Lock()
	m.lastSnapOffset = max(m.lastSnapOffset, offset)
	m.mu.Unlock()
	return nil
}

// LoadLatest picks and reads the snapshot to rebuild from, following
// producer-state.md §4.4 step 2 and §5.4:
//
//  1. every snapshot with offset > atOrBelow or <= logStart is deleted
//     (a snapshot at exactly logStart goes too, T37);
//  2. the newest remaining one is read; if it is corrupt (bad version,
//     schema or CRC — snapshot.IsCorrupt) it is deleted and the next
//     older one is tried;
//  3. other I/O errors are returned as they are.
//
// found is false when no readable snapshot remains; the caller then
// starts from an empty state at logStart. A zero-entry snapshot is found
// with len(entries) == 0. The entries are not filtered for expiration;
// LoadSnapshot does that.
func LoadLatest(dir string, atOrBelow int64, logStart int64) (entries []snapshot.Entry, offset int64, found bool, err error) {
	if _, err := snapshot.DeleteAbove(dir, atOrBelow); err != nil {
		return nil, 0, false, fmt.Errorf("partlog/producerstate: %w", err)
	}
	if _, err := snapshot.DeleteAtOrBelow(dir, logStart); err != nil {
		return nil, 0, false, fmt.Errorf("partlog/producerstate: %w", err)
	}
	for {
		f, ok, err := snapshot.NewestAtOrBelow(dir, atOrBelow)
		if err != nil {
			return nil, 0, false, fmt.Errorf("partlog/producerstate: %w", err)
		}
		if !ok {
			return nil, 0, false, nil
		}
		entries, err := snapshot.Read(f.Path)
		if err == nil {
			if entries == nil {
				entries = []snapshot.Entry{}
			}
			return entries, f.Offset, true, nil
		}
		if !snapshot.IsCorrupt(err) {
			return nil, 0, false, fmt.Errorf("partlog/producerstate: %w", err)
		}
		if rmErr := os.Remove(f.Path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return nil, 0, false, fmt.Errorf("partlog/producerstate: delete corrupt snapshot: %w (after %w)", rmErr, err)
		}
	}
}

// DeleteSnapshotsAbove removes the snapshots of dir named above offset (a
// truncation to offset: they describe offsets that are gone).
func DeleteSnapshotsAbove(dir string, offset int64) error {
	if _, err := snapshot.DeleteAbove(dir, offset); err != nil {
		return fmt.Errorf("partlog/producerstate: %w", err)
	}
	return nil
}

// DeleteSnapshotsAtOrBelow removes the snapshots of dir named at or below
// logStart: they can never seed a rebuild, which starts at the log start
// without one, and a load deletes them (T37), so a raised log start
// removes them at once.
func DeleteSnapshotsAtOrBelow(dir string, logStart int64) error {
	if _, err := snapshot.DeleteAtOrBelow(dir, logStart); err != nil {
		return fmt.Errorf("partlog/producerstate: %w", err)
	}
	return nil
}
