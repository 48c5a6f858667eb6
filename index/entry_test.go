package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/corrupt"
)

// TestGoldenTimeIndex decodes the vector segment's .timeindex and compares it
// with segment.json and with the dump line of formats.md §7.4.
func TestGoldenTimeIndex(t *testing.T) {
	var want struct {
		TimeIndex struct {
			Entries []struct {
				Offset         int64 `json:"offset"`
				RelativeOffset int32 `json:"relative_offset"`
				Timestamp      int64 `json:"timestamp"`
			} `json:"entries"`
			ExpectedDumpLines []string `json:"expected_dump_lines"`
			Name              string   `json:"name"`
			Size              int64    `json:"size"`
		} `json:"timeindex_file"`
		IndexFile struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"index_file"`
	}
	readJSON(t, "segment.json", &want)
	path := filepath.Join("testdata", want.TimeIndex.Name)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) != want.TimeIndex.Size {
		t.Fatalf("size %d, want %d", len(raw), want.TimeIndex.Size)
	}
	entries, err := DecodeTimeIndex(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want.TimeIndex.Entries) {
		t.Fatalf("%d entries, want %d", len(entries), len(want.TimeIndex.Entries))
	}
	var dump []string
	for i, e := range entries {
		w := want.TimeIndex.Entries[i]
		if e.Timestamp != w.Timestamp || e.Offset != w.Offset {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
		one, err := DecodeTimeEntry(raw[i*TimeEntrySize:], 0)
		if err != nil || one != e {
			t.Errorf("DecodeTimeEntry = %+v, %v", one, err)
		}
		enc, err := AppendTimeEntry(nil, 0, e)
		if err != nil || !bytes.Equal(enc, raw[i*TimeEntrySize:(i+1)*TimeEntrySize]) {
			t.Errorf("AppendTimeEntry = %x, %v", enc, err)
		}
		dump = append(dump, fmt.Sprintf("timestamp: %d offset: %d", e.Timestamp, e.Offset))
	}
	if got, w := dump, want.TimeIndex.ExpectedDumpLines[1:]; fmt.Sprint(got) != fmt.Sprint(w) {
		t.Errorf("dump %q, want %q", got, w)
	}

	// The same file through the read-only mapped index.
	x, err := OpenTimeIndex(path, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Sanity(); err != nil {
		t.Fatal(err)
	}
	if ts, off := x.Lookup(math.MaxInt64); ts != 1700000005000 || off != 15 {
		t.Fatalf("Lookup = (%d, %d)", ts, off)
	}
	if _, err := x.MaybeAppend(1700000005001, 16, false); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append to read-only index: %v", err)
	}

	// The vector's offset index is empty.
	ox, err := OpenOffsetIndex(filepath.Join("testdata", want.IndexFile.Name), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ox.Close()
	if ox.Entries() != 0 || ox.FileSize() != want.IndexFile.Size || ox.Sanity() != nil {
		t.Fatalf("empty .index: entries %d size %d", ox.Entries(), ox.FileSize())
	}
	if off, pos := ox.Lookup(10); off != 0 || pos != 0 {
		t.Fatalf("Lookup on empty = (%d, %d)", off, pos)
	}
}

// TestGoldenTxnIndex decodes txnindex_entry.bin and compares it with its
// JSON and dump line (formats.md §7.6).
func TestGoldenTxnIndex(t *testing.T) {
	var want struct {
		SizeBytes int `json:"size_bytes"`
		Extra     struct {
			FirstOffset      int64 `json:"first_offset"`
			LastOffset       int64 `json:"last_offset"`
			LastStableOffset int64 `json:"last_stable_offset"`
			ProducerID       int64 `json:"producer_id"`
			Version          int16 `json:"version"`
		} `json:"extra"`
		ExpectedDumpLines []string `json:"expected_dump_lines"`
	}
	readJSON(t, "txnindex_entry.json", &want)
	raw, err := os.ReadFile(filepath.Join("testdata", "txnindex_entry.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != want.SizeBytes || len(raw) != TxnEntrySize {
		t.Fatalf("size %d", len(raw))
	}
	e, err := DecodeAbortedTxn(raw)
	if err != nil {
		t.Fatal(err)
	}
	w := AbortedTxn{
		Version:          want.Extra.Version,
		ProducerID:       want.Extra.ProducerID,
		FirstOffset:      want.Extra.FirstOffset,
		LastOffset:       want.Extra.LastOffset,
		LastStableOffset: want.Extra.LastStableOffset,
	}
	if e != w {
		t.Fatalf("decoded %+v, want %+v", e, w)
	}
	line := fmt.Sprintf("version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d",
		e.Version, e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
	if line != want.ExpectedDumpLines[0] {
		t.Errorf("dump %q, want %q", line, want.ExpectedDumpLines[0])
	}
	if enc := AppendAbortedTxn(nil, e); !bytes.Equal(enc, raw) {
		t.Fatalf("encoded %x, want %x", enc, raw)
	}
	all, err := DecodeTxnIndex(raw)
	if err != nil || len(all) != 1 || all[0] != w {
		t.Fatalf("DecodeTxnIndex = %+v, %v", all, err)
	}

	// Through the file-backed index, read-only.
	x, err := OpenTxnIndex(filepath.Join("testdata", "txnindex_entry.bin"), 100, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Sanity(); err != nil {
		t.Fatal(err)
	}
	got, complete, err := x.CollectAbortedTxns(nil, 0, 200)
	if err != nil || len(got) != 1 || got[0] != w || complete {
		t.Fatalf("CollectAbortedTxns = %+v, %v, %v", got, complete, err)
	}
}

func TestRelativeOffset(t *testing.T) {
	tests := []struct {
		base, offset int64
		rel          int32
		ok           bool
	}{
		{0, 0, 0, true},
		{100, 100, 0, true},
		{100, 150, 50, true},
		{100, 99, 0, false},
		{0, math.MaxInt32, math.MaxInt32, true},
		{0, math.MaxInt32 + 1, 0, false},
		{5, 5 + math.MaxInt32, math.MaxInt32, true},
		{math.MinInt64, math.MaxInt64, 0, false},
		{math.MaxInt64 - 1, math.MaxInt64, 1, true},
	}
	for _, tc := range tests {
		rel, err := RelativeOffset(tc.base, tc.offset)
		if tc.ok != (err == nil) || tc.ok && rel != tc.rel {
			t.Errorf("RelativeOffset(%d, %d) = %d, %v", tc.base, tc.offset, rel, err)
		}
		if !tc.ok && !errors.Is(err, ErrOffsetOverflow) {
			t.Errorf("RelativeOffset(%d, %d): error %v is not ErrOffsetOverflow", tc.base, tc.offset, err)
		}
	}
}

func TestEntryCodecs(t *testing.T) {
	b, err := AppendOffsetEntry(nil, 1000, OffsetEntry{Offset: 1258, Position: 4100})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, []byte{0, 0, 1, 2, 0, 0, 0x10, 0x04}) {
		t.Fatalf("offset entry %x", b)
	}
	e, err := DecodeOffsetEntry(b, 1000)
	if err != nil || e != (OffsetEntry{Offset: 1258, Position: 4100}) {
		t.Fatalf("DecodeOffsetEntry = %+v, %v", e, err)
	}
	if _, err := AppendOffsetEntry(nil, 1000, OffsetEntry{Offset: 999}); !errors.Is(err, ErrOffsetOverflow) {
		t.Fatalf("offset below base: %v", err)
	}
	if _, err := AppendTimeEntry(nil, 1000, TimeEntry{Offset: 999}); !errors.Is(err, ErrOffsetOverflow) {
		t.Fatalf("offset below base: %v", err)
	}
	for _, err := range []error{
		func() error { _, err := DecodeOffsetEntry(b[:7], 0); return err }(),
		func() error { _, err := DecodeTimeEntry(make([]byte, 11), 0); return err }(),
		func() error { _, err := DecodeAbortedTxn(make([]byte, 33)); return err }(),
		func() error { _, err := DecodeAbortedTxn(append([]byte{1}, make([]byte, 33)...)); return err }(),
		func() error { _, err := DecodeAbortedTxn(append([]byte{0, 1}, make([]byte, 32)...)); return err }(),
	} {
		var ce *CorruptionError
		if !IsCorrupt(err) || !errors.As(err, &ce) {
			t.Errorf("got %v, want a *CorruptionError", err)
		}
	}
	if _, err := DecodeOffsetIndex(make([]byte, 17), 0); !IsCorrupt(err) {
		t.Errorf("odd-length offset index: %v", err)
	}
	if _, err := DecodeTimeIndex(make([]byte, 13), 0); !IsCorrupt(err) {
		t.Errorf("odd-length time index: %v", err)
	}
	txns, err := DecodeTxnIndex(make([]byte, 40))
	if !IsCorrupt(err) || len(txns) != 1 {
		t.Errorf("partial trailing txn entry: %d entries, %v", len(txns), err)
	}
}

// TestCorruptionErrorMessage: the message names the file and the byte,
// and the error answers this package's sentinel and partlog's marker.
func TestCorruptionErrorMessage(t *testing.T) {
	err := error(&CorruptionError{Kind: ErrCorrupt, Path: "/x/0.index", Pos: 16, Reason: "zero padding"})
	if got := err.Error(); got != "partlog/index: corrupt index /x/0.index at byte 16: zero padding" {
		t.Fatal(got)
	}
	err = fmt.Errorf("segment 0: %w", &CorruptionError{Kind: ErrCorrupt, Pos: -1, Reason: "bad length"})
	if !errors.Is(err, ErrCorrupt) || !corrupt.Is(err) || err.Error() != "segment 0: partlog/index: corrupt index: bad length" {
		t.Fatal(err)
	}
	if IsCorrupt(ErrFull) {
		t.Fatal("ErrFull counted as corruption")
	}
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}
