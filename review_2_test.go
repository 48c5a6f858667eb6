package partlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/checkpoint"
)

// R2: a partition that failed to load and is then opened again with
// Dir.Create stays in Dir.unloaded: every checkpoint writes its stale
// entries over the live log's, and Close never writes the marker.
func TestRegression_ReviewDirCreateAfterFailedLoadKeepsStaleCheckpoint(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(filepath.Join(root, "bad-0"), smallOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 5, 10, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	_ = l.Close()
	_ = d.Close()
	d, err = OpenDir(root, dirOpts(t)) // loads it; checkpoint RP 20
	if err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	logPath := filepath.Join(root, "bad-0", "00000000000000000000.log")
	st, _ := os.Stat(logPath)
	if err := os.Truncate(logPath, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	o := dirOpts(t)
	o.Log.Strict = true
	d, err = OpenDir(root, o)
	if err != nil {
		t.Fatal(err)
	}
	bad := TopicPartition{Topic: "bad", Partition: 0}
	if _, ok := d.Log(bad); ok {
		t.Fatal("loaded under Strict")
	}
	// The operator recovers it through Create (non-strict options).
	var id TopicID
	id[0] = 1
	l, err = d.Create("bad", 0, id, smallOpts(t))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("after Create: LEO %d RP %d", l.LogEndOffset(), l.RecoveryPoint())
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 5, 10, 1000), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rps, _ := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
	t.Logf("live RP %d, LEO %d; checkpoint RP %d", l.RecoveryPoint(), l.LogEndOffset(), rps[bad])
	if rps[bad] != l.RecoveryPoint() {
		t.Errorf("checkpoint RP %d for a live partition whose recovery point is %d (stale entry of the failed load)", rps[bad], l.RecoveryPoint())
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := checkpoint.CleanShutdownExists(filepath.Join(root, checkpoint.CleanShutdownFile)); !ok {
		t.Errorf("no clean-shutdown marker although every partition is loaded and closed cleanly")
	}
}
