package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode checks, for any bytes: Decode does not panic; a failure is a
// *CorruptionError; an accepted input has the size its count implies and
// re-encodes to identical bytes.
func FuzzDecode(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join("testdata", vectorName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(Encode(nil, nil))
	f.Add(Encode(nil, []Entry{{ProducerID: -1, LastOffset: -1, CurrentTxnFirstOffset: 12}}))
	f.Add(raw[:HeaderSize])
	f.Add([]byte{})
	f.Add([]byte{0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := Decode(b)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v (%T) is not a *CorruptionError", err, err)
			}
			if ce.Pos < 0 || ce.Pos > int64(len(b)) {
				t.Fatalf("error offset %d outside [0, %d]", ce.Pos, len(b))
			}
			return
		}
		if FileSize(len(entries)) != int64(len(b)) {
			t.Fatalf("accepted %d bytes as %d entries", len(b), len(entries))
		}
		if again := Encode(nil, entries); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b)
		}
	})
}
