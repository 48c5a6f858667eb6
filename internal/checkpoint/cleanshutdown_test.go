package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestCleanShutdownGolden(t *testing.T) {
	golden := readGolden(t, "kafka_cleanshutdown.golden")
	want := CleanShutdown{Version: 0, BrokerEpoch: 42}
	got, err := ParseCleanShutdown(golden)
	if err != nil || got != want {
		t.Fatalf("Parse = %+v, %v", got, err)
	}
	if enc := AppendCleanShutdown(nil, want); !bytes.Equal(enc, golden) {
		t.Fatalf("Append = %q, want %q", enc, golden)
	}
}

func TestCleanShutdownParse(t *testing.T) {
	tests := []struct {
		in   string
		want CleanShutdown
	}{
		{"", CleanShutdown{0, NoBrokerEpoch}},
		{" \n", CleanShutdown{0, NoBrokerEpoch}},
		{"{}", CleanShutdown{0, NoBrokerEpoch}},
		{`{"brokerEpoch":7}`, CleanShutdown{0, 7}},
		{`{"version":0,"brokerEpoch":-1}`, CleanShutdown{0, -1}},
		{`{"version":0,"brokerEpoch":null}`, CleanShutdown{0, NoBrokerEpoch}},
		{`{ "version" : 1 , "brokerEpoch" : 9223372036854775807 , "extra": [1, {"x": 2}] }` + "\n", CleanShutdown{1, math.MaxInt64}},
		{`{"BrokerEpoch":5}`, CleanShutdown{0, NoBrokerEpoch}}, // names are case-sensitive; unknown field ignored
	}
	for _, tc := range tests {
		got, err := ParseCleanShutdown([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		"x", "[]", "null", `"s"`, "1", `{"brokerEpoch":1.5}`, `{"brokerEpoch":"7"}`,
		`{"brokerEpoch":1e3}`, `{"brokerEpoch":9223372036854775808}`, `{"version":2147483648}`,
		`{"version":0,"brokerEpoch":1}x`, `{"version":0,`,
	} {
		_, err := ParseCleanShutdown([]byte(bad))
		wantCorrupt(t, err, 0)
	}
}

func TestCleanShutdownFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, CleanShutdownFile)
	if ok, err := CleanShutdownExists(p); ok || err != nil {
		t.Fatalf("exists before write: %v, %v", ok, err)
	}
	if _, err := ReadCleanShutdown(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read missing: %v", err)
	}
	// Overwriting a longer old marker must not leave its tail behind.
	if err := os.WriteFile(p, []byte(`{"version":0,"brokerEpoch":123456789012345}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteCleanShutdown(p, 42); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(raw, readGolden(t, "kafka_cleanshutdown.golden")) {
		t.Fatalf("file = %q, %v", raw, err)
	}
	if ok, err := CleanShutdownExists(p); !ok || err != nil {
		t.Fatalf("exists after write: %v, %v", ok, err)
	}
	got, err := ReadCleanShutdown(p)
	if err != nil || got != (CleanShutdown{0, 42}) {
		t.Fatalf("read: %+v, %v", got, err)
	}
	if err := RemoveCleanShutdown(p); err != nil {
		t.Fatal(err)
	}
	if ok, _ := CleanShutdownExists(p); ok {
		t.Fatal("marker still exists")
	}
	if err := RemoveCleanShutdown(p); err != nil {
		t.Fatalf("removing a missing marker: %v", err)
	}
	// An old broker's empty marker.
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCleanShutdown(p); err != nil || got.BrokerEpoch != NoBrokerEpoch {
		t.Fatalf("empty marker: %+v, %v", got, err)
	}
	if err := os.WriteFile(p, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptionError
	if _, err := ReadCleanShutdown(p); !errors.As(err, &ce) || ce.Path != p {
		t.Fatalf("corrupt marker: %v", err)
	}
}

func FuzzParseCleanShutdown(f *testing.F) {
	f.Add(readGolden(f, "kafka_cleanshutdown.golden"))
	f.Add([]byte(""))
	f.Add([]byte(`{"version":0,"brokerEpoch":null,"x":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseCleanShutdown(data)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		enc := AppendCleanShutdown(nil, m)
		again, err := ParseCleanShutdown(enc)
		if err != nil || again != m {
			t.Fatalf("round trip of %q: %+v, %v", enc, again, err)
		}
	})
}
