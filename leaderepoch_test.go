package partlog

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/partlog/partlog/internal/checkpoint"
)

// TestEndOffsetForEpoch is Kafka's LeaderEpochFileCache.endOffsetFor table
// on a log with epochs 2@0, 4@10, 7@25 and log end 40.
func TestEndOffsetForEpoch(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	if e, o := l.EndOffsetForEpoch(0); e != UndefinedEpoch || o != UndefinedEpochOffset {
		t.Fatalf("empty cache: %d, %d", e, o)
	}
	for _, step := range []struct {
		epoch int32
		n     int
	}{{2, 10}, {4, 15}, {7, 15}} {
		for i := 0; i < step.n; i++ {
			if _, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1000), step.epoch); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name      string
		req       int32
		wantEpoch int32
		wantOff   int64
	}{
		{"undefined", -1, -1, -1},
		{"below the first epoch", 1, 1, 0},
		{"first epoch", 2, 2, 10},
		{"between known epochs", 3, 2, 10},
		{"middle epoch", 4, 4, 25},
		{"between middle and latest", 6, 4, 25},
		{"latest epoch: the log end", 7, 7, 40},
		{"above the latest", 8, -1, -1},
	} {
		e, o := l.EndOffsetForEpoch(c.req)
		if e != c.wantEpoch || o != c.wantOff {
			t.Errorf("%s: EndOffsetForEpoch(%d) = %d, %d; want %d, %d", c.name, c.req, e, o, c.wantEpoch, c.wantOff)
		}
	}
	// A follower of a leader whose epoch 4 ended at 20 truncates there.
	if leo, err := l.TruncateAt(20); err != nil || leo != 20 {
		t.Fatalf("TruncateAt(20) = %d, %v", leo, err)
	}
	if e, o := l.EndOffsetForEpoch(4); e != 4 || o != 20 {
		t.Fatalf("after truncation: %d, %d", e, o)
	}
	if e, o := l.EndOffsetForEpoch(7); e != -1 || o != -1 {
		t.Fatalf("after truncation, epoch 7: %d, %d", e, o)
	}
	if n := testing.AllocsPerRun(100, func() { l.EndOffsetForEpoch(3) }); n != 0 {
		t.Errorf("EndOffsetForEpoch allocates %v times", n)
	}
}

// TestAssignLeaderEpoch: a leader taking a partition records its epoch at
// the log end (Kafka's Partition.makeLeader), in the cache and the
// checkpoint, before any append in it; an epoch not above the latest is
// ignored, and a closed log refuses.
func TestAssignLeaderEpoch(t *testing.T) {
	l, dir := openTestLog(t, smallOpts(t))
	if err := l.AssignLeaderEpoch(0); err != nil {
		t.Fatal(err)
	}
	if got := l.LeaderEpochs(); !slices.Equal(got, []EpochEntry{{Epoch: 0, StartOffset: 0}}) {
		t.Fatalf("fresh log: epochs %v", got)
	}
	if _, err := l.AppendAsLeader(makeBatch(t, 3, 10, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignLeaderEpoch(2); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignLeaderEpoch(1); err != nil {
		t.Fatal(err)
	}
	want := []EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 3}}
	if got := l.LeaderEpochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	onDisk, err := checkpoint.ReadLeaderEpochs(filepath.Join(dir, checkpoint.LeaderEpochFile))
	if err != nil || !slices.Equal(onDisk, want) {
		t.Fatalf("checkpoint %v (%v), want %v", onDisk, err, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignLeaderEpoch(3); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed log: %v", err)
	}
}
