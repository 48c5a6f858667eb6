package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/testutil"
)

// TestInfoPrintsEverySegment: info lists every segment with its offsets,
// the snapshots, the checkpoints and the marker, and changes nothing.
func TestInfoPrintsEverySegment(t *testing.T) {
	dir := makeLog(t, t.TempDir(), 20)
	logDir := filepath.Dir(dir)
	if err := checkpoint.WriteOffsets(filepath.Join(logDir, checkpoint.RecoveryPointFile),
		map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 60}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteCleanShutdown(filepath.Join(logDir, checkpoint.CleanShutdownFile), -1); err != nil {
		t.Fatal(err)
	}
	before := testutil.HashTree(t, logDir)
	code, out, errOut := runCLI(t, "", "info", logDir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		dir + "\n",
		"status: ok",
		"clean-shutdown marker present",
		"recovery-point-offset-checkpoint: 60",
		"log-start-offset-checkpoint: absent",
		"leader-epoch-checkpoint: present",
		"log start offset: 0, log end offset: 60, recovery point: 60",
		"segments: 3",
		"00000000000000000000.log  base 0  size 1926",
		"00000000000000000027.log  base 27  size 1950",
		"00000000000000000054.log  base 54  size 434",
		"snapshots: 27, 54, 60",
		"leader epochs: 1@0",
		"producers: 0, last stable offset: 60, barriers: none",
		"problems: none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	sameTree(t, before, testutil.HashTree(t, logDir))
}

// TestInfoDamaged: the problems and the cut are shown, and the exit code
// says so; sizes on disk and after recovery are both given.
func TestInfoDamaged(t *testing.T) {
	dir := makeDamaged(t, damages()[0])
	code, out, errOut := runCLI(t, "", "info", dir)
	if code != exitProblems {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"status: problems",
		"recovery-point-offset-checkpoint: absent",
		"clean-shutdown marker absent",
		"00000000000000000054.log  base 54  size 534 (434 after recovery)  batches 2  offsets 54..59",
		"cut: torn-tail in segment 54 at position 434, offset 60, 100 bytes to remove",
		"note: no recovery point: every segment is validated",
		"truncate 00000000000000000054.log: torn-tail at position 434",
		"problems: 1",
		"cut 00000000000000000054.log@434: torn-tail",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	// It used to say "problems: none" under "status: problems".
	if strings.Contains(out, "problems: none") {
		t.Errorf("info says no problems under status problems:\n%s", out)
	}
}

// TestInfoJSON: info had no --json; it prints one object per partition
// with what the text says, and changes nothing.
func TestInfoJSON(t *testing.T) {
	dir := makeLog(t, t.TempDir(), 20)
	logDir := filepath.Dir(dir)
	if err := checkpoint.WriteOffsets(filepath.Join(logDir, checkpoint.RecoveryPointFile),
		map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 60}); err != nil {
		t.Fatal(err)
	}
	before := testutil.HashTree(t, logDir)
	code, out, errOut := runCLI(t, "", "info", "--json", logDir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var m infoModel
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if m.SchemaVersion != 1 || m.Dir != dir || m.Status != "ok" || m.Checkpoints.RecoveryPoint != "60" ||
		m.LogEndOffset != 60 || len(m.Segments) != 3 || m.Segments[1].File != "00000000000000000027.log" ||
		m.Segments[1].FirstOffset != 27 || !slices.Equal(m.Snapshots, []int64{27, 54, 60}) || m.Problems == nil {
		t.Fatalf("info --json: %+v", m)
	}
	sameTree(t, before, testutil.HashTree(t, logDir))
}
