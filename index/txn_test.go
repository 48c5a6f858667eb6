package index

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func txn(pid, first, last, lso int64) AbortedTxn {
	return AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: last, LastStableOffset: lso}
}

func TestTxnIndexLazyCreateAppendReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000100.txnindex")
	x, err := OpenTxnIndex(path, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("file created before the first entry")
	}
	if got, complete, err := x.CollectAbortedTxns(nil, 0, 1000); len(got) != 0 || complete || err != nil {
		t.Fatalf("empty collect: %v %v %v", got, complete, err)
	}
	if err := x.Sanity(); err != nil {
		t.Fatal(err)
	}
	entries := []AbortedTxn{txn(1, 90, 105, 90), txn(2, 106, 110, 111), txn(3, 108, 120, 121)}
	for _, e := range entries {
		if err := x.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Append(txn(4, 100, 120, 121)); !errors.Is(err, ErrOffsetOrder) {
		t.Fatalf("repeated last offset: %v", err)
	}
	if err := x.Append(txn(4, 10, 99, 100)); !errors.Is(err, ErrOffsetOverflow) {
		t.Fatalf("below base offset: %v", err)
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(txn(5, 130, 130, 131)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != 3*TxnEntrySize {
		t.Fatalf("file size %v %v", st, err)
	}

	y, err := OpenTxnIndex(path, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	all, err := y.All()
	if err != nil || len(all) != 3 || all[2] != entries[2] {
		t.Fatalf("All = %+v, %v", all, err)
	}
	// The last offset is recovered at open.
	if err := y.Append(txn(4, 100, 120, 121)); !errors.Is(err, ErrOffsetOrder) {
		t.Fatalf("reopened index accepted an old offset: %v", err)
	}
	if err := y.Append(txn(4, 121, 125, 126)); err != nil {
		t.Fatal(err)
	}
	if y.Entries() != 4 || y.Sanity() != nil {
		t.Fatalf("entries %d", y.Entries())
	}
}

func TestTxnIndexReadOnlyMissing(t *testing.T) {
	_, err := OpenTxnIndex(filepath.Join(t.TempDir(), "none.txnindex"), 0, true)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

func TestTxnIndexCollect(t *testing.T) {
	x, err := OpenTxnIndex(filepath.Join(t.TempDir(), "t"), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	entries := []AbortedTxn{
		txn(1, 0, 10, 5),     // LSO 5
		txn(2, 12, 20, 21),   // LSO 21
		txn(3, 15, 30, 40),   // LSO 40
		txn(4, 35, 50, 51),   // LSO 51
		txn(5, 100, 110, 90), // LSO 90
	}
	for _, e := range entries {
		if err := x.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name           string
		fetch, upper   int64
		wantProducers  []int64
		wantComplete   bool
		dstPrefixCount int
	}{
		{"all", 0, 1000, []int64{1, 2, 3, 4, 5}, false, 0},
		{"lastOffset >= fetch", 11, 1000, []int64{2, 3, 4, 5}, false, 0},
		{"lastOffset == fetch counts", 20, 1000, []int64{2, 3, 4, 5}, false, 0},
		{"firstOffset < upper; stops at txn 2 (LSO 21 >= 15)", 0, 15, []int64{1, 2}, true, 0},
		{"LSO == upper stops", 0, 21, []int64{1, 2}, true, 0},
		{"the stopping entry is included", 25, 40, []int64{3}, true, 0},
		{"nothing overlaps; txn 5 (LSO 90) completes", 51, 60, nil, true, 0},
		{"appends to dst", 45, 1000, []int64{9, 4, 5}, false, 1},
	}
	for _, tc := range tests {
		var dst []AbortedTxn
		if tc.dstPrefixCount > 0 {
			dst = []AbortedTxn{txn(9, 0, 0, 0)}
		}
		got, complete, err := x.CollectAbortedTxns(dst, tc.fetch, tc.upper)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var pids []int64
		for _, e := range got {
			pids = append(pids, e.ProducerID)
		}
		if len(pids) != len(tc.wantProducers) || complete != tc.wantComplete {
			t.Errorf("%s: producers %v complete %v, want %v %v", tc.name, pids, complete, tc.wantProducers, tc.wantComplete)
			continue
		}
		for i := range pids {
			if pids[i] != tc.wantProducers[i] {
				t.Errorf("%s: producers %v, want %v", tc.name, pids, tc.wantProducers)
				break
			}
		}
	}
}

func TestTxnIndexTruncate(t *testing.T) {
	x, err := OpenTxnIndex(filepath.Join(t.TempDir(), "t"), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for i := int64(1); i <= 5; i++ {
		if err := x.Append(txn(i, 10*i-5, 10*i, 10*i+1)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ to, want int64 }{{100, 5}, {50, 4}, {41, 4}, {35, 3}, {0, 0}}
	for _, tc := range tests {
		if err := x.TruncateTo(tc.to); err != nil {
			t.Fatal(err)
		}
		if x.Entries() != tc.want || x.FileSize() != tc.want*TxnEntrySize {
			t.Fatalf("TruncateTo(%d): %d entries, size %d", tc.to, x.Entries(), x.FileSize())
		}
	}
	if err := x.Append(txn(1, 1, 2, 3)); err != nil {
		t.Fatalf("append after truncation to empty: %v", err)
	}
	if err := x.Reset(); err != nil {
		t.Fatal(err)
	}
	if x.Entries() != 0 {
		t.Fatal("Reset kept entries")
	}
}

func TestTxnIndexSanity(t *testing.T) {
	enc := func(es ...AbortedTxn) []byte {
		var b []byte
		for _, e := range es {
			b = AppendAbortedTxn(b, e)
		}
		return b
	}
	badVersion := txn(1, 100, 105, 106)
	badVersion.Version = 1
	highByte := enc(txn(1, 100, 105, 106))
	highByte[0] = 1
	tests := []struct {
		name string
		file []byte
		pos  int64 // -2: valid
	}{
		{"empty", nil, -2},
		{"good", enc(txn(1, 90, 105, 106), txn(2, 100, 106, 107)), -2},
		{"partial trailing entry", append(enc(txn(1, 90, 105, 106)), 0, 0, 0), 34},
		{"below base", enc(txn(1, 10, 99, 100)), 0},
		{"first after last", enc(txn(1, 110, 105, 106)), 0},
		{"last offsets repeat", enc(txn(1, 100, 105, 106), txn(2, 100, 105, 106)), 34},
		{"version 1", enc(txn(1, 100, 105, 106), badVersion), 34},
		{"version high byte", highByte, 0},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "x.txnindex")
		if err := os.WriteFile(path, tc.file, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := OpenTxnIndex(path, 100, true)
		if err != nil {
			t.Fatal(err)
		}
		err = x.Sanity()
		if tc.pos == -2 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		} else {
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Pos != tc.pos || ce.Path != path {
				t.Errorf("%s: got %v, want a CorruptionError at %d", tc.name, err, tc.pos)
			}
		}
		if err := x.Append(txn(1, 1, 200, 201)); !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: append read-only: %v", tc.name, err)
		}
		_ = x.Close()
	}
	// A bad version also stops readers with a corruption error.
	path := filepath.Join(t.TempDir(), "v.txnindex")
	if err := os.WriteFile(path, highByte, 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := OpenTxnIndex(path, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, _, err := x.CollectAbortedTxns(nil, 0, 1000); !IsCorrupt(err) {
		t.Fatalf("collect over a bad version: %v", err)
	}
}

// TestTxnIndexConcurrentReaders collects while the writer appends and
// truncates; run with -race.
func TestTxnIndexConcurrentReaders(t *testing.T) {
	x, err := OpenTxnIndex(filepath.Join(t.TempDir(), "t"), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []AbortedTxn
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				buf, _, err = x.CollectAbortedTxns(buf[:0], 0, 1<<40)
				if err != nil {
					t.Error(err)
					return
				}
				for i, e := range buf {
					if e.LastOffset != int64(i+1) {
						t.Errorf("entry %d has last offset %d", i, e.LastOffset)
						return
					}
				}
			}
		}()
	}
	for round := 0; round < 5; round++ {
		for i := x.Entries() + 1; i <= 200; i++ {
			if err := x.Append(txn(i, i, i, i+1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.TruncateTo(int64(40 * round)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
