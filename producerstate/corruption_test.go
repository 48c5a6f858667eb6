package producerstate

import (
	"errors"
	"reflect"
	"testing"
)

// TestSilentCorruptions reproduces mirror.md §1.2 (producer-state.md §6.9,
// T49–T54b) with barriers disabled through the test hook, and shows that
// the barrier prevents each one.
func TestSilentCorruptions(t *testing.T) {
	// mirrored writes producer 5 of cluster A, then optionally a barrier.
	mirrored := func(t *testing.T, withBarrier bool, specs ...bspec) (*Manager, *logWriter) {
		m := New(Config{})
		m.barriersDisabled = !withBarrier
		l := newLog(t, m)
		l.must(Mirror, specs...)
		l.must(Coordinator, barrier()) // inert when disabled
		return m, l
	}
	t.Run("case1_same_epoch_wrong_sequence", func(t *testing.T) {
		for _, withBarrier := range []bool{false, true} {
			m, l := mirrored(t, withBarrier, data(5, 0, 0, 42))
			if _, err := l.append(Mirror, data(5, 0, 0, 5)); err != nil {
				t.Fatal(err) // silent either way: no error is ever raised
			}
			e := mustEntry(t, m, 5)
			if !withBarrier && e.NumBatches != 2 {
				t.Fatalf("without barrier A's and B's batches should mix, got %d", e.NumBatches)
			}
			if withBarrier && (e.NumBatches != 1 || e.LastSequence != 4) {
				t.Fatalf("with barrier entry %+v", e)
			}
		}
	})
	t.Run("case2_lower_epoch_accepted", func(t *testing.T) {
		for _, withBarrier := range []bool{false, true} {
			m, l := mirrored(t, withBarrier, data(5, 3, 0, 10))
			l.must(Mirror, data(5, 0, 0, 1))
			l.must(Mirror, data(5, 3, 10, 1))
			e := mustEntry(t, m, 5)
			if !withBarrier && (e.ProducerEpoch != 3 || e.LastSequence != 10) {
				t.Fatalf("without barrier the epoch flips back silently: %+v", e)
			}
			// On B's leader the same producer is fenced without a barrier.
			_, err := l.append(Client, data(5, 0, 0, 1))
			if !withBarrier && !errors.Is(err, ErrInvalidProducerEpoch) {
				t.Fatalf("err %v", err)
			}
		}
		// With the barrier, B's epoch-0 producer is simply a new producer.
		m, l := mirrored(t, true, data(5, 3, 0, 10))
		if _, err := l.append(Client, data(5, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		if e := mustEntry(t, m, 5); e.ProducerEpoch != 0 || e.NumBatches != 1 {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("case3_T54_marker_closes_other_producers_txn", func(t *testing.T) {
		// Without barrier: A's txn open at 0; B's txn data and COMMIT.
		m, l := mirrored(t, false, txnData(5, 0, 0, 3))
		l.must(Mirror, txnData(5, 1, 0, 2))
		a := l.must(Mirror, commit(5, 1, 0))
		if got := a.CompletedTxns(); len(got) != 1 || got[0].FirstOffset != 0 || got[0].Aborted {
			t.Fatalf("expected B's commit to commit A's data: %+v", got)
		}
		_ = m
		// With abort + barrier: A's txn aborted at its own marker; B's is separate.
		m2 := New(Config{})
		l2 := newLog(t, m2)
		l2.must(Mirror, txnData(5, 0, 0, 3))
		ab := l2.must(Coordinator, abort(5, 0, 0))
		l2.must(Coordinator, barrier())
		l2.must(Mirror, txnData(5, 1, 0, 2)) // 5,6
		c := l2.must(Mirror, commit(5, 1, 0))
		if got := ab.CompletedTxns(); len(got) != 1 || got[0].FirstOffset != 0 || !got[0].Aborted {
			t.Fatalf("A's abort %+v", got)
		}
		if got := c.CompletedTxns(); !reflect.DeepEqual(got, []CompletedTxn{{ProducerID: 5, FirstOffset: 5, LastOffset: 7, LastStableOffset: 8}}) {
			t.Fatalf("B's commit %+v", got)
		}
	})
	t.Run("T54a_non_txn_inside_foreign_txn_is_loud", func(t *testing.T) {
		_, l := mirrored(t, false, txnData(5, 0, 0, 3))
		if _, err := l.append(Mirror, data(5, 1, 0, 1)); !errors.Is(err, ErrInvalidTxnState) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("T54b_coordinator_fenced_without_barrier", func(t *testing.T) {
		for _, withBarrier := range []bool{false, true} {
			_, l := mirrored(t, withBarrier, commit(5, 0, 7))
			l.must(Client, txnData(5, 1, 0, 1))
			_, err := l.append(Coordinator, commit(5, 1, 2))
			if !withBarrier && !errors.Is(err, ErrTransactionCoordinatorFenced) {
				t.Fatalf("err %v", err)
			}
			if withBarrier && err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("T49_chain_and_T50_T51_leader_view", func(t *testing.T) {
		for _, withBarrier := range []bool{false, true} {
			// B holds A's PID 5 (epoch 0, seq 0–41; cached 0–4 … 37–41).
			m, l := mirrored(t, withBarrier, data(5, 0, 0, 5), data(5, 0, 5, 8), data(5, 0, 13, 8), data(5, 0, 21, 8), data(5, 0, 29, 8), data(5, 0, 37, 5))
			_, err := l.append(Client, data(5, 0, 0, 5))
			switch {
			case !withBarrier && !errors.Is(err, ErrOutOfOrderSequence): // T50
				t.Fatalf("T50 err %v", err)
			case withBarrier && err != nil:
				t.Fatalf("T49 err %v", err)
			}
			if withBarrier {
				// C replicates B's log: same entry.
				c := replay(t, l.batches, 0)
				if !reflect.DeepEqual(c.Producers(), m.Producers()) {
					t.Fatal("chain member differs")
				}
				if e := mustEntry(t, m, 5); e.LastSequence != 4 || e.NumBatches != 1 {
					t.Fatalf("%+v", e)
				}
			}
			// T51: B's new producer repeats (epoch 0, seq 37–41) of A's cached batch.
			m2, l2 := mirrored(t, withBarrier, data(5, 0, 37, 5))
			_, err = l2.append(Client, data(5, 0, 37, 5))
			if !withBarrier && !errors.Is(err, ErrDuplicateSequence) {
				t.Fatalf("T51 without barrier: %v", err)
			}
			if withBarrier && err != nil {
				t.Fatalf("T51 with barrier: %v", err)
			}
			_ = m2
		}
	})
}
