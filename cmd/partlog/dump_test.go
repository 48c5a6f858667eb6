package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type segmentJSON struct {
	Fork      []string `json:"expected_log_dump_fork_tool"`
	Reference []string `json:"expected_log_dump_reference_tool"`
}

func loadSegmentJSON(t *testing.T) segmentJSON {
	t.Helper()
	raw, err := os.ReadFile("testdata/sample/segment.json")
	if err != nil {
		t.Fatal(err)
	}
	var s segmentJSON
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// runCLI runs the command in-process from dir and returns its output.
func runCLI(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	wd, _ := os.Getwd()
	if dir != "" {
		if err := os.Chdir(dir); err != nil {
			t.Fatal(err)
		}
		defer os.Chdir(wd)
	}
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestDumpGoldenSegment compares the dump of the shipped Kafka segment
// with the expected kafka-dump-log output, line for line, in Apache
// Kafka's format (the default: Kafka 4.4's tool prints exactly these
// lines) and in the mirroring fork's (--mirror-format).
func TestDumpGoldenSegment(t *testing.T) {
	want := loadSegmentJSON(t)
	// The expected lines name the file "segment/<name>".
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "segment"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/sample/00000000000000000000.log")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "segment", "00000000000000000000.log"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"reference", nil, want.Reference},
		{"fork", []string{"--mirror-format"}, want.Fork},
		{"deprecated flag", []string{"--reference-format"}, want.Reference},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"dump", "--deep-iteration", "--print-data-log"}, tc.extra...)
			args = append(args, "segment/00000000000000000000.log")
			code, out, errOut := runCLI(t, dir, args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(got) != len(tc.want) {
				t.Fatalf("%d lines, want %d:\n%s", len(got), len(tc.want), out)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("line %d:\n got %s\nwant %s", i+1, got[i], tc.want[i])
				}
			}
			if errOut != "" && tc.name != "deprecated flag" {
				t.Errorf("stderr: %s", errOut)
			}
		})
	}
}

// TestDumpInvalidTail appends garbage and expects kafka-dump-log's
// "Found N invalid bytes" line and exit code 4.
func TestDumpInvalidTail(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/sample/00000000000000000000.log")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, 0, 0, 0, 0, 0, 0, 0, 99, 0, 0, 1, 0, 0)
	path := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	code, out, _ := runCLI(t, "", "dump", path)
	if code != exitProblems {
		t.Errorf("exit %d, want %d", code, exitProblems)
	}
	if !strings.Contains(out, "Found 13 invalid bytes at the end of 00000000000000000000.log\n") {
		t.Errorf("missing invalid-bytes line:\n%s", out)
	}
	if strings.Count(out, "baseOffset: ") != 10 {
		t.Errorf("want 10 batch lines:\n%s", out)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("dump modified the file")
	}
}

// TestDumpZeroTail: the zeros after the data of an active segment (a
// running server's preallocated file) get Kafka's line but are not a
// problem: exit 0, a note on stderr, "zero" in JSON.
func TestDumpZeroTail(t *testing.T) {
	data, err := os.ReadFile("testdata/sample/00000000000000000000.log")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(path, append(data, make([]byte, 4099)...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "dump", path)
	if code != exitOK || !strings.Contains(out, "Found 4099 invalid bytes at the end of 00000000000000000000.log\n") ||
		!strings.Contains(errOut, "are zeros: the unwritten tail of an active segment") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "", "dump", "--json", path)
	if code != exitOK || !strings.Contains(out, `"zero":true`) || !strings.Contains(out, `"problems":[]`) {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
}

func TestDumpUsage(t *testing.T) {
	if code, _, _ := runCLI(t, "", "dump"); code != exitUsage {
		t.Fatalf("dump without files: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := runCLI(t, "", "dump", "/nonexistent/00000000000000000000.log"); code != exitOperational {
		t.Fatalf("missing file: exit %d, want %d", code, exitOperational)
	}
	_, _, errOut := runCLI(t, "", "dump", "testdata/sample/segment.json")
	if !strings.Contains(errOut, "Ignoring unknown file") {
		t.Fatalf("unknown file: stderr %q", errOut)
	}
}
