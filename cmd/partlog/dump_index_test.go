package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleFiles describes the index and snapshot files of segment.json.
type sampleFiles struct {
	Index     expectedDump `json:"index_file"`
	TimeIndex expectedDump `json:"timeindex_file"`
	Snapshot  expectedDump `json:"snapshot_file"`
}

// expectedDump is a file name with kafka-dump-log's expected lines.
type expectedDump struct {
	Name  string   `json:"name"`
	Lines []string `json:"expected_dump_lines"`
}

func loadSampleFiles(t *testing.T) sampleFiles {
	t.Helper()
	raw, err := os.ReadFile("testdata/sample/segment.json")
	if err != nil {
		t.Fatal(err)
	}
	var s sampleFiles
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Batch positions in the sample .log (sizes from segment.json): offsets
// 0-2 at 0, 3 at 118, 4-5 at 222, 6-7 at 307, 8 at 394, 9 at 472, 10-12
// at 550, 13 at 685, 14-15 at 783, 16-17 (empty, compacted) at 870.
const sampleLogSize = 931

// sampleSegment copies the sample segment into dir/segment, read-only
// (0444, so an accidental write fails), and returns dir. extra files are
// added next to it.
func sampleSegment(t *testing.T, extra map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	seg := filepath.Join(dir, "segment")
	if err := os.Mkdir(seg, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("testdata/sample")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range ents {
		if e.Name() == "segment.json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata/sample", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	for name, b := range extra {
		files[name] = b
	}
	for name, b := range files {
		if b == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(seg, name), b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// dirContents returns every file of dir/segment with its bytes and mode.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(filepath.Join(dir, "segment"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, "segment", e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = st.Mode().String() + ":" + string(b)
	}
	return out
}

// runReadOnly runs the CLI in dir and fails the test if any file of
// dir/segment changed, appeared or disappeared.
func runReadOnly(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	before := dirContents(t, dir)
	code, out, errOut := runCLI(t, dir, args...)
	after := dirContents(t, dir)
	if len(before) != len(after) {
		t.Fatalf("files changed: %d before, %d after", len(before), len(after))
	}
	for name, b := range before {
		if after[name] != b {
			t.Fatalf("dump modified %s", name)
		}
	}
	return code, out, errOut
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func compareLines(t *testing.T, got string, want []string) {
	t.Helper()
	g := lines(got)
	if len(g) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(g), len(want), got)
	}
	for i := range g {
		if g[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, g[i], want[i])
		}
	}
}

func offsetIndexBytes(base int64, entries ...[2]int64) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e[0]-base))
		b = binary.BigEndian.AppendUint32(b, uint32(e[1]))
	}
	return b
}

func timeIndexBytes(base int64, entries ...[2]int64) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e[0]))
		b = binary.BigEndian.AppendUint32(b, uint32(e[1]-base))
	}
	return b
}

// TestDumpIndexGolden checks the sample .index and .timeindex against the
// expected kafka-dump-log lines of segment.json.
func TestDumpIndexGolden(t *testing.T) {
	want := loadSampleFiles(t)
	dir := sampleSegment(t, nil)
	for _, f := range []expectedDump{want.Index, want.TimeIndex} {
		t.Run(f.Name, func(t *testing.T) {
			code, out, errOut := runReadOnly(t, dir, "dump", "segment/"+f.Name)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			compareLines(t, out, f.Lines)
		})
	}
}

// TestDumpTxnIndexGolden checks the AbortedTxn vector's dump line.
func TestDumpTxnIndexGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/txnindex_entry.json")
	if err != nil {
		t.Fatal(err)
	}
	var vec struct {
		Lines []string `json:"expected_dump_lines"`
	}
	if err := json.Unmarshal(raw, &vec); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile("testdata/txnindex_entry.bin")
	if err != nil {
		t.Fatal(err)
	}
	dir := sampleSegment(t, map[string][]byte{"00000000000000000000.txnindex": bin})
	code, out, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000000.txnindex")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	compareLines(t, out, append([]string{"Dumping segment/00000000000000000000.txnindex"}, vec.Lines...))

	// A version other than 0 and a partial entry are problems (exit 4);
	// the entries before them are still printed.
	bad := append(append([]byte{}, bin...), bin...)
	bad[34] = 1
	bad = append(bad, 0, 0, 0)
	dir = sampleSegment(t, map[string][]byte{"00000000000000000000.txnindex": bad})
	code, out, errOut = runReadOnly(t, dir, "dump", "segment/00000000000000000000.txnindex")
	if code != exitProblems {
		t.Fatalf("exit %d, want %d", code, exitProblems)
	}
	compareLines(t, out, append([]string{"Dumping segment/00000000000000000000.txnindex"}, vec.Lines...))
	if !strings.Contains(errOut, "byte 34") {
		t.Errorf("stderr %q", errOut)
	}
}

// TestDumpIndexVerify dumps a hand-made .index: good entries, a mismatch
// and zero slots, in text and with --verify-index-only.
func TestDumpIndexVerify(t *testing.T) {
	idx := offsetIndexBytes(0,
		[2]int64{2, 0},   // batch 0-2 at 0: ok
		[2]int64{7, 118}, // batch at 118 ends at 3: mismatch
		[2]int64{12, 550},
		[2]int64{15, 222}, // batch at 222 ends at 5: mismatch
		[2]int64{0, 0},    // zero slot: the dump stops here
		[2]int64{17, 870}, // never looked at
	)
	dir := sampleSegment(t, map[string][]byte{"00000000000000000000.index": idx})
	abs := filepath.Join(dir, "segment", "00000000000000000000.index")
	wantErr := "Mismatches in :" + abs + "\n" +
		"  Index offset: 15, log offset: 5\n" +
		"  Index offset: 7, log offset: 3\n"

	code, out, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000000.index")
	if code != exitProblems {
		t.Errorf("exit %d, want %d", code, exitProblems)
	}
	compareLines(t, out, []string{
		"Dumping segment/00000000000000000000.index",
		"offset: 2 position: 0",
		"offset: 7 position: 118",
		"offset: 12 position: 550",
		"offset: 15 position: 222",
	})
	if errOut != wantErr {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, wantErr)
	}

	code, out, errOut = runReadOnly(t, dir, "dump", "--verify-index-only", "segment/00000000000000000000.index")
	if code != exitProblems {
		t.Errorf("exit %d, want %d", code, exitProblems)
	}
	compareLines(t, out, []string{"Dumping segment/00000000000000000000.index"})
	if errOut != wantErr {
		t.Errorf("verify-only stderr:\n%s\nwant:\n%s", errOut, wantErr)
	}

	// --offsets keeps only the entries in range.
	_, out, errOut = runReadOnly(t, dir, "dump", "--offsets", "3:12", "segment/00000000000000000000.index")
	compareLines(t, out, []string{
		"Dumping segment/00000000000000000000.index",
		"offset: 7 position: 118",
		"offset: 12 position: 550",
	})
	if !strings.Contains(errOut, "Index offset: 7, log offset: 3") || strings.Contains(errOut, "Index offset: 15") {
		t.Errorf("filtered stderr %q", errOut)
	}
}

// TestDumpIndexPastLog: an entry pointing beyond the .log is reported,
// not a crash, and the dump goes on.
func TestDumpIndexPastLog(t *testing.T) {
	idx := offsetIndexBytes(0, [2]int64{2, 0}, [2]int64{17, 5000}, [2]int64{15, 925})
	dir := sampleSegment(t, map[string][]byte{"00000000000000000000.index": idx})
	code, out, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000000.index", "segment/00000000000000000000.timeindex")
	if code != exitProblems {
		t.Errorf("exit %d, want %d", code, exitProblems)
	}
	compareLines(t, out, []string{
		"Dumping segment/00000000000000000000.index",
		"offset: 2 position: 0",
		"offset: 17 position: 5000",
		"offset: 15 position: 925",
		"Dumping segment/00000000000000000000.timeindex",
		"timestamp: 1700000005000 offset: 15",
	})
	for _, want := range []string{"byte 8: entry for offset 17 points at position 5000", "byte 16: entry for offset 15 points at position 925"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
}

// TestDumpIndexSanity: --index-sanity-check passes the sample files; a
// garbage index fails Kafka's check with the exception that ends Kafka's
// tool (exit 4, no later file), or, under --strict-sanity-check, partlog's
// check, reported on stderr before the dump goes on.
func TestDumpIndexSanity(t *testing.T) {
	garbage := bytes.Repeat([]byte{0xff, 0x13, 0x7f, 0x00, 0xa5}, 5) // 25 bytes, negative offsets
	dir := sampleSegment(t, map[string][]byte{"00000000000000000005.index": garbage,
		"00000000000000000005.log": {}, "00000000000000000005.timeindex": garbage[:24]})
	files := []string{"segment/00000000000000000000.index", "segment/00000000000000000000.timeindex",
		"segment/00000000000000000005.index", "segment/00000000000000000005.timeindex"}
	code, out, errOut := runReadOnly(t, dir, append([]string{"dump", "--index-sanity-check"}, files...)...)
	if code != exitProblems {
		t.Errorf("exit %d, want %d", code, exitProblems)
	}
	compareLines(t, out, []string{
		"Dumping segment/00000000000000000000.index",
		"segment/00000000000000000000.index is empty.",
		"Dumping segment/00000000000000000000.timeindex",
		"segment/00000000000000000000.timeindex passed sanity check.",
		"Dumping segment/00000000000000000005.index",
	})
	abs := filepath.Join(dir, "segment", "00000000000000000005.index")
	want := `Exception in thread "main" org.apache.kafka.storage.internals.log.CorruptIndexException: Index file ` +
		abs + " is corrupt, found 25 bytes which is neither positive nor a multiple of 8\n"
	if errOut != want {
		t.Errorf("stderr %q\nwant   %q", errOut, want)
	}

	code, out, errOut = runReadOnly(t, dir, append([]string{"dump", "--index-sanity-check", "--strict-sanity-check"}, files...)...)
	if code != exitProblems {
		t.Errorf("strict: exit %d, want %d", code, exitProblems)
	}
	compareLines(t, out, []string{
		"Dumping segment/00000000000000000000.index",
		"segment/00000000000000000000.index is empty.",
		"Dumping segment/00000000000000000000.timeindex",
		"segment/00000000000000000000.timeindex passed sanity check.",
		"Dumping segment/00000000000000000005.index",
		"Dumping segment/00000000000000000005.timeindex",
	})
	for _, name := range []string{"00000000000000000005.index failed sanity check", "00000000000000000005.timeindex failed sanity check"} {
		if !strings.Contains(errOut, name) {
			t.Errorf("strict: stderr %q lacks %q", errOut, name)
		}
	}

	// Without the flag the garbage entries are printed and checked.
	code, _, errOut = runReadOnly(t, dir, "dump", "segment/00000000000000000005.index")
	if code != exitProblems || !strings.Contains(errOut, "byte 24: 1 bytes after the last whole 8-byte entry") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestDumpTimeIndexVerify checks the three kinds of time index errors and
// their order after all files.
func TestDumpTimeIndexVerify(t *testing.T) {
	ti := timeIndexBytes(0,
		[2]int64{1700000000002, 2},    // ok
		[2]int64{1700000000000, 5},    // batch 4-5 has max 1700000000021; and out of order
		[2]int64{1700000009999, 4},    // 4 is not a batch's last offset: found 5
		[2]int64{1700000009999, 1000}, // beyond the log: -1
	)
	idx := offsetIndexBytes(0, [2]int64{7, 118})
	dir := sampleSegment(t, map[string][]byte{"00000000000000000000.timeindex": ti, "00000000000000000000.index": idx})
	code, out, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000000.timeindex", "segment/00000000000000000000.index")
	if code != exitProblems {
		t.Errorf("exit %d, want %d", code, exitProblems)
	}
	compareLines(t, out, []string{
		"Dumping segment/00000000000000000000.timeindex",
		"timestamp: 1700000000002 offset: 2",
		"timestamp: 1700000000000 offset: 5",
		"timestamp: 1700000009999 offset: 4",
		"timestamp: 1700000009999 offset: 1000",
		"Dumping segment/00000000000000000000.index",
		"offset: 7 position: 118",
	})
	segDir := filepath.Join(dir, "segment")
	want := "Mismatches in :" + filepath.Join(segDir, "00000000000000000000.index") + "\n" +
		"  Index offset: 7, log offset: 3\n" +
		"Found timestamp mismatch in :" + filepath.Join(segDir, "00000000000000000000.timeindex") + "\n" +
		"  Index timestamp: 1700000000000, log timestamp: 1700000000021\n" +
		"Found out of order timestamp in :" + filepath.Join(segDir, "00000000000000000000.timeindex") + "\n" +
		"  Index timestamp: 1700000000000, Previously indexed timestamp: 1700000000002\n" +
		"The following indexed offsets are not found in :" + filepath.Join(segDir, "00000000000000000000.timeindex") + "\n" +
		"Indexed offset: 4, found log offset: 5\n" +
		"Indexed offset: 1000, found log offset: -1\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
}

// TestDumpTimeIndexInsideBatch: Kafka 3.6 and 3.7 indexed the offset of
// the record with the largest timestamp, inside its batch (KAFKA-16310).
// Such an entry is valid: exit 0, and the trailer lists it as Kafka's tool
// does.
func TestDumpTimeIndexInsideBatch(t *testing.T) {
	ti := timeIndexBytes(0,
		[2]int64{1700000000002, 2},
		[2]int64{1700000000021, 4}, // inside batch 4-5, whose largest timestamp it is
	)
	dir := sampleSegment(t, map[string][]byte{"00000000000000000000.timeindex": ti})
	code, out, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000000.timeindex")
	if code != exitOK {
		t.Errorf("exit %d, want 0\n%s%s", code, out, errOut)
	}
	compareLines(t, out, []string{
		"Dumping segment/00000000000000000000.timeindex",
		"timestamp: 1700000000002 offset: 2",
		"timestamp: 1700000000021 offset: 4",
	})
	want := "The following indexed offsets are not found in :" + filepath.Join(dir, "segment", "00000000000000000000.timeindex") + "\n" +
		"Indexed offset: 4, found log offset: 5\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
	// A wrong timestamp inside a batch is still a problem.
	ti = timeIndexBytes(0, [2]int64{1700000000022, 4})
	dir = sampleSegment(t, map[string][]byte{"00000000000000000000.timeindex": ti})
	if code, out, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000000.timeindex"); code != exitProblems {
		t.Errorf("wrong timestamp: exit %d, want 4\n%s%s", code, out, errOut)
	}
}

// TestDumpIndexMissingSiblings: an index without its .log ends the dump
// as Kafka's tool dies (NoSuchFileException naming the .log, exit 8); a
// time index without its .index is read as Kafka's tool reads it, as if
// the .index were empty (Kafka's creates an empty one; partlog writes
// nothing).
func TestDumpIndexMissingSiblings(t *testing.T) {
	dir := sampleSegment(t, map[string][]byte{
		"00000000000000000020.index":     offsetIndexBytes(20, [2]int64{21, 0}),
		"00000000000000000030.log":       {},
		"00000000000000000030.timeindex": timeIndexBytes(30, [2]int64{1, 30}),
	})
	code, out, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000030.timeindex",
		"segment/00000000000000000020.index", "segment/00000000000000000000.index")
	// 4: offset 30 is not in the empty .log; 8: the missing .log.
	if code != exitProblems|exitOperational {
		t.Errorf("exit %d, want %d", code, exitProblems|exitOperational)
	}
	compareLines(t, out, []string{
		"Dumping segment/00000000000000000030.timeindex",
		"timestamp: 1 offset: 30",
		"Dumping segment/00000000000000000020.index",
	})
	want := `Exception in thread "main" java.nio.file.NoSuchFileException: ` + filepath.Join(dir, "segment", "00000000000000000020.log") + "\n"
	if !strings.HasSuffix(errOut, want) {
		t.Errorf("stderr %q\nwant suffix %q", errOut, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "segment", "00000000000000000030.index")); err == nil {
		t.Error("dump created the missing .index")
	}
}

// TestDumpOffsetsFilter checks --offsets on .log and .txnindex files and
// its parsing.
func TestDumpOffsetsFilter(t *testing.T) {
	bin, err := os.ReadFile("testdata/txnindex_entry.bin")
	if err != nil {
		t.Fatal(err)
	}
	dir := sampleSegment(t, map[string][]byte{"00000000000000000000.txnindex": bin})
	for _, tc := range []struct {
		rng  string
		want []int64 // base offsets of the batches printed
		txn  bool
	}{
		{"4:7", []int64{4, 6}, false},
		{"5:6", []int64{4, 6}, false},
		{"13:", []int64{13, 14, 16}, true},
		{":0", []int64{0}, false},
		{"100:100", nil, true},
		{"106:200", nil, false},
	} {
		code, out, errOut := runReadOnly(t, dir, "dump", "--deep-iteration", "--offsets", tc.rng,
			"segment/00000000000000000000.log", "segment/00000000000000000000.txnindex")
		if code != exitOK || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", tc.rng, code, errOut)
		}
		var got []int64
		for _, l := range lines(out) {
			var base int64
			if _, err := fmt.Sscanf(l, "baseOffset: %d ", &base); err == nil {
				got = append(got, base)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: batches %v, want %v", tc.rng, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: batches %v, want %v", tc.rng, got, tc.want)
			}
		}
		if strings.Contains(out, "version: 0 producerId: 4000") != tc.txn {
			t.Errorf("%s: txnindex line present = %t", tc.rng, !tc.txn)
		}
	}
	for _, bad := range []string{"5", "7:3", "x:1", "-1:4"} {
		if code, _, _ := runCLI(t, dir, "dump", "--offsets", bad, "segment/00000000000000000000.log"); code != exitUsage {
			t.Errorf("--offsets %s: exit %d, want %d", bad, code, exitUsage)
		}
	}
}

// TestDumpMaxBytes: --max-bytes stops reading the .log after N bytes and
// suppresses the invalid-bytes line, as kafka-dump-log does.
func TestDumpMaxBytes(t *testing.T) {
	dir := sampleSegment(t, nil)
	code, out, errOut := runReadOnly(t, dir, "dump", "--max-bytes", "300", "segment/00000000000000000000.log")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if n := strings.Count(out, "baseOffset: "); n != 2 {
		t.Errorf("%d batches, want 2:\n%s", n, out)
	}
	if strings.Contains(out, "invalid bytes") {
		t.Errorf("invalid-bytes line with --max-bytes:\n%s", out)
	}
	code, out, _ = runReadOnly(t, dir, "dump", "--max-bytes", "0", "segment/00000000000000000000.log")
	if code != exitOK || strings.Count(out, "baseOffset: ") != 0 {
		t.Errorf("--max-bytes 0: exit %d\n%s", code, out)
	}
}
