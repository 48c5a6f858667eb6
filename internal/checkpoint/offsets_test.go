package checkpoint

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

func TestOffsetsGolden(t *testing.T) {
	golden := readGolden(t, "recovery-point-offset-checkpoint.golden")
	want := map[TopicPartition]int64{{"orders", 0}: 1534, {"orders", 1}: 871}
	got, err := ParseOffsets(golden)
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("ParseOffsets = %v, %v; want %v", got, err, want)
	}
	enc, err := AppendOffsets(nil, want)
	if err != nil || !bytes.Equal(enc, golden) {
		t.Fatalf("AppendOffsets = %q, %v; want %q", enc, err, golden)
	}
	enc, err = AppendOffsets(nil, nil)
	if err != nil || !bytes.Equal(enc, readGolden(t, "empty-checkpoint.golden")) {
		t.Fatalf("empty AppendOffsets = %q, %v", enc, err)
	}
}

func TestOffsetsRoundTripFiles(t *testing.T) {
	dir := t.TempDir()
	want := map[TopicPartition]int64{
		{"orders", 0}:              1534,
		{"orders", 1}:              871,
		{"__consumer_offsets", 49}: 0,
		{"a.b_c-d", math.MaxInt32}: math.MaxInt64,
		{"neg", -1}:                -1,
	}
	for _, name := range []string{RecoveryPointFile, LogStartOffsetFile, ReplicationOffsetFile} {
		p := filepath.Join(dir, name)
		// A missing file reads as no entries.
		got, err := ReadOffsets(p)
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("%s missing: %v, %v", name, got, err)
		}
		if err := WriteOffsets(p, want); err != nil {
			t.Fatal(err)
		}
		got, err = ReadOffsets(p)
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("%s: %v, %v", name, got, err)
		}
		if _, err := os.Stat(p + filenames.Temp); !os.IsNotExist(err) {
			t.Fatalf("%s: temporary file left: %v", name, err)
		}
	}
	// Deterministic order: topic, then partition.
	enc, _ := AppendOffsets(nil, map[TopicPartition]int64{{"b", 0}: 1, {"a", 10}: 2, {"a", 9}: 3})
	if string(enc) != "0\n3\na 9 3\na 10 2\nb 0 1\n" {
		t.Fatalf("order: %q", enc)
	}
}

func TestOffsetsDuplicateLaterWins(t *testing.T) {
	got, err := ParseOffsets([]byte("0\n2\nt 0 5\nt 0 7\n"))
	if err != nil || len(got) != 1 || got[TopicPartition{"t", 0}] != 7 {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestOffsetsMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   string
		line int
	}{
		{"two fields", "0\n1\norders 0\n", 3},
		{"four fields", "0\n1\norders 0 1 2\n", 3},
		{"partition not a number", "0\n1\norders x 1\n", 3},
		{"partition overflow", "0\n1\norders 2147483648 1\n", 3},
		{"offset not a number", "0\n1\norders 0 1.5\n", 3},
		{"offset overflow", "0\n1\norders 0 9223372036854775808\n", 3},
		{"leading space", "0\n1\n orders 0 1\n", 3},
		{"leading space, empty topic", "0\n1\n 0 00\n", 3},
		{"second line bad", "0\n2\norders 0 1\norders 1 x\n", 4},
		{"count mismatch", "0\n2\norders 0 1\n", 0},
		{"version 1", "1\n1\norders 0 1\n", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOffsets([]byte(tc.in))
			if got != nil {
				t.Errorf("map returned with an error")
			}
			wantCorrupt(t, err, tc.line)
		})
	}
	// Through a file, the error names it.
	p := filepath.Join(t.TempDir(), RecoveryPointFile)
	if err := os.WriteFile(p, []byte("0\n1\nbad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadOffsets(p)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != p || ce.Line != 3 {
		t.Fatalf("ReadOffsets: %v", err)
	}
}

func TestOffsetsRejectUnwritableTopics(t *testing.T) {
	for _, topic := range []string{"", "a b", "a\tb", "a\nb", "a\rb", "a\vb", "\xff"} {
		_, err := AppendOffsets(nil, map[TopicPartition]int64{{topic, 0}: 1})
		if !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("topic %q: %v", topic, err)
		}
		if err := WriteOffsets(filepath.Join(t.TempDir(), "x"), map[TopicPartition]int64{{topic, 0}: 1}); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("WriteOffsets topic %q: %v", topic, err)
		}
	}
}

func TestTopicPartitionString(t *testing.T) {
	if s := (TopicPartition{"orders", 3}).String(); s != "orders-3" {
		t.Fatal(s)
	}
}

func TestLeaderEpochsGolden(t *testing.T) {
	golden := readGolden(t, "leader-epoch-checkpoint.golden")
	want := []EpochEntry{{0, 0}, {3, 1200}}
	got, err := ParseLeaderEpochs(golden)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseLeaderEpochs = %v, %v", got, err)
	}
	if enc := AppendLeaderEpochs(nil, want); !bytes.Equal(enc, golden) {
		t.Fatalf("AppendLeaderEpochs = %q, want %q", enc, golden)
	}
	if enc := AppendLeaderEpochs(nil, nil); !bytes.Equal(enc, readGolden(t, "empty-checkpoint.golden")) {
		t.Fatalf("empty: %q", enc)
	}
}

func TestLeaderEpochsFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), LeaderEpochFile)
	got, err := ReadLeaderEpochs(p)
	if err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v, %v", got, err)
	}
	want := []EpochEntry{{0, 0}, {1, 100}, {7, 5000}, {math.MaxInt32, math.MaxInt64}}
	if err := WriteLeaderEpochs(p, want); err != nil {
		t.Fatal(err)
	}
	got, err = ReadLeaderEpochs(p)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	// The reader does not impose monotonicity (the epoch cache does).
	got, err = ParseLeaderEpochs([]byte("0\n2\n5 10\n3 20\n"))
	if err != nil || !slices.Equal(got, []EpochEntry{{5, 10}, {3, 20}}) {
		t.Fatalf("non-monotonic: %v, %v", got, err)
	}
	for _, in := range []string{
		"0\n1\n0\n", "0\n1\n0 0 0\n", "0\n1\nx 0\n", "0\n1\n0 x\n",
		"0\n1\n2147483648 0\n", "1\n0\n", "0\n2\n0 0\n",
	} {
		if _, err := ParseLeaderEpochs([]byte(in)); !IsCorrupt(err) {
			t.Errorf("%q: %v", in, err)
		}
	}
	if err := os.WriteFile(p, []byte("0\n1\n0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptionError
	if _, err := ReadLeaderEpochs(p); !errors.As(err, &ce) || ce.Path != p {
		t.Fatalf("ReadLeaderEpochs: %v", err)
	}
}

func FuzzParseOffsets(f *testing.F) {
	f.Add(readGolden(f, "recovery-point-offset-checkpoint.golden"))
	f.Add(readGolden(f, "empty-checkpoint.golden"))
	f.Add([]byte("0\r\n1\r\nt 0 -5  \r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		offsets, err := ParseOffsets(data)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		enc, err := AppendOffsets(nil, offsets)
		if err != nil {
			t.Fatalf("parsed offsets cannot be written: %v", err)
		}
		again, err := ParseOffsets(enc)
		if err != nil || !maps.Equal(again, offsets) {
			t.Fatalf("round trip of %q: %v, %v", enc, again, err)
		}
		enc2, _ := AppendOffsets(nil, again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable: %q then %q", enc, enc2)
		}
	})
}

func FuzzParseLeaderEpochs(f *testing.F) {
	f.Add(readGolden(f, "leader-epoch-checkpoint.golden"))
	f.Add(readGolden(f, "empty-checkpoint.golden"))
	f.Add([]byte("0\r1\r-1 +7\r"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseLeaderEpochs(data)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		enc := AppendLeaderEpochs(nil, entries)
		again, err := ParseLeaderEpochs(enc)
		if err != nil || !slices.Equal(again, entries) {
			t.Fatalf("round trip of %q: %v, %v", enc, again, err)
		}
	})
}
