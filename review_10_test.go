package partlog

import (
	"os"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

// R10: the partition leader epoch field lies outside the CRC. A flipped
// epoch in one batch (1, 1, 999, 1) is now kept by recovery (the
// isolated-spike cut was removed) and enters the epoch cache; the leader
// can then no longer append at its real epoch.
func TestRegression_ReviewEpochSpikeKeptBlocksLeader(t *testing.T) {
	opts := ltOpts(t)
	opts.SegmentBytes = 1 << 20
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var pos []int64
	for i := 0; i < 4; i++ {
		info, err := l.AppendAsLeader(makeBatch(t, 3, 50, 1_700_000_000_000), 1)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, info.Position)
	}
	_ = l.Close()
	p := segment.Path(dir, 0, segment.LogSuffix)
	b, _ := os.ReadFile(p)
	batch.View(b[pos[2]:]).SetPartitionLeaderEpoch(999) // not covered by the CRC
	_ = os.WriteFile(p, b, 0o644)

	l2, err := Open(dir, opts) // unclean: recovery from the start
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	t.Logf("LEO %d epochs %v", l2.LogEndOffset(), l2.LeaderEpochs())
	if rep := l2.RecoveryReport(); rep != nil {
		for _, n := range rep.Notes {
			t.Logf("note: %s", n.Detail)
		}
	}
	if _, err := l2.AppendAsLeader(makeBatch(t, 3, 50, 1_700_000_000_000), 2); err != nil {
		t.Errorf("leader append at epoch 2 after recovery: %v", err)
	}
}
