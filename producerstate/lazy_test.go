package producerstate

import (
	"errors"
	"testing"
	"time"
)

// TestCachedBatchesRing: past MaxCachedBatches the oldest batch goes and
// the rest keep their order (Entry.Batches oldest first), duplicates are
// found in every slot of the wrapped ring, an epoch change empties it, and
// a snapshot keeps the newest.
func TestCachedBatchesRing(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	for i := range 13 {
		l.must(Client, data(7, 0, int32(i*2), 2)) // sequences 2i, 2i+1
		e := mustEntry(t, m, 7)
		want := min(i+1, MaxCachedBatches)
		if e.NumBatches != want {
			t.Fatalf("after %d batches: %d cached, want %d", i+1, e.NumBatches, want)
		}
		for k, b := range e.CachedBatches() {
			first := int32(2 * (i + 1 - want + k))
			if b.FirstSequence() != first || b.LastSequence != first+1 {
				t.Fatalf("after %d batches: cached[%d] = %d..%d, want %d..%d", i+1, k, b.FirstSequence(), b.LastSequence, first, first+1)
			}
		}
		for k := range i + 1 {
			_, _, err := appendAt(t, m, Client, l.next, data(7, 0, int32(k*2), 2))
			var dup *DuplicateSequenceError
			if cached := k > i-want; cached != errors.As(err, &dup) {
				t.Fatalf("after %d batches, retry of batch %d: %v (cached %v)", i+1, k, err, cached)
			}
			if dup != nil && dup.FirstOffset != int64(k*2) {
				t.Fatalf("retry of batch %d: first offset %d, want %d", k, dup.FirstOffset, k*2)
			}
		}
		if e.LastSequence != int32(2*i+1) {
			t.Fatalf("LastSequence %d", e.LastSequence)
		}
	}
	snap := m.SnapshotEntries()
	if len(snap) != 1 || snap[0].LastSequence != 25 || snap[0].LastOffset != 25 {
		t.Fatalf("snapshot %+v", snap)
	}
	l.must(Client, data(7, 1, 0, 1)) // new epoch: the ring empties
	if e := mustEntry(t, m, 7); e.NumBatches != 1 || e.Batches[0].LastSequence != 0 || e.ProducerEpoch != 1 {
		t.Fatalf("after the epoch bump: %+v", e)
	}
	// The old epoch's batches are still in the ring's slots but not
	// cached: a batch of the new epoch with one of their sequence ranges
	// is out of order, not a duplicate.
	if _, _, err := appendAt(t, m, Client, l.next, data(7, 1, 24, 2)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("new-epoch batch with a stale slot's sequences: %v", err)
	}
}

// TestSameProducerTwiceInOneAppend: the second batch of a producer in one
// append is checked against the first one's effect (the working copy made
// lazily), for a producer with and without a stored entry, and a bad
// second batch fails the whole append with nothing committed.
func TestSameProducerTwiceInOneAppend(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Client, data(1, 0, 0, 3), data(1, 0, 3, 2), data(2, 0, 0, 1), data(1, 0, 5, 1))
	if e := mustEntry(t, m, 1); e.NumBatches != 3 || e.LastSequence != 5 {
		t.Fatalf("producer 1: %+v", e)
	}
	l.must(Client, data(2, 0, 1, 1), data(2, 0, 2, 1))
	if e := mustEntry(t, m, 2); e.NumBatches != 3 || e.LastSequence != 2 {
		t.Fatalf("producer 2: %+v", e)
	}
	before := mustEntry(t, m, 1)
	_, err := l.append(Client, data(1, 0, 6, 1), data(1, 0, 9, 1))
	var pe *ProducerError
	if !errors.As(err, &pe) || !errors.Is(err, ErrOutOfOrderSequence) || pe.StoredLastSequence != 6 {
		t.Fatalf("gap after a batch of the same append: %v", err)
	}
	if after := mustEntry(t, m, 1); after != before {
		t.Fatalf("a failed append changed the entry: %+v -> %+v", before, after)
	}
	// A transaction opened and closed in one append (Replication).
	l.must(Replication, txnData(3, 0, 0, 1), commit(3, 0, 4), data(3, 0, 1, 1))
	if e := mustEntry(t, m, 3); e.CurrentTxnFirstOffset != -1 || e.CoordinatorEpoch != 4 || e.LastSequence != 1 {
		t.Fatalf("producer 3: %+v", e)
	}
}

// TestCommitWithoutProducersTakesNoLock: an append of batches without a
// producer id stages nothing and commits (moves the MEO) without the
// state lock, so it completes while a reader holds that lock.
func TestCommitWithoutProducersTakesNoLock(t *testing.T) {
	m := New(Config{})
	v := build(t, data(-1, -1, -1, 3))
	var a Append
	m.Begin(&a, Client, 0)
	if err := m.Validate(&a, v, 10); err != nil {
		t.Fatal(err)
	}
	if len(a.ops) != 0 || len(a.accs) != 0 {
		t.Fatalf("staged %d ops, %d accumulators for a batch without a producer id", len(a.ops), len(a.accs))
	}
	commitUnderStateLock(t, m, &a, "an append without producers")
	if got := m.MapEndOffset(); got != 13 {
		t.Fatalf("MEO %d, want 13", got)
	}
}

// TestCommitOneBatchTakesOnlyTheShardLock: one data batch of a known
// producer outside a transaction commits under its shard lock alone (it
// completes while the state lock is held), and readers see the entry.
func TestCommitOneBatchTakesOnlyTheShardLock(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Client, data(5, 0, 0, 2))
	var a Append
	m.Begin(&a, Client, 0)
	if err := m.Validate(&a, build(t, data(5, 0, 2, 3)), l.next); err != nil {
		t.Fatal(err)
	}
	commitUnderStateLock(t, m, &a, "one batch of a known producer")
	if e := mustEntry(t, m, 5); e.LastSequence != 4 || e.NumBatches != 2 || e.LastOffset != l.next+2 {
		t.Fatalf("entry after the commit: %+v", e)
	}
	if ps := m.Producers(); len(ps) != 1 || ps[0].LastSequence != 4 {
		t.Fatalf("Producers: %+v", ps)
	}
	if got := m.MapEndOffset(); got != l.next+3 {
		t.Fatalf("MEO %d, want %d", got, l.next+3)
	}
	// A new producer, or a transaction's first batch, takes the state lock.
	for _, s := range []bspec{data(6, 0, 0, 1), txnData(5, 0, 5, 1)} {
		var b Append
		m.Begin(&b, Client, 0)
		if err := m.Validate(&b, build(t, s), l.next+3); err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		done := make(chan struct{})
		go func() { m.Commit(&b); close(done) }()
		select {
		case <-done:
			t.Fatalf("Commit of %+v did not wait for the state lock", s)
		case <-time.After(50 * time.Millisecond):
		}
		m.mu.Unlock()
		<-done
	}
	if m.Len() != 2 || len(m.OngoingTransactions()) != 1 {
		t.Fatalf("%d producers, %d open transactions", m.Len(), len(m.OngoingTransactions()))
	}
}

// commitUnderStateLock commits a while the state lock (Manager.mu) is
// held, and fails the test if the Commit waits for it.
func commitUnderStateLock(t *testing.T, m *Manager, a *Append, what string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.Commit(a); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Commit of %s waited for the state lock", what)
	}
}
