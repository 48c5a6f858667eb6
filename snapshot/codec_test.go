package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/crc32c"
	"github.com/partlog/partlog/internal/filenames"
)

const vectorName = "00000000000000000018.snapshot"

// vectorJSON mirrors the snapshot_file part of testdata/segment.json.
type vectorJSON struct {
	SnapshotFile struct {
		Name    string `json:"name"`
		Size    int    `json:"size"`
		Version int    `json:"version"`
		CRC     uint32 `json:"crc"`
		Entries []struct {
			ProducerID            int64 `json:"producer_id"`
			Epoch                 int16 `json:"epoch"`
			LastSequence          int32 `json:"last_sequence"`
			LastOffset            int64 `json:"last_offset"`
			OffsetDelta           int32 `json:"offset_delta"`
			Timestamp             int64 `json:"timestamp"`
			CoordinatorEpoch      int32 `json:"coordinator_epoch"`
			CurrentTxnFirstOffset int64 `json:"current_txn_first_offset"`
		} `json:"entries"`
	} `json:"snapshot_file"`
}

func loadVector(t testing.TB) (raw []byte, want []Entry, crc uint32) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", vectorName))
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join("testdata", "segment.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectorJSON
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	sf := v.SnapshotFile
	if sf.Name != vectorName || sf.Size != len(raw) || sf.Version != Version {
		t.Fatalf("vector description does not match the file: %+v, %d bytes", sf, len(raw))
	}
	for _, e := range sf.Entries {
		want = append(want, Entry{
			ProducerID:            e.ProducerID,
			ProducerEpoch:         e.Epoch,
			LastSequence:          e.LastSequence,
			LastOffset:            e.LastOffset,
			OffsetDelta:           e.OffsetDelta,
			Timestamp:             e.Timestamp,
			CoordinatorEpoch:      e.CoordinatorEpoch,
			CurrentTxnFirstOffset: e.CurrentTxnFirstOffset,
		})
	}
	return raw, want, sf.CRC
}

func TestDecodeVector(t *testing.T) {
	raw, want, crc := loadVector(t)
	got, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if stored := binary.BigEndian.Uint32(raw[2:]); stored != crc {
		t.Errorf("stored crc %d, json says %d", stored, crc)
	}
	// Producer 2000 only wrote a marker; 1000 and 3000 have a batch.
	if got[0].HasBatchMetadata() || !got[1].HasBatchMetadata() || !got[2].HasBatchMetadata() {
		t.Errorf("HasBatchMetadata wrong: %+v", got)
	}
	for i := range got {
		if got[i].HasOpenTransaction() {
			t.Errorf("entry %d: unexpected open transaction", i)
		}
	}
}

func TestEncodeVectorByteIdentical(t *testing.T) {
	raw, want, _ := loadVector(t)
	got := Encode(nil, want)
	if !bytes.Equal(got, raw) {
		t.Fatalf("encoded bytes differ from the vector\n got %x\nwant %x", got, raw)
	}
	// Append-style: the prefix is kept and the appended part is the same.
	prefix := []byte("prefix")
	got = Encode(append([]byte(nil), prefix...), want)
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], raw) {
		t.Fatalf("append-style encode broke the prefix or the bytes")
	}
	if FileSize(len(want)) != int64(len(raw)) {
		t.Fatalf("FileSize(%d) = %d, want %d", len(want), FileSize(len(want)), len(raw))
	}
}

func randomEntries(r *rand.Rand, n int) []Entry {
	entries := make([]Entry, n)
	for i := range entries {
		entries[i] = Entry{
			ProducerID:            r.Int64(),
			ProducerEpoch:         int16(r.Uint32()),
			LastSequence:          int32(r.Uint32()),
			LastOffset:            r.Int64() - math.MaxInt64/2,
			OffsetDelta:           int32(r.Uint32()),
			Timestamp:             r.Int64(),
			CoordinatorEpoch:      int32(r.Uint32()),
			CurrentTxnFirstOffset: -1 + int64(r.IntN(3))*r.Int64N(1<<40),
		}
	}
	return entries
}

func TestRoundTrip(t *testing.T) {
	seed := uint64(0x5eed)
	t.Logf("seed %#x", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	for _, n := range []int{0, 1, 2, 17, 1000} {
		entries := randomEntries(r, n)
		b := Encode(nil, entries)
		if int64(len(b)) != FileSize(n) {
			t.Fatalf("n=%d: %d bytes, want %d", n, len(b), FileSize(n))
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if got == nil || len(got) != n {
			t.Fatalf("n=%d: got %d entries (nil=%v)", n, len(got), got == nil)
		}
		for i := range entries {
			if got[i] != entries[i] {
				t.Fatalf("n=%d entry %d: got %+v want %+v", n, i, got[i], entries[i])
			}
		}
		// The result must not alias the input.
		if n > 0 {
			clear(b)
			if got[0] != entries[0] {
				t.Fatalf("decoded entries alias the input buffer")
			}
		}
	}
}

// recrc stores a freshly computed CRC so that a damaged file fails on the
// check under test, not on the CRC.
func recrc(b []byte) []byte {
	if len(b) >= HeaderSize {
		binary.BigEndian.PutUint32(b[2:], crc32c.Checksum(b[6:]))
	}
	return b
}

func TestDecodeCorrupt(t *testing.T) {
	raw, _, _ := loadVector(t)
	clone := func() []byte { return append([]byte(nil), raw...) }
	tests := []struct {
		name   string
		damage func() []byte
		offset int64 // expected CorruptionError.Pos
	}{
		{"empty file", func() []byte { return nil }, 0},
		{"one byte", func() []byte { return raw[:1] }, 1},
		{"version only", func() []byte { return raw[:2] }, 2},
		{"truncated header", func() []byte { return raw[:9] }, 9},
		{"header only, count 3", func() []byte { return raw[:HeaderSize] }, HeaderSize},
		{"truncated mid entry", func() []byte { return raw[:len(raw)-1] }, int64(len(raw) - 1)},
		{"truncated by one entry", func() []byte { return raw[:len(raw)-EntrySize] }, int64(len(raw) - EntrySize)},
		{"version 0", func() []byte { b := clone(); b[1] = 0; return b }, 0},
		{"version 2", func() []byte { b := clone(); b[1] = 2; return b }, 0},
		{"version -1", func() []byte { b := clone(); b[0], b[1] = 0xff, 0xff; return b }, 0},
		{"bad crc", func() []byte { b := clone(); b[5] ^= 1; return b }, 2},
		{"flipped entry bit", func() []byte { b := clone(); b[40] ^= 0x10; return b }, 2},
		{"negative count", func() []byte {
			b := clone()
			binary.BigEndian.PutUint32(b[6:], 0xffffffff)
			return recrc(b)
		}, 6},
		{"huge count", func() []byte {
			b := clone()
			binary.BigEndian.PutUint32(b[6:], math.MaxInt32)
			return recrc(b)
		}, int64(len(raw))},
		{"count too small (trailing entry)", func() []byte {
			b := clone()
			binary.BigEndian.PutUint32(b[6:], 2)
			return recrc(b)
		}, HeaderSize + 2*EntrySize},
		{"trailing byte with valid crc", func() []byte { return recrc(append(clone(), 0)) }, int64(len(raw))},
		{"size not header+k*46", func() []byte { return recrc(append(clone(), make([]byte, 45)...)) }, int64(len(raw))},
		{"garbage", func() []byte { return []byte("this is not a snapshot file, just text") }, 0},
		{"all zero", func() []byte { return make([]byte, len(raw)) }, 0},
		{"all 0xff", func() []byte { return bytes.Repeat([]byte{0xff}, len(raw)) }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.damage()
			got, err := Decode(b)
			if err == nil {
				t.Fatalf("Decode accepted damaged input, %d entries", len(got))
			}
			if !errors.Is(err, ErrCorrupt) || !IsCorrupt(err) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *CorruptionError", err)
			}
			if ce.Pos != tc.offset {
				t.Errorf("Offset = %d, want %d (%v)", ce.Pos, tc.offset, err)
			}
			if got != nil {
				t.Errorf("entries returned with an error")
			}
			// Read streams the file through another code path; it must
			// reach the same verdict at the same byte, naming the file.
			p := filepath.Join(t.TempDir(), filenames.Make(18, filenames.Snapshot))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, rerr := Read(p)
			var rce *CorruptionError
			if !errors.As(rerr, &rce) || rce.Path != p || rce.Pos != ce.Pos || rce.Reason != ce.Reason {
				t.Errorf("Read error %v differs from Decode error %v", rerr, err)
			}
		})
	}
}

func TestDecodeZeroEntries(t *testing.T) {
	b := Encode(nil, nil)
	if len(b) != HeaderSize {
		t.Fatalf("empty snapshot is %d bytes", len(b))
	}
	got, err := Decode(b)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("got %v, %v; want an empty non-nil slice", got, err)
	}
}
