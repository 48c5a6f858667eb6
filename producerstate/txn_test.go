package producerstate

import (
	"reflect"
	"testing"
)

// pad appends a no-producer batch so that the next batch lands at offset.
func pad(t *testing.T, l *logWriter, offset int64) {
	t.Helper()
	if n := offset - l.next; n > 0 {
		l.must(Replication, data(-1, -1, -1, int(n)))
	}
}

// TestTransactionsLSO covers §3 and T23, T24, T25, T29, T32, T64.
func TestTransactionsLSO(t *testing.T) {
	t.Run("T23_T24_commit_pins_until_hw_passes_marker", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		pad(t, l, 100)
		l.must(Client, txnData(7, 0, 0, 5)) // 100..104
		if fuo, ok := m.FirstUnstableOffset(); !ok || fuo != 100 {
			t.Fatalf("FUO %d %v", fuo, ok)
		}
		if got := m.LastStableOffset(100); got != 100 {
			t.Fatalf("LSO(100) = %d", got)
		}
		if got := m.LastStableOffset(103); got != 100 {
			t.Fatalf("LSO(103) = %d", got)
		}
		a := l.must(Coordinator, commit(7, 0, 0)) // 105
		if want := []CompletedTxn{{ProducerID: 7, FirstOffset: 100, LastOffset: 105, LastStableOffset: 106}}; !reflect.DeepEqual(a.CompletedTxns(), want) {
			t.Fatalf("completed %+v", a.CompletedTxns())
		}
		if got := m.LastStableOffset(105); got != 100 {
			t.Fatalf("LSO(105) = %d, want 100", got)
		}
		if got := m.LastStableOffset(106); got != 106 {
			t.Fatalf("LSO(106) = %d, want 106", got)
		}
		m.OnHighWatermarkUpdated(105)
		if _, ok := m.FirstUnstableOffset(); !ok {
			t.Fatal("txn left unreplicated too early")
		}
		m.OnHighWatermarkUpdated(106)
		if _, ok := m.FirstUnstableOffset(); ok {
			t.Fatal("txn still pins FUO")
		}
	})
	t.Run("T25_abort_index_lso_is_other_pids_first_offset", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		pad(t, l, 100)
		l.must(Client, txnData(7, 0, 0, 2)) // 100,101
		l.must(Client, txnData(8, 0, 0, 2)) // 102,103
		pad(t, l, 110)
		a := l.must(Coordinator, abort(7, 0, 0))
		if want := []CompletedTxn{{ProducerID: 7, FirstOffset: 100, LastOffset: 110, LastStableOffset: 102, Aborted: true}}; !reflect.DeepEqual(a.CompletedTxns(), want) {
			t.Fatalf("completed %+v", a.CompletedTxns())
		}
		if fuo, _ := m.FirstUnstableOffset(); fuo != 100 {
			t.Fatalf("FUO %d", fuo)
		}
		if got := m.LastStableOffset(111); got != 102 {
			t.Fatalf("LSO(111) = %d, want 102", got)
		}
		m.OnHighWatermarkUpdated(111)
		if fuo, _ := m.FirstUnstableOffset(); fuo != 102 {
			t.Fatalf("FUO after HW %d, want 102", fuo)
		}
	})
	t.Run("abort_index_lso_is_earliest_other_open_txn", func(t *testing.T) {
		// Three open transactions; the one aborted is the middle one, then
		// the first: the LSO stored with the aborted transaction is the
		// first offset of the earliest other open one (Kafka takes the
		// first of ongoingTxns, ordered by first offset), never a later one.
		m := New(Config{})
		l := newLog(t, m)
		pad(t, l, 100)
		l.must(Client, txnData(7, 0, 0, 2))      // 100,101
		l.must(Client, txnData(8, 0, 0, 2))      // 102,103
		l.must(Client, txnData(9, 0, 0, 2))      // 104,105
		a := l.must(Coordinator, abort(8, 0, 0)) // 106
		if want := []CompletedTxn{{ProducerID: 8, FirstOffset: 102, LastOffset: 106, LastStableOffset: 100, Aborted: true}}; !reflect.DeepEqual(a.CompletedTxns(), want) {
			t.Fatalf("abort of the middle transaction: completed %+v, want %+v", a.CompletedTxns(), want)
		}
		a = l.must(Coordinator, abort(7, 0, 0)) // 107
		if want := []CompletedTxn{{ProducerID: 7, FirstOffset: 100, LastOffset: 107, LastStableOffset: 104, Aborted: true}}; !reflect.DeepEqual(a.CompletedTxns(), want) {
			t.Fatalf("abort of the first transaction: completed %+v, want %+v", a.CompletedTxns(), want)
		}
		a = l.must(Coordinator, abort(9, 0, 0)) // 108
		if want := []CompletedTxn{{ProducerID: 9, FirstOffset: 104, LastOffset: 108, LastStableOffset: 109, Aborted: true}}; !reflect.DeepEqual(a.CompletedTxns(), want) {
			t.Fatalf("abort of the last open transaction: completed %+v, want %+v", a.CompletedTxns(), want)
		}
	})
	t.Run("ongoing_ordered_by_first_offset", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Replication, txnData(9, 0, 0, 1), txnData(3, 0, 0, 1), txnData(5, 0, 0, 1))
		l.must(Coordinator, commit(9, 0, 0))
		m.OnHighWatermarkUpdated(l.next)
		got := m.OngoingTransactions()
		if len(got) != 2 || got[0].ProducerID != 3 || got[1].ProducerID != 5 {
			t.Fatalf("ongoing %+v", got)
		}
		if fuo, _ := m.FirstUnstableOffset(); fuo != 1 {
			t.Fatalf("FUO %d", fuo)
		}
	})
	t.Run("empty_control_batch_is_ignored", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, txnData(7, 0, 0, 2))
		a := l.must(Replication, bspec{pid: 7, epoch: 0, seq: -1, control: 5})
		if len(a.CompletedTxns()) != 0 || mustEntry(t, m, 7).CurrentTxnFirstOffset != 0 {
			t.Fatal("an empty control batch closed the transaction")
		}
	})
	t.Run("T29_log_start_clamps_fuo", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		pad(t, l, 40)
		l.must(Client, txnData(7, 0, 0, 1))
		m.OnLogStartOffsetIncremented(50)
		if fuo, _ := m.FirstUnstableOffset(); fuo != 50 {
			t.Fatalf("FUO %d", fuo)
		}
		if got := m.LastStableOffset(60); got != 50 {
			t.Fatalf("LSO %d", got)
		}
		if m.MapEndOffset() != 50 {
			t.Fatalf("MEO %d, want max(MEO, logStart)", m.MapEndOffset())
		}
	})
	t.Run("T32_log_start_keeps_entries_drops_unreplicated", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, txnData(7, 0, 0, 3))
		l.must(Coordinator, commit(7, 0, 0)) // marker 3
		m.OnLogStartOffsetIncremented(10)
		if _, ok := m.Producer(7); !ok {
			t.Fatal("entry dropped by a log start advance")
		}
		if _, ok := m.FirstUnstableOffset(); ok {
			t.Fatal("unreplicated txn below the log start kept")
		}
	})
	t.Run("T64_barrier_keeps_unreplicated", func(t *testing.T) {
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, txnData(7, 0, 0, 3))
		l.must(Coordinator, commit(7, 0, 0)) // 3
		l.must(Coordinator, barrier())       // 4
		if fuo, ok := m.FirstUnstableOffset(); !ok || fuo != 0 {
			t.Fatalf("FUO %d %v, want the committed txn to pin it", fuo, ok)
		}
		if m.LastStableOffset(3) != 0 || m.LastStableOffset(5) != 5 {
			t.Fatal("LSO")
		}
	})
}

// TestExpiration covers §4.1 and T30, T70.
func TestExpiration(t *testing.T) {
	m := New(Config{ProducerIDExpirationMs: 1000})
	l := newLog(t, m)
	l.must(Client, data(1, 0, 0, 1))    // ts 1000
	l.must(Client, txnData(2, 0, 0, 1)) // ts 1000, open txn
	if n := m.RemoveExpired(1999); n != 0 {
		t.Fatalf("removed %d at t+999", n)
	}
	if n := m.RemoveExpired(2000); n != 1 {
		t.Fatalf("removed %d at t+1000, want 1", n)
	}
	if _, ok := m.Producer(2); !ok {
		t.Fatal("producer with an open transaction expired")
	}
	if len(m.OngoingTransactions()) != 1 {
		t.Fatal("expiration touched transactions")
	}
	l.must(Coordinator, barrier())
	if n := m.RemoveExpired(1 << 40); n != 0 || m.Len() != 0 {
		t.Fatal("T70: nothing to expire after a barrier")
	}
}

// TestLogStartAtMarkerKeepsDecidedTxn: a decided transaction whose marker
// is at the new log start is still in the log and keeps pinning the first
// unstable offset (clamped to the log start) until the high watermark
// passes its marker; only markers below the log start are dropped.
func TestLogStartAtMarkerKeepsDecidedTxn(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Client, txnData(7, 0, 0, 3))
	l.must(Coordinator, commit(7, 0, 0)) // marker at 3
	m.OnLogStartOffsetIncremented(3)
	if fuo, ok := m.FirstUnstableOffset(); !ok || fuo != 3 {
		t.Fatalf("FUO %d %v with the marker at the log start, want 3", fuo, ok)
	}
	m.OnLogStartOffsetIncremented(4)
	if fuo, ok := m.FirstUnstableOffset(); ok {
		t.Fatalf("FUO %d with the marker below the log start, want none", fuo)
	}
}
