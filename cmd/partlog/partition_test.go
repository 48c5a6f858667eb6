package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
)

// Helpers shared by the tests of verify, recover, info and producers.

// testLogOpts are the options the test logs are written with: small
// segments so that a log has several, and Kafka's index interval (the
// CLI's default).
func testLogOpts() *partlog.Options {
	return &partlog.Options{SegmentBytes: 2048, PrefaultBytes: -1}
}

// dataBatch builds a plain batch of n records.
func dataBatch(t testing.TB, n int, tag string) []byte {
	t.Helper()
	spec := batch.NewBatchSpec(0)
	ts := time.Now().UnixMilli()
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: ts + int64(i), Key: fmt.Appendf(nil, "%s-%d", tag, i),
			Value: []byte(strings.Repeat("v", 40))}
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// makeLog writes a partition directory <root>/logdir/t-0 with batches
// plain batches of 3 records each and returns its path.
func makeLog(t testing.TB, root string, batches int) string {
	t.Helper()
	dir := filepath.Join(root, "logdir", "t-0")
	l, err := partlog.Open(dir, testLogOpts())
	if err != nil {
		t.Fatal(err)
	}
	for i := range batches {
		if _, err := l.AppendAsLeader(dataBatch(t, 3, fmt.Sprint("b", i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, dir)
	return dir
}

// logFiles returns the .log files of dir, sorted.
func logFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// lastLog returns the newest non-empty .log of dir.
func lastLog(t testing.TB, dir string) string {
	t.Helper()
	logs := logFiles(t, dir)
	for i := len(logs) - 1; i >= 0; i-- {
		if fi, err := os.Stat(logs[i]); err == nil && fi.Size() > 0 {
			return logs[i]
		}
	}
	t.Fatalf("no non-empty .log in %s", dir)
	return ""
}

// batchPositions returns the positions of the batches of a .log.
func batchPositions(t testing.TB, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for pos := 0; pos < len(b); {
		n, err := batch.Frame(b[pos:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, pos, err)
		}
		out = append(out, int64(pos))
		pos += n
	}
	return out
}

// appendFile appends data to the file at path.
func appendFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// sameTree fails unless the two hashes are equal.
func sameTree(t testing.TB, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed (%s -> %s)", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared", k)
		}
	}
}

// reportOut is the JSON output of verify and recover as tests read it.
type reportOut struct {
	SchemaVersion  int    `json:"schemaVersion"`
	Dir            string `json:"dir"`
	CleanShutdown  bool   `json:"cleanShutdown"`
	LogStartOffset int64  `json:"logStartOffset"`
	LogEndOffset   int64  `json:"logEndOffset"`
	Segments       []struct {
		BaseOffset int64 `json:"baseOffset"`
		SizeBytes  int64 `json:"sizeBytes"`
		Batches    int   `json:"batches"`
		LastOffset int64 `json:"lastOffset"`
	} `json:"segments"`
	Truncation *struct {
		SegmentBaseOffset int64  `json:"segmentBaseOffset"`
		Position          int64  `json:"position"`
		Offset            int64  `json:"offset"`
		BytesRemoved      int64  `json:"bytesRemoved"`
		Reason            string `json:"reason"`
		Class             string `json:"class"`
	} `json:"truncation"`
	IndexesRebuilt   []int64 `json:"indexesRebuilt"`
	Producers        int     `json:"producers"`
	LastStableOffset int64   `json:"lastStableOffset"`
	Barriers         []int64 `json:"barriers"`
	Problems         []struct {
		File     string `json:"file"`
		Position int64  `json:"position"`
		Kind     string `json:"kind"`
		Detail   string `json:"detail"`
	} `json:"problems"`
	Changes []struct {
		File   string `json:"file"`
		Action string `json:"action"`
		Kind   string `json:"kind"`
		Reason string `json:"reason"`
		To     string `json:"to"`
		Saved  string `json:"saved"`
	} `json:"changes"`
	Notes []struct {
		Kind   string `json:"kind"`
		Detail string `json:"detail"`
	} `json:"notes"`
	Refused            string   `json:"refused"`
	Quarantine         *string  `json:"quarantine"`
	SnapshotsDiscarded []int64  `json:"snapshotsDiscarded"`
	RemovedFiles       []string `json:"removedFiles"`
	Status             string   `json:"status"`
	Error              string   `json:"error"`
}

// parseReports decodes one JSON object per line.
func parseReports(t testing.TB, out string) []reportOut {
	t.Helper()
	var reps []reportOut
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r reportOut
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("decode %q: %v", out, err)
		}
		reps = append(reps, r)
	}
	return reps
}

func (r *reportOut) hasProblem(kind string) bool {
	for _, p := range r.Problems {
		if p.Kind == kind {
			return true
		}
	}
	return false
}

func TestResolvePartitionAndLogDir(t *testing.T) {
	root := t.TempDir()
	dir := makeLog(t, root, 2)
	logDir := filepath.Dir(dir)
	if err := os.Mkdir(filepath.Join(logDir, "t-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(logDir, "t-2.abc-delete"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteOffsets(filepath.Join(logDir, checkpoint.RecoveryPointFile),
		map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 4}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteCleanShutdown(filepath.Join(logDir, checkpoint.CleanShutdownFile), -1); err != nil {
		t.Fatal(err)
	}
	r := newResolver()
	ts, err := r.resolve(logDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].name != "t-0" || ts[1].name != "t-1" {
		t.Fatalf("log dir resolved to %+v", ts)
	}
	o := ts[0].recoveryOptions(4096)
	if !o.Clean || o.RecoveryPoint != 4 || o.LogStartOffset != 0 {
		t.Fatalf("t-0 options %+v", o)
	}
	if o := ts[1].recoveryOptions(4096); o.RecoveryPoint != -1 {
		t.Fatalf("t-1 without checkpoint entry: RecoveryPoint %d, want -1", o.RecoveryPoint)
	}
	ts, err = r.resolve(dir)
	if err != nil || len(ts) != 1 || ts[0].dir != dir || ts[0].logDir.path != logDir {
		t.Fatalf("partition dir resolved to %+v, %v", ts, err)
	}
	if _, err := r.resolve(filepath.Join(root, "missing")); err == nil {
		t.Fatal("missing directory resolved")
	}
	if _, err := r.resolve(t.TempDir()); err == nil {
		t.Fatal("empty directory with no partition resolved")
	}
}

// TestErrorsNamePathOnce: an error about a path names it once (it used to
// read "partlog: X: stat X: …").
func TestErrorsNamePathOnce(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing-0")
	file := filepath.Join(dir, "file.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	segDir := filepath.Join(dir, "00000000000000000000.log")
	if err := os.Mkdir(segDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		path string
	}{
		{[]string{"verify", missing}, missing},
		{[]string{"verify", file}, file},
		{[]string{"info", missing}, missing},
		{[]string{"producers", missing}, missing},
		{[]string{"recover", missing}, missing},
		{[]string{"dump", filepath.Join(dir, "00000000000000000007.log")}, filepath.Join(dir, "00000000000000000007.log")},
		{[]string{"dump", segDir}, segDir},
	} {
		code, _, errOut := runCLI(t, "", tc.args...)
		if code == exitOK || !strings.Contains(errOut, tc.path) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errOut)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
			if n := strings.Count(line, tc.path); n > 1 {
				t.Errorf("%v: %q names the path %d times", tc.args, line, n)
			}
		}
	}
}
