package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testutil"
)

// damage is one way of breaking a partition directory, with what verify
// must report about it.
type damage struct {
	name  string
	apply func(t *testing.T, dir string) // breaks dir
	check func(t *testing.T, r reportOut, dir string)
}

// garbage is a tail that is not a batch: its length field runs past the
// end of the file.
var garbage = bytes.Repeat([]byte{0xAB}, 100)

func damages() []damage {
	var crcPos int64 // position of the batch whose CRC crc-flip breaks
	return []damage{
		{
			name: "garbage-tail",
			apply: func(t *testing.T, dir string) {
				appendFile(t, lastLog(t, dir), garbage)
			},
			check: func(t *testing.T, r reportOut, dir string) {
				if r.Truncation == nil {
					t.Fatal("no truncation")
				}
				tr := r.Truncation
				if tr.Class != "torn-tail" || tr.SegmentBaseOffset != 54 || tr.Position != 434 || tr.Offset != 60 || tr.BytesRemoved != int64(len(garbage)) {
					t.Fatalf("truncation %+v, want torn-tail in segment 54 at 434, offset 60, 100 bytes", *tr)
				}
				if r.LogEndOffset != 60 {
					t.Fatalf("log end offset %d, want 60", r.LogEndOffset)
				}
			},
		},
		{
			name: "truncated-batch",
			apply: func(t *testing.T, dir string) {
				p := lastLog(t, dir)
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if pos := batchPositions(t, p); len(pos) != 2 || pos[1] != 217 || fi.Size() != 434 {
					t.Fatalf("last segment: batches at %v, size %d; want 0, 217 and 434", pos, fi.Size())
				}
				if err := os.Truncate(p, fi.Size()-10); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, r reportOut, dir string) {
				tr := r.Truncation
				// The last segment holds two batches of 217 bytes.
				if tr == nil || tr.Class != "torn-tail" || tr.SegmentBaseOffset != 54 || tr.Position != 217 || tr.Offset != 57 || tr.BytesRemoved != 207 {
					t.Fatalf("truncation %+v, want torn-tail in segment 54 at 217, offset 57, 207 bytes", tr)
				}
			},
		},
		{
			name: "crc-flip",
			apply: func(t *testing.T, dir string) {
				// The CRC of the fifth batch of the first segment.
				p := logFiles(t, dir)[0]
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				crcPos = batchPositions(t, p)[4]
				b[crcPos+batch.OffCRC+2] ^= 0xFF
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, r reportOut, dir string) {
				tr := r.Truncation
				if tr == nil || tr.SegmentBaseOffset != 0 || tr.Position != crcPos || tr.Offset != 12 || tr.Class != "corrupt-unflushed" {
					t.Fatalf("truncation %+v, want corrupt-unflushed in segment 0 at %d, offset 12", tr, crcPos)
				}
				if r.LogEndOffset != 12 || len(r.Segments) != 1 {
					t.Fatalf("LEO %d, %d segments; want 12 and 1", r.LogEndOffset, len(r.Segments))
				}
			},
		},
		{
			name: "corrupt-index",
			apply: func(t *testing.T, dir string) {
				// Segments 0 and 27 lie below the recovery point: trusted
				// once their indexes pass their checks, which a length
				// that is not a whole number of entries fails.
				if err := checkpoint.WriteOffsets(filepath.Join(filepath.Dir(dir), checkpoint.RecoveryPointFile),
					map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 54}); err != nil {
					t.Fatal(err)
				}
				appendFile(t, filepath.Join(dir, "00000000000000000027.index"), []byte{1, 2, 3})
			},
			check: func(t *testing.T, r reportOut, dir string) {
				if r.Truncation != nil {
					t.Fatalf("unexpected truncation %+v", *r.Truncation)
				}
				if !slices.Contains(r.IndexesRebuilt, 27) || !r.hasProblem("index") {
					t.Fatalf("indexesRebuilt %v problems %+v, want 27 and an index problem", r.IndexesRebuilt, r.Problems)
				}
			},
		},
		{
			name: "bad-snapshot",
			apply: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, filenames.Make(27, filenames.Snapshot)), []byte("not a snapshot at all"), 0o644); err != nil {
					t.Fatal(err)
				}
				// Without the newer ones, and with a recovery point in the
				// last segment, recovery must read this one.
				for _, off := range []int64{54, 60} {
					if err := os.Remove(filepath.Join(dir, filenames.Make(off, filenames.Snapshot))); err != nil {
						t.Fatal(err)
					}
				}
				if err := checkpoint.WriteOffsets(filepath.Join(filepath.Dir(dir), checkpoint.RecoveryPointFile),
					map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 60}); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, r reportOut, dir string) {
				if len(r.SnapshotsDiscarded) != 1 || r.SnapshotsDiscarded[0] != 27 || !r.hasProblem("snapshot") {
					t.Fatalf("snapshotsDiscarded %v problems %+v, want 27", r.SnapshotsDiscarded, r.Problems)
				}
			},
		},
	}
}

// makeDamaged writes the standard test log (20 batches: segments 0, 27
// and 54) and breaks it with d.
func makeDamaged(t *testing.T, d damage) string {
	t.Helper()
	dir := makeLog(t, t.TempDir(), 20)
	d.apply(t, dir)
	return dir
}

func TestVerifyHealthy(t *testing.T) {
	dir := makeLog(t, t.TempDir(), 20)
	before := testutil.HashTree(t, filepath.Dir(dir))
	code, out, errOut := runCLI(t, "", "verify", dir)
	if code != exitOK {
		t.Fatalf("exit %d, stdout %s stderr %s", code, out, errOut)
	}
	if !strings.Contains(out, dir+": ok") || !strings.Contains(out, "end 60") {
		t.Fatalf("output %q", out)
	}
	sameTree(t, before, testutil.HashTree(t, filepath.Dir(dir)))
}

// TestVerifyDamaged: verify reports each damage in --json, exits 4 and
// leaves every file byte-identical (no file or directory created).
func TestVerifyDamaged(t *testing.T) {
	for _, d := range damages() {
		t.Run(d.name, func(t *testing.T) {
			dir := makeDamaged(t, d)
			logDir := filepath.Dir(dir)
			before := testutil.HashTree(t, logDir)
			code, out, errOut := runCLI(t, "", "verify", "--json", dir)
			if code != exitProblems {
				t.Fatalf("exit %d, want 4; stdout %s stderr %s", code, out, errOut)
			}
			reps := parseReports(t, out)
			if len(reps) != 1 {
				t.Fatalf("%d reports, want 1: %s", len(reps), out)
			}
			r := reps[0]
			if r.SchemaVersion != 1 || r.Dir != dir || r.Status != "problems" {
				t.Fatalf("report header %+v", r)
			}
			d.check(t, r, dir)
			// Text output too.
			code, out, _ = runCLI(t, "", "verify", dir)
			if code != exitProblems || !strings.Contains(out, dir+": problems") {
				t.Fatalf("text: exit %d, %s", code, out)
			}
			if r.Truncation != nil && !strings.Contains(out, "  cut: "+r.Truncation.Class) {
				t.Fatalf("text output lacks the cut: %s", out)
			}
			sameTree(t, before, testutil.HashTree(t, logDir))
		})
	}
}

// TestVerifyJSONFields checks the field names of the JSON contract.
func TestVerifyJSONFields(t *testing.T) {
	dir := makeDamaged(t, damages()[0])
	_, out, _ := runCLI(t, "", "verify", "--json", dir)
	for _, f := range []string{`"schemaVersion":1`, `"dir":`, `"cleanShutdown":false`, `"logStartOffset":0`,
		`"logEndOffset":60`, `"segments":[{"baseOffset":0,"sizeBytes":`, `"batches":`, `"lastOffset":`,
		`"truncation":{"segmentBaseOffset":54,"position":434,"offset":60,"bytesRemoved":100,"reason":`,
		`"indexesRebuilt":[`, `"producers":0`, `"lastStableOffset":`, `"barriers":[]`,
		`"problems":[{"file":`, `"position":`, `"kind":`, `"detail":`, `"quarantine":null`, `"status":"problems"`} {
		if !strings.Contains(out, f) {
			t.Errorf("JSON lacks %s:\n%s", f, out)
		}
	}
	if strings.Count(out, "\n") != 1 {
		t.Errorf("want one line, got %q", out)
	}
}

// TestVerifyLogDir: a log directory argument verifies every partition.
func TestVerifyLogDir(t *testing.T) {
	dir := makeDamaged(t, damages()[0])
	logDir := filepath.Dir(dir)
	if err := os.Mkdir(filepath.Join(logDir, "u-3"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "verify", "--json", logDir)
	if code != exitProblems {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	reps := parseReports(t, out)
	if len(reps) != 2 || reps[0].Dir != filepath.Join(logDir, "t-0") || reps[1].Dir != filepath.Join(logDir, "u-3") {
		t.Fatalf("reports %+v", reps)
	}
}

// TestSeveralDirsOrCodes: the exit codes of several arguments are ORed.
func TestSeveralDirsOrCodes(t *testing.T) {
	healthy := makeLog(t, t.TempDir(), 5)
	broken := makeDamaged(t, damages()[0])
	missing := filepath.Join(t.TempDir(), "nope-0")
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{healthy}, exitOK},
		{[]string{healthy, broken}, exitProblems},
		{[]string{healthy, missing}, exitOperational},
		{[]string{broken, missing, healthy}, exitProblems | exitOperational},
	} {
		for _, cmd := range []string{"verify", "recover", "info"} {
			args := append([]string{cmd}, tc.args...)
			code, out, errOut := runCLI(t, "", args...)
			if code != tc.want {
				t.Errorf("%v: exit %d, want %d\n%s%s", args, code, tc.want, out, errOut)
			}
		}
	}
	// JSON: one object per directory, errors included.
	_, out, errOut := runCLI(t, "", "verify", "--json", healthy, broken)
	if reps := parseReports(t, out); len(reps) != 2 || reps[0].Status != "ok" || reps[1].Status != "problems" {
		t.Fatalf("reports %s %s", out, errOut)
	}
	_, _, errOut = runCLI(t, "", "verify", missing)
	if !strings.Contains(errOut, missing) {
		t.Fatalf("stderr %q does not name the missing directory", errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := makeLog(t, t.TempDir(), 2)
	for _, args := range [][]string{
		{"verify"},
		{"verify", "--bogus", dir},
		{"verify", "--index-interval-bytes", "-2", dir},
		{"recover"},
		{"recover", "--quarantine", t.TempDir(), dir},
		{"info"},
		{"producers"},
		{"producers", dir, dir},
		{"producers", "--at", "-5", dir},
		{"producers", "--at", "1000", dir},
		{"producers", filepath.Dir(dir)},
	} {
		code, out, errOut := runCLI(t, "", args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 16\n%s%s", args, code, out, errOut)
		}
		if out != "" {
			t.Errorf("%v: stdout %q", args, out)
		}
	}
}
