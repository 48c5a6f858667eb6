package main

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// TestDumpSnapshotGolden checks the sample snapshot against segment.json:
// a producer without batch metadata ends its line at lastTimestamp, as
// Kafka 4.4's tool prints it (3.x's left a trailing space).
func TestDumpSnapshotGolden(t *testing.T) {
	want := loadSampleFiles(t).Snapshot
	dir := sampleSegment(t, nil)
	code, out, errOut := runReadOnly(t, dir, "dump", "segment/"+want.Name)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	compareLines(t, out, want.Lines)
	if !strings.Contains(out, "lastTimestamp: 1700000000050\n") {
		t.Error("the producer without batch metadata is not printed as Kafka 4.4 does")
	}
}

// TestDumpSnapshotCorrupt: damaged snapshots print Kafka's exception
// message on stderr, exit 4 and let the dump go on; they never panic.
func TestDumpSnapshotCorrupt(t *testing.T) {
	good, err := os.ReadFile("testdata/sample/00000000000000000018.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte{}, good...)
	flipped[20] ^= 0x40
	version := append([]byte{}, good...)
	binary.BigEndian.PutUint16(version, 2)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:100], "Snapshot failed schema validation: entry count 3 needs 138 bytes after the header, file has 90\n"},
		{"header only", good[:7], "Snapshot failed schema validation: "},
		{"empty", []byte{}, "Snapshot failed schema validation: "},
		{"crc", flipped, "Snapshot is corrupt (CRC is no longer valid). Stored crc: 3246976184. Computed crc: "},
		{"version", version, "Snapshot contained an unknown file version 2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := sampleSegment(t, map[string][]byte{"00000000000000000030.snapshot": tc.data})
			code, out, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000030.snapshot", "segment/00000000000000000018.snapshot")
			if code != exitProblems {
				t.Errorf("exit %d, want %d", code, exitProblems)
			}
			if !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr %q, want %q…", errOut, tc.want)
			}
			if !strings.HasPrefix(out, "Dumping segment/00000000000000000030.snapshot\nDumping segment/00000000000000000018.snapshot\nproducerId: 2000 ") {
				t.Errorf("stdout:\n%s", out)
			}
		})
	}
}

// TestDumpSnapshotMissing: an unreadable snapshot is an operational error.
func TestDumpSnapshotMissing(t *testing.T) {
	dir := sampleSegment(t, nil)
	code, _, errOut := runReadOnly(t, dir, "dump", "segment/00000000000000000099.snapshot")
	if code != exitOperational || !strings.HasPrefix(errOut, "partlog: ") || strings.Count(errOut, "segment/00000000000000000099.snapshot") != 1 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
