package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantCorrupt fails unless err is a *CorruptionError on line.
func wantCorrupt(t *testing.T, err error, line int) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || !IsCorrupt(err) {
		t.Fatalf("got %v (%T), want a *CorruptionError", err, err)
	}
	if ce.Line != line {
		t.Errorf("line %d, want %d (%v)", ce.Line, line, err)
	}
}

func TestParseEntriesTolerated(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want [][]string
	}{
		{"empty file", "", nil},
		{"version only", "0\n", nil},
		{"version only, no newline", "0", nil},
		{"zero entries", "0\n0\n", nil},
		{"zero entries, no newline", "0\n0", nil},
		{"two entries", "0\n2\na 1\nb 2\n", [][]string{{"a", "1"}, {"b", "2"}}},
		{"no final newline", "0\n1\na 1", [][]string{{"a", "1"}}},
		{"CRLF", "0\r\n1\r\na 1\r\n", [][]string{{"a", "1"}}},
		{"CR", "0\r1\ra 1\r", [][]string{{"a", "1"}}},
		{"runs of white space", "0\n1\na \t\v\f 1\n", [][]string{{"a", "1"}}},
		{"trailing white space dropped", "0\n1\na 1  \t\n", [][]string{{"a", "1"}}},
		{"signed numbers", "+0\n+1\na 1\n", [][]string{{"a", "1"}}},
		{"leading zeros", "00\n01\na 1\n", [][]string{{"a", "1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEntries([]byte(tc.in), 0, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if !slices.Equal(got[i], tc.want[i]) {
					t.Fatalf("entry %d: got %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseEntriesMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   string
		line int
	}{
		{"empty first line", "\n", 1},
		{"text version", "zero\n0\n", 1},
		{"version with space", "0 \n0\n", 1},
		{"version 1", "1\n0\n", 1},
		{"version 1 only", "1\n", 1},
		{"version -1", "-1\n", 1},
		{"version overflow", "99999999999\n", 1},
		{"non-ASCII digit version", "٠\n0\n", 1},
		{"bad count", "0\nx\n", 2},
		{"empty count", "0\n\na 1\n", 2},
		{"negative count", "0\n-1\n", 2},
		{"count overflow", "0\n2147483648\n", 2},
		{"too few fields", "0\n1\na\n", 3},
		{"too many fields", "0\n1\na 1 2\n", 3},
		{"leading space", "0\n1\n a 1\n", 3},
		{"empty entry line", "0\n2\na 1\n\n", 4},
		{"blank entry line", "0\n1\n   \n", 3},
		{"more lines than count", "0\n1\na 1\nb 2\n", 0},
		{"fewer lines than count", "0\n3\na 1\nb 2\n", 0},
		{"count zero but entries", "0\n0\na 1\n", 0},
		{"invalid UTF-8", "0\n1\n\xff 1\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEntries([]byte(tc.in), 0, 2)
			if got != nil {
				t.Errorf("entries returned with an error: %q", got)
			}
			wantCorrupt(t, err, tc.line)
		})
	}
}

func TestAppendEntries(t *testing.T) {
	if got := string(AppendEntries(nil, 0, nil)); got != "0\n0\n" {
		t.Errorf("empty: %q", got)
	}
	if got := string(AppendEntries([]byte("x"), 0, []string{"a 1", "b 2"})); got != "x0\n2\na 1\nb 2\n" {
		t.Errorf("two entries: %q", got)
	}
}

func TestSplitFieldsLikeJava(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a", []string{"a"}},
		{"a b", []string{"a", "b"}},
		{" a b", []string{"", "a", "b"}},
		{"a b ", []string{"a", "b"}},
		{"   ", []string{}},
		{"a\t\t b", []string{"a", "b"}},
	} {
		if got := splitFields(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitFields(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzParseEntries(f *testing.F) {
	f.Add([]byte("0\n2\norders 0 1534\norders 1 871\n"), 3)
	f.Add([]byte("0\n2\n0 0\n3 1200\n"), 2)
	f.Add([]byte("0\r\n1\r\na 1\r\n"), 2)
	f.Add([]byte(""), 1)
	f.Fuzz(func(t *testing.T, data []byte, fields int) {
		fields = 1 + (fields&0xff)%4
		entries, err := ParseEntries(data, 0, fields)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		// Re-encode the fields joined by single spaces: the result parses
		// to the same fields and is a fixed point of parse+append.
		lines := make([]string, len(entries))
		for i, e := range entries {
			if len(e) != fields {
				t.Fatalf("entry %d has %d fields, want %d", i, len(e), fields)
			}
			for j, s := range e {
				if j > 0 {
					lines[i] += " "
				}
				lines[i] += s
			}
		}
		again := AppendEntries(nil, 0, lines)
		entries2, err := ParseEntries(again, 0, fields)
		if err != nil || len(entries2) != len(entries) {
			t.Fatalf("re-encoded %q does not parse: %v", again, err)
		}
		for i := range entries {
			if !slices.Equal(entries[i], entries2[i]) {
				t.Fatalf("entry %d: %q then %q", i, entries[i], entries2[i])
			}
		}
	})
}
