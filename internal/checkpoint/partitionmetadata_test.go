package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// idOne is the UUID 00000000-0000-0000-0000-000000000001, whose Kafka text
// form is "AAAAAAAAAAAAAAAAAAAAAQ".
var idOne = TopicID{15: 1}

func TestTopicID(t *testing.T) {
	if s := idOne.String(); s != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("String = %q", s)
	}
	id := TopicID{0xfb, 0xff, 0xbf, 0x01, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	got, err := ParseTopicID(id.String())
	if err != nil || got != id {
		t.Fatalf("round trip %s: %v, %v", id, got, err)
	}
	if got, err := ParseTopicID("AAAAAAAAAAAAAAAAAAAAAQ=="); err != nil || got != idOne {
		t.Fatalf("padded form: %v, %v", got, err)
	}
	for _, bad := range []string{
		"", "AAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ=",
		"AAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAA+/", "AAAAAAAAAAAAAAAAAAAAA!",
	} {
		if _, err := ParseTopicID(bad); err == nil {
			t.Errorf("ParseTopicID(%q) succeeded", bad)
		}
	}
	if !(TopicID{}).IsZero() || idOne.IsZero() {
		t.Fatal("IsZero")
	}
}

func TestPartitionMetadataGolden(t *testing.T) {
	golden := readGolden(t, "partition.metadata.golden")
	want := PartitionMetadata{Version: 0, TopicID: idOne}
	got, err := ParsePartitionMetadata(golden)
	if err != nil || got != want {
		t.Fatalf("Parse = %+v, %v", got, err)
	}
	enc, err := AppendPartitionMetadata(nil, want)
	if err != nil || !bytes.Equal(enc, golden) {
		t.Fatalf("Append = %q, %v; want %q", enc, err, golden)
	}
}

func TestPartitionMetadataTolerated(t *testing.T) {
	for _, in := range []string{
		"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n",           // trailing newline
		"version: 0\r\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",           // CRLF
		"version:\t 0\ntopic_id:  AAAAAAAAAAAAAAAAAAAAAQ",          // runs of white space
		"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\nextra line", // extra lines ignored
		"anything: 0\nelse: AAAAAAAAAAAAAAAAAAAAAQ",                // keys are not checked
		"version: 0: \ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",           // trailing empty part dropped
		"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ==",           // padded id
		" version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",            // key " version" is not checked
	} {
		got, err := ParsePartitionMetadata([]byte(in))
		if err != nil || got.TopicID != idOne || got.Version != 0 {
			t.Errorf("%q: %+v, %v", in, got, err)
		}
	}
	got, err := ParsePartitionMetadata([]byte("version: 3\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"))
	if err != nil || got.Version != 3 {
		t.Errorf("newer version: %+v, %v", got, err)
	}
}

func TestPartitionMetadataMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   string
		line int
	}{
		{"empty", "", 1},
		{"no colon space", "version:0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1},
		{"three parts", "version: 0: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1},
		{"version not a number", "version: zero\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1},
		{"negative version", "version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1},
		{"version only", "version: 0", 2},
		{"version only with newline", "version: 0\n", 2},
		{"bad id line", "version: 0\ntopic_id:AAAAAAAAAAAAAAAAAAAAAQ", 2},
		{"short id", "version: 0\ntopic_id: AAAA", 2},
		{"bad base64", "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAA+/", 2},
		{"zero id", "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2},
		{"invalid UTF-8", "version: 0\ntopic_id: \xff", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePartitionMetadata([]byte(tc.in))
			wantCorrupt(t, err, tc.line)
		})
	}
}

func TestPartitionMetadataFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, PartitionMetadataFile)
	if _, err := ReadPartitionMetadata(p); !errors.Is(err, fs.ErrNotExist) || IsCorrupt(err) {
		t.Fatalf("missing: %v", err)
	}
	want := PartitionMetadata{TopicID: TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	if err := WritePartitionMetadata(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPartitionMetadata(p)
	if err != nil || got != want {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := os.Stat(p + filenames.Temp); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if err := WritePartitionMetadata(p, PartitionMetadata{}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("zero id: %v", err)
	}
	if err := WritePartitionMetadata(p, PartitionMetadata{Version: -1, TopicID: idOne}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("negative version: %v", err)
	}
	if err := os.WriteFile(p, []byte("version: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptionError
	if _, err := ReadPartitionMetadata(p); !errors.As(err, &ce) || ce.Path != p || ce.Line != 2 {
		t.Fatalf("corrupt file: %v", err)
	}
}

func FuzzParsePartitionMetadata(f *testing.F) {
	f.Add(readGolden(f, "partition.metadata.golden"))
	f.Add([]byte("version: 0\r\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ==\n"))
	f.Add([]byte("version: 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParsePartitionMetadata(data)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		enc, err := AppendPartitionMetadata(nil, m)
		if err != nil {
			t.Fatalf("parsed value cannot be written: %+v: %v", m, err)
		}
		again, err := ParsePartitionMetadata(enc)
		if err != nil || again != m {
			t.Fatalf("round trip of %q: %+v, %v", enc, again, err)
		}
	})
}
