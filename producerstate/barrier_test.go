package producerstate

import (
	"reflect"
	"testing"

	"github.com/partlog/partlog/batch"
)

// TestBarrier covers §6.8 R1, R3, R4, R5, R7 and T44–T49, T55, T56,
// T57/T58 (replay across a barrier), T62, T63, T66.
func TestBarrier(t *testing.T) {
	t.Run("T44_leader_barrier_empties_state", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, data(5, 0, 0, 3))
		l.must(Client, data(9, 0, 0, 3))
		a := l.must(Coordinator, barrier())
		if m.Len() != 0 || m.MapEndOffset() != 7 || !reflect.DeepEqual(a.Barriers(), []int64{6}) || !reflect.DeepEqual(m.Barriers(), []int64{6}) {
			t.Fatalf("len %d MEO %d barriers %v", m.Len(), m.MapEndOffset(), m.Barriers())
		}
		if _, ok := m.Producer(-1); ok {
			t.Fatal("barrier created an entry for -1")
		}
		// T45: a follower replicating the same log holds the same state.
		f := replay(t, l.batches, 0)
		if !reflect.DeepEqual(f.Producers(), m.Producers()) {
			t.Fatal("follower differs")
		}
	})
	t.Run("T46_barrier_with_pid_creates_no_entry", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, data(12, 0, 0, 1))
		b := barrier()
		b.pid, b.epoch = 12, 4
		l.must(Replication, b)
		if m.Len() != 0 {
			t.Fatal("a barrier with a PID must still reset and create nothing")
		}
	})
	t.Run("T47_key_version_1_is_a_barrier", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, data(1, 0, 0, 1))
		v := build(t, barrier())
		// The key sits at a fixed place in a one-record control batch:
		// header, length, attributes, ts delta, offset delta, key length.
		key := v[batch.HeaderSize+5:]
		if key[0] != 0 || key[3] != 7 {
			t.Fatalf("unexpected layout % x", key[:4])
		}
		key[1] = 1
		var a Append
		m.Begin(&a, Mirror, 0)
		if err := m.Validate(&a, v, 1); err != nil {
			t.Fatal(err)
		}
		m.Commit(&a)
		if m.Len() != 0 || m.BarrierCount() != 1 {
			t.Fatal("version-1 key not treated as a barrier")
		}
	})
	t.Run("T48_empty_type7_batch_resets_nothing", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, data(1, 0, 0, 1))
		l.must(Replication, bspec{pid: -1, epoch: -1, seq: -1, control: 5})
		if m.Len() != 1 || m.BarrierCount() != 0 {
			t.Fatal("an empty control batch acted as a barrier")
		}
	})
	t.Run("brief_example_and_T55_one_append", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		a := l.must(Mirror, data(5, 0, 0, 10), barrier(), data(5, 0, 0, 1))
		e := mustEntry(t, m, 5)
		if e.NumBatches != 1 || e.LastSequence != 0 || e.LastOffset != 11 || e.ProducerEpoch != 0 {
			t.Fatalf("entry %+v", e)
		}
		if !reflect.DeepEqual(a.Barriers(), []int64{10}) {
			t.Fatalf("barriers %v", a.Barriers())
		}
		// T55 with sequences 10–19 before the barrier.
		m2 := New(Config{})
		l2 := newLog(t, m2)
		l2.must(Replication, data(5, 1, 10, 10), barrier(), data(5, 0, 0, 5))
		if e := mustEntry(t, m2, 5); e.NumBatches != 1 || e.LastSequence != 4 || e.ProducerEpoch != 0 {
			t.Fatalf("T55 entry %+v", e)
		}
	})
	t.Run("batches_after_barrier_validate_against_empty_state", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, txnData(5, 3, 0, 2))
		l.must(Coordinator, abort(5, 3, 0))
		// Without the barrier these would be fenced (lower epoch, wrong
		// sequence); after it in the same append they are a new producer.
		l.must(Coordinator, barrier(), data(5, 0, 7, 1), abort(5, 0, 0))
		if e := mustEntry(t, m, 5); e.ProducerEpoch != 0 || e.NumBatches != 1 || e.CoordinatorEpoch != 0 {
			t.Fatalf("entry %+v", e)
		}
	})
	t.Run("T56_abort_indexed_before_reset", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		pad(t, l, 100)
		a := l.must(Replication, txnData(7, 0, 0, 5), abort(7, 0, 0), barrier())
		want := []CompletedTxn{{ProducerID: 7, FirstOffset: 100, LastOffset: 105, LastStableOffset: 106, Aborted: true}}
		if !reflect.DeepEqual(a.CompletedTxns(), want) {
			t.Fatalf("completed %+v", a.CompletedTxns())
		}
		if _, ok := m.Producer(7); ok {
			t.Fatal("entry 7 survived the barrier")
		}
	})
	t.Run("T62_two_barriers_equal_one", func(t *testing.T) {
		m1, m2 := New(Config{}), New(Config{})
		l1, l2 := newLog(t, m1), newLog(t, m2)
		l1.must(Replication, data(1, 0, 0, 1), barrier(), data(2, 0, 0, 1))
		l2.must(Replication, data(1, 0, 0, 1), barrier(), barrier(), data(2, 0, 0, 1))
		p1, p2 := m1.Producers(), m2.Producers()
		p2[0].LastOffset, p2[0].Batches[0].LastOffset = p1[0].LastOffset, p1[0].Batches[0].LastOffset
		if !reflect.DeepEqual(p1, p2) {
			t.Fatalf("%+v vs %+v", p1, p2)
		}
	})
	t.Run("T63_open_txn_dropped_and_counted", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, txnData(7, 0, 0, 2))
		l.must(Replication, barrier())
		if len(m.OngoingTransactions()) != 0 || m.OrphanedTransactions() != 1 {
			t.Fatal("open transaction not dropped/counted")
		}
		if _, ok := m.FirstUnstableOffset(); ok {
			t.Fatal("FUO still pinned")
		}
		if m.LastStableOffset(10) != 10 {
			t.Fatal("LSO")
		}
		// A restart (replay) agrees.
		r := replay(t, l.batches, 1)
		if _, ok := r.FirstUnstableOffset(); ok || r.Len() != 0 {
			t.Fatal("replay disagrees")
		}
		// A later marker for 7 finds no open transaction.
		a := l.must(Coordinator, commit(7, 0, 0))
		if len(a.CompletedTxns()) != 0 {
			t.Fatal("marker closed a dropped transaction")
		}
	})
	t.Run("T57_T58_replay_reapplies_barrier", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Mirror, data(5, 2, 0, 10))
		l.must(Mirror, data(5, 2, 10, 10))
		l.must(Coordinator, barrier())
		l.must(Client, data(5, 0, 0, 5))
		for _, group := range []int{0, 1, 2, 3} {
			r := replay(t, l.batches, group)
			if !reflect.DeepEqual(r.Producers(), m.Producers()) || !reflect.DeepEqual(r.Barriers(), m.Barriers()) {
				t.Fatalf("group %d: replay %+v live %+v", group, r.Producers(), m.Producers())
			}
		}
		// From a snapshot taken before the barrier: load + replay the tail.
		r := New(Config{})
		l0 := newLog(t, r)
		l0.must(Mirror, data(5, 2, 0, 10))
		snap := r.SnapshotEntries()
		r2 := New(Config{})
		r2.LoadSnapshot(snap, 10, 0)
		var a Append
		r2.Begin(&a, Replay, 0)
		for _, v := range l.batches[1:] {
			if err := r2.Validate(&a, v, v.BaseOffset()); err != nil {
				t.Fatal(err)
			}
		}
		r2.Commit(&a)
		if !reflect.DeepEqual(r2.Producers(), m.Producers()) || !reflect.DeepEqual(r2.Barriers(), []int64{20}) {
			t.Fatalf("snapshot+replay %+v live %+v", r2.Producers(), m.Producers())
		}
	})
	t.Run("T66_snapshot_after_barrier_is_zero_entries", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, data(5, 0, 0, 1))
		l.must(Coordinator, barrier())
		dir := t.TempDir()
		if err := m.TakeSnapshot(dir); err != nil {
			t.Fatal(err)
		}
		entries, off, found, err := LoadLatest(dir, 2, 0)
		if err != nil || !found || off != 2 || len(entries) != 0 {
			t.Fatalf("%v %v %d %d", err, found, off, len(entries))
		}
		r := New(Config{})
		r.LoadSnapshot(entries, off, 0)
		if r.Len() != 0 || r.MapEndOffset() != 2 {
			t.Fatal("load")
		}
	})
}

// TestBarrierInAppendWithManyProducers: after a barrier inside one append
// with more producers than the linear search covers, every producer
// starts over, and each batch after the barrier goes to its own
// producer's state (not to one found through an index of the state
// before the barrier).
func TestBarrierInAppendWithManyProducers(t *testing.T) {
	const n = linearAccumulators + 4
	m := New(Config{})
	var a Append
	var specs []bspec
	for p := int64(100); p < 100+n; p++ {
		specs = append(specs, data(p, 0, 0, 3))
	}
	specs = append(specs, barrier())
	specs = append(specs, twoRounds(100, n, 0)...)
	stageAll(t, m, &a, Replication, 0, specs...)
	m.Commit(&a)
	if m.Len() != n {
		t.Fatalf("%d producers after the barrier, want %d", m.Len(), n)
	}
	for p := int64(100); p < 100+n; p++ {
		if e := mustEntry(t, m, p); e.LastSequence != 1 || e.NumBatches != 2 {
			t.Fatalf("producer %d after the barrier: last sequence %d, %d batches; want 1 and 2", p, e.LastSequence, e.NumBatches)
		}
	}
}

// TestResetDropsBarriers: Reset (a full truncation) forgets the barriers.
func TestResetDropsBarriers(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Replication, data(1, 0, 0, 1), barrier())
	if len(m.Barriers()) != 1 {
		t.Fatalf("barriers %v", m.Barriers())
	}
	m.Reset(10)
	if got := m.Barriers(); len(got) != 0 {
		t.Fatalf("barriers %v after Reset, want none", got)
	}
}
