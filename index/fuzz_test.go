package index

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets write arbitrary bytes to a file, open it read-only as an
// index and run every reader on it. Properties: nothing panics; the entry
// count is the whole-entry prefix of the file; the pure decoder and the
// mapped reader agree; a file that passes Sanity has lookups that return
// entries of the file (or the empty answer).

func FuzzOffsetIndex(f *testing.F) {
	f.Add([]byte{}, int64(0), int64(5))
	f.Add(mustRead(f, "00000000000000000000.index"), int64(0), int64(0))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 10, 0, 0, 0, 5, 0, 0, 1, 0}, int64(100), int64(104))
	f.Add(bytes.Repeat([]byte{0xff}, 17), int64(-1), int64(1<<40))
	f.Fuzz(func(t *testing.T, data []byte, base, target int64) {
		path := writeFuzzFile(t, data)
		x, err := OpenOffsetIndex(path, base, true)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		if x.Entries() != int64(len(data)/OffsetEntrySize) {
			t.Fatalf("entries %d for %d bytes", x.Entries(), len(data))
		}
		decoded, decErr := DecodeOffsetIndex(data, base)
		if (decErr != nil) != (len(data)%OffsetEntrySize != 0) || int64(len(decoded)) != x.Entries() {
			t.Fatalf("decoder: %d entries, %v", len(decoded), decErr)
		}
		for i, e := range x.All() {
			if e != decoded[i] {
				t.Fatalf("entry %d: mapped %+v, decoded %+v", i, e, decoded[i])
			}
		}
		sanityErr := x.Sanity()
		if sanityErr != nil && !IsCorrupt(sanityErr) {
			t.Fatalf("Sanity returned a non-corruption error: %v", sanityErr)
		}
		off, pos := x.Lookup(target)
		x.LookupPosition(target)
		x.LastEntry()
		if sanityErr == nil && off != base {
			found := false
			for _, e := range decoded {
				found = found || e.Offset == off && e.Position == pos && e.Offset <= target
			}
			if !found {
				t.Fatalf("Lookup(%d) = (%d, %d) is not a floor entry", target, off, pos)
			}
		}
	})
}

func FuzzTimeIndex(f *testing.F) {
	f.Add([]byte{}, int64(0), int64(5))
	f.Add(mustRead(f, "00000000000000000000.timeindex"), int64(0), int64(1700000005000))
	f.Add(bytes.Repeat([]byte{0}, 25), int64(7), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, base, target int64) {
		path := writeFuzzFile(t, data)
		x, err := OpenTimeIndex(path, base, true)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		if x.Entries() != int64(len(data)/TimeEntrySize) {
			t.Fatalf("entries %d for %d bytes", x.Entries(), len(data))
		}
		decoded, decErr := DecodeTimeIndex(data, base)
		if (decErr != nil) != (len(data)%TimeEntrySize != 0) || int64(len(decoded)) != x.Entries() {
			t.Fatalf("decoder: %d entries, %v", len(decoded), decErr)
		}
		for i, e := range x.All() {
			if e != decoded[i] {
				t.Fatalf("entry %d: mapped %+v, decoded %+v", i, e, decoded[i])
			}
		}
		sanityErr := x.Sanity()
		if sanityErr != nil && !IsCorrupt(sanityErr) {
			t.Fatalf("Sanity returned a non-corruption error: %v", sanityErr)
		}
		ts, off := x.Lookup(target)
		x.LastEntry()
		if sanityErr == nil && ts != NoTimestamp {
			found := false
			for _, e := range decoded {
				found = found || e.Timestamp == ts && e.Offset == off && ts <= target
			}
			if !found {
				t.Fatalf("Lookup(%d) = (%d, %d) is not a floor entry", target, ts, off)
			}
		}
	})
}

func FuzzTxnIndex(f *testing.F) {
	f.Add([]byte{}, int64(0), int64(0), int64(10))
	f.Add(mustRead(f, "txnindex_entry.bin"), int64(100), int64(0), int64(200))
	f.Add(append(mustRead(f, "txnindex_entry.bin"), 1, 2, 3), int64(0), int64(101), int64(103))
	f.Fuzz(func(t *testing.T, data []byte, base, fetch, upper int64) {
		decoded, decErr := DecodeTxnIndex(data)
		if len(decoded)*TxnEntrySize > len(data) {
			t.Fatalf("decoded %d entries from %d bytes", len(decoded), len(data))
		}
		if decErr != nil && !IsCorrupt(decErr) {
			t.Fatalf("decoder returned a non-corruption error: %v", decErr)
		}
		// Re-decoding the valid prefix gives the same entries without error.
		again, err := DecodeTxnIndex(data[:len(decoded)*TxnEntrySize])
		if err != nil || len(again) != len(decoded) {
			t.Fatalf("prefix re-decode: %d entries, %v", len(again), err)
		}
		for i := range again {
			if again[i] != decoded[i] || !bytes.Equal(AppendAbortedTxn(nil, again[i]), data[i*TxnEntrySize:(i+1)*TxnEntrySize]) {
				t.Fatalf("entry %d does not round-trip", i)
			}
		}

		path := writeFuzzFile(t, data)
		x, err := OpenTxnIndex(path, base, true)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		all, allErr := x.All()
		if (allErr != nil) != (len(all) < len(data)/TxnEntrySize) {
			t.Fatalf("All: %d entries of %d, %v", len(all), len(data)/TxnEntrySize, allErr)
		}
		if sanityErr := x.Sanity(); sanityErr != nil && !IsCorrupt(sanityErr) {
			t.Fatalf("Sanity returned a non-corruption error: %v", sanityErr)
		}
		got, _, collectErr := x.CollectAbortedTxns(nil, fetch, upper)
		if collectErr != nil && !IsCorrupt(collectErr) {
			t.Fatal(collectErr)
		}
		for _, e := range got {
			if e.LastOffset < fetch || e.FirstOffset >= upper {
				t.Fatalf("collected %+v outside [%d, %d)", e, fetch, upper)
			}
		}
	})
}

func writeFuzzFile(t *testing.T, data []byte) string {
	path := filepath.Join(t.TempDir(), "fuzz")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustRead(f *testing.F, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}
