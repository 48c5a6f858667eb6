package producerstate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/snapshot"
)

func sortedSnapshot(m *Manager) []snapshot.Entry {
	s := m.SnapshotEntries()
	slices.SortFunc(s, func(a, b snapshot.Entry) int { return cmp64(a.ProducerID, b.ProducerID) })
	return s
}

// TestSnapshotRoundTrip covers §5.1/§5.4: SnapshotEntries → LoadSnapshot
// keeps every entry, open transaction and coordinator epoch; only the
// newest cached batch survives (§9 pitfall 3, T20).
func TestSnapshotRoundTrip(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Client, data(1, 0, 0, 5), data(1, 0, 5, 5))
	l.must(Client, txnData(2, 3, 0, 2))
	l.must(Coordinator, commit(3, 1, 9))
	l.must(Client, txnData(4, 0, 0, 1))
	l.must(Coordinator, abort(4, 0, 2))
	l.must(Client, txnData(4, 0, 1, 1))
	r := New(Config{})
	r.LoadSnapshot(m.SnapshotEntries(), m.MapEndOffset(), 1000)
	if !reflect.DeepEqual(sortedSnapshot(r), sortedSnapshot(m)) {
		t.Fatalf("snapshot differs:\n%+v\n%+v", sortedSnapshot(r), sortedSnapshot(m))
	}
	if !reflect.DeepEqual(r.OngoingTransactions(), m.OngoingTransactions()) || r.MapEndOffset() != m.MapEndOffset() {
		t.Fatal("transactions or MEO differ")
	}
	for _, e := range r.Producers() {
		if e.ProducerID == 1 && e.NumBatches != 1 {
			t.Fatal("only the newest batch survives")
		}
	}
	// T20: after the reload, 5–9 is a duplicate and 0–4 out of order.
	var a Append
	r.Begin(&a, Client, 0)
	if err := r.Validate(&a, build(t, data(1, 0, 5, 5)), 100); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("T20 5–9: %v", err)
	}
	r.Begin(&a, Client, 0)
	if err := r.Validate(&a, build(t, data(1, 0, 0, 5)), 100); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("T20 0–4: %v", err)
	}
	// The coordinator epoch and open transaction survive.
	if e := mustEntry(t, r, 3); e.CoordinatorEpoch != 9 || e.NumBatches != 0 {
		t.Fatalf("%+v", e)
	}
	if e := mustEntry(t, r, 2); e.CurrentTxnFirstOffset != 10 {
		t.Fatalf("%+v", e)
	}
}

// TestSnapshotVector loads the golden snapshot of the Kafka-written
// segment vectors in testdata/ and compares it with its JSON.
func TestSnapshotVector(t *testing.T) {
	raw, err := os.ReadFile("testdata/00000000000000000018.snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Entries []struct {
			CoordinatorEpoch      int32 `json:"coordinator_epoch"`
			CurrentTxnFirstOffset int64 `json:"current_txn_first_offset"`
			Epoch                 int16 `json:"epoch"`
			LastOffset            int64 `json:"last_offset"`
			LastSequence          int32 `json:"last_sequence"`
			OffsetDelta           int32 `json:"offset_delta"`
			ProducerID            int64 `json:"producer_id"`
			Timestamp             int64 `json:"timestamp"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, _ := os.ReadFile("testdata/00000000000000000018.snapshot")
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000018.snapshot"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, off, found, err := LoadLatest(dir, 18, -1)
	if err != nil || !found || off != 18 {
		t.Fatalf("%v %v %d", err, found, off)
	}
	m := New(Config{})
	m.LoadSnapshot(entries, off, 1700000000090) // nothing is a day old
	if m.Len() != len(want.Entries) || m.MapEndOffset() != 18 {
		t.Fatalf("len %d", m.Len())
	}
	for _, w := range want.Entries {
		e := mustEntry(t, m, w.ProducerID)
		if e.ProducerEpoch != w.Epoch || e.CoordinatorEpoch != w.CoordinatorEpoch || e.LastTimestamp != w.Timestamp ||
			e.CurrentTxnFirstOffset != w.CurrentTxnFirstOffset || e.LastSequence != w.LastSequence ||
			e.LastOffset != w.LastOffset || e.OffsetDelta != w.OffsetDelta {
			t.Fatalf("entry %+v, want %+v", e, w)
		}
		if (w.LastOffset >= 0) != (e.NumBatches == 1) {
			t.Fatalf("batches %d", e.NumBatches)
		}
	}
	if e := mustEntry(t, m, 3000); e.FirstSequence() != 10 {
		t.Fatalf("firstSequence %d", e.FirstSequence())
	}
	// Re-encoding the loaded state gives the same entries (order aside).
	got := sortedSnapshot(m)
	slices.SortFunc(entries, func(a, b snapshot.Entry) int { return cmp64(a.ProducerID, b.ProducerID) })
	if !reflect.DeepEqual(got, entries) {
		t.Fatalf("%+v vs %+v", got, entries)
	}
}

// TestLoadSnapshotExpiration covers T31: entries last written 2 days ago
// are dropped at load, unless they have an open transaction.
func TestLoadSnapshotExpiration(t *testing.T) {
	now := int64(3 * 86_400_000)
	old := now - 2*86_400_000
	m := New(Config{})
	m.LoadSnapshot([]snapshot.Entry{
		{ProducerID: 1, ProducerEpoch: 0, LastSequence: 4, LastOffset: 4, OffsetDelta: 4, Timestamp: old, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 2, ProducerEpoch: 0, LastSequence: 0, LastOffset: 5, Timestamp: old, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 5},
		{ProducerID: 3, ProducerEpoch: 0, LastSequence: -1, LastOffset: -1, Timestamp: now - 10, CoordinatorEpoch: 2, CurrentTxnFirstOffset: -1},
	}, 10, now)
	if _, ok := m.Producer(1); ok {
		t.Fatal("expired entry loaded")
	}
	if m.Len() != 2 || len(m.OngoingTransactions()) != 1 {
		t.Fatalf("len %d", m.Len())
	}
	if fuo, _ := m.FirstUnstableOffset(); fuo != 5 {
		t.Fatalf("FUO %d", fuo)
	}
}

// TestLoadLatest covers §4.4 step 2, §5.3, §5.4 and T34, T36, T37, T38,
// T39, T42 (no file for an empty full truncation).
func TestLoadLatest(t *testing.T) {
	write := func(t *testing.T, dir string, offset int64, n int) {
		es := make([]snapshot.Entry, n)
		for i := range es {
			es[i] = snapshot.Entry{ProducerID: int64(i), LastSequence: -1, LastOffset: -1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}
		}
		if err := snapshot.Write(dir, offset, es); err != nil {
			t.Fatal(err)
		}
	}
	offsets := func(t *testing.T, dir string) []int64 {
		fs, err := snapshot.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, f := range fs {
			out = append(out, f.Offset)
		}
		return out
	}
	t.Run("T36_truncate_to_250", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 100, 1)
		write(t, dir, 200, 2)
		write(t, dir, 300, 3)
		es, off, found, err := LoadLatest(dir, 250, 0)
		if err != nil || !found || off != 200 || len(es) != 2 {
			t.Fatalf("%v %v %d %d", err, found, off, len(es))
		}
		if got := offsets(t, dir); !reflect.DeepEqual(got, []int64{100, 200}) {
			t.Fatalf("left %v", got)
		}
	})
	t.Run("T37_snapshot_at_log_start_deleted", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 100, 1)
		_, _, found, err := LoadLatest(dir, 500, 100)
		if err != nil || found || len(offsets(t, dir)) != 0 {
			t.Fatalf("%v %v %v", err, found, offsets(t, dir))
		}
	})
	t.Run("T38_corrupt_newest_falls_back", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 200, 2)
		write(t, dir, 300, 3)
		p := filepath.Join(dir, filenames.Make(300, filenames.Snapshot))
		b, _ := os.ReadFile(p)
		b[len(b)-1] ^= 0xff
		os.WriteFile(p, b, 0o644)
		es, off, found, err := LoadLatest(dir, 1000, 0)
		if err != nil || !found || off != 200 || len(es) != 2 {
			t.Fatalf("%v %v %d", err, found, off)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatal("corrupt snapshot not deleted")
		}
	})
	t.Run("T39_zero_entry_snapshot_is_honoured", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 300, 0)
		es, off, found, err := LoadLatest(dir, 300, 0)
		if err != nil || !found || off != 300 || es == nil || len(es) != 0 {
			t.Fatalf("%v %v %d %v", err, found, off, es)
		}
	})
	t.Run("truncated_file_is_corrupt", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, filenames.Make(50, filenames.Snapshot)), nil, 0o644)
		_, _, found, err := LoadLatest(dir, 100, 0)
		if err != nil || found {
			t.Fatalf("%v %v", err, found)
		}
	})
	t.Run("T34_take_snapshot_only_when_meo_moved", func(t *testing.T) {
		dir := t.TempDir()
		m := New(Config{})
		l := newLog(t, m)
		l.must(Client, data(1, 0, 0, 300))
		if err := m.TakeSnapshot(dir); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, filenames.Make(300, filenames.Snapshot)))
		if err := m.TakeSnapshot(dir); err != nil {
			t.Fatal(err)
		}
		if len(offsets(t, dir)) != 0 || m.LastSnapshotOffset() != 300 {
			t.Fatal("a second snapshot at the same MEO was written")
		}
		// T42: full truncation to 500 writes no snapshot.
		m.Reset(500)
		if err := m.TakeSnapshot(dir); err != nil || len(offsets(t, dir)) != 0 || m.Len() != 0 || m.MapEndOffset() != 500 {
			t.Fatal("full truncation")
		}
	})
}

// TestLoadSnapshotReplacesState: loading a snapshot into a manager that
// holds state replaces that state; and the open transactions it loads are
// ordered by first offset whatever the order of the entries.
func TestLoadSnapshotReplacesState(t *testing.T) {
	m := New(Config{Shards: 1})
	l := newLog(t, m)
	l.must(Client, txnData(1, 0, 0, 2))
	entries := []snapshot.Entry{
		{ProducerID: 7, LastOffset: 60, Timestamp: 1000, CurrentTxnFirstOffset: 50, LastSequence: 0, ProducerEpoch: 0, CoordinatorEpoch: -1},
		{ProducerID: 8, LastOffset: 12, Timestamp: 1000, CurrentTxnFirstOffset: 10, LastSequence: 2, ProducerEpoch: 0, CoordinatorEpoch: -1},
	}
	m.LoadSnapshot(entries, 70, 1000)
	if _, ok := m.Producer(1); ok || m.Len() != 2 {
		t.Fatalf("after LoadSnapshot: producer 1 kept (%v), %d producers; want only 7 and 8", ok, m.Len())
	}
	got := m.OngoingTransactions()
	if len(got) != 2 || got[0].ProducerID != 8 || got[1].ProducerID != 7 {
		t.Fatalf("ongoing %+v, want 8 (at 10) before 7 (at 50)", got)
	}
	if fuo, ok := m.FirstUnstableOffset(); !ok || fuo != 10 {
		t.Fatalf("FUO %d %v, want 10", fuo, ok)
	}
}
