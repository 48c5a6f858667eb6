package partlog

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/partlog/partlog/internal/checkpoint"
)

// TestHighWatermarkRestoredAtOpen: Options.HighWatermark (what OpenDir
// reads from replication-offset-checkpoint) is clamped to [log start,
// log end] at open.
func TestHighWatermarkRestoredAtOpen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, smallOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 10, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetLogStartOffset(4); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		hw, want  int64
		logStart  int64
		wantStart int64
	}{
		{"none", 0, 4, 4, 4},
		{"inside", 13, 13, 4, 4},
		{"at end", 20, 20, 4, 4},
		{"past end", 99, 20, 4, 4},
		{"below start", 2, 4, 4, 4},
	} {
		o := smallOpts(t)
		o.HighWatermark, o.LogStartOffset = c.hw, c.logStart
		l, err := Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		got := l.Offsets()
		if got.HighWatermark != c.want || got.LogStartOffset != c.wantStart || got.LastStableOffset != c.want || got.LogEndOffset != 20 {
			t.Errorf("%s: offsets %+v, want hw %d", c.name, got, c.want)
		}
		if l.HighWatermark() != c.want || l.LastStableOffset() != c.want {
			t.Errorf("%s: HighWatermark %d LastStableOffset %d", c.name, l.HighWatermark(), l.LastStableOffset())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	o := smallOpts(t)
	o.HighWatermark = -1
	if _, err := Open(dir, o); err == nil {
		t.Fatal("negative HighWatermark accepted")
	}
}

// TestDirPersistsHighWatermarks: Dir writes replication-offset-checkpoint
// (Kafka's format) and the high watermarks come back after a clean
// close and after a crash (no clean-shutdown marker).
func TestDirPersistsHighWatermarks(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	id := TopicID{1, 2, 3}
	hws := map[int32]int64{0: 3, 1: 7, 2: 0}
	for p, hw := range hws {
		l, err := d.Create("orders", p, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			if _, err := l.AppendAsLeader(makeBatch(t, 2, 10, 1000), 0); err != nil {
				t.Fatal(err)
			}
		}
		l.SetHighWatermark(hw)
	}
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.ReplicationOffsetFile))
	if err != nil {
		t.Fatal(err)
	}
	for p, hw := range hws {
		if got[TopicPartition{Topic: "orders", Partition: p}] != hw {
			t.Errorf("checkpoint %v, want %v", got, hws)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, crash := range []bool{false, true} {
		if crash {
			if err := os.Remove(filepath.Join(root, checkpoint.CleanShutdownFile)); err != nil {
				t.Fatal(err)
			}
		}
		d, err := OpenDir(root, dirOpts(t))
		if err != nil {
			t.Fatal(err)
		}
		for p, hw := range hws {
			l, ok := d.Log(TopicPartition{Topic: "orders", Partition: p})
			if !ok {
				t.Fatalf("partition %d missing: %+v", p, d.Problems())
			}
			if o := l.Offsets(); o.HighWatermark != hw || o.LogEndOffset != 8 {
				t.Errorf("crash %v: partition %d offsets %+v, want hw %d", crash, p, o, hw)
			}
			if l.TopicID() != id {
				t.Errorf("topic id %v", l.TopicID())
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOffsetsConsistent reads Offsets while appends, high-watermark
// moves, log-start moves and truncations run, and checks the invariants
// of every reading.
func TestOffsetsConsistent(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	src := makeBatch(t, 3, 50, 1000)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				o := l.Offsets()
				if !(o.LogStartOffset <= o.LastStableOffset && o.LastStableOffset <= o.HighWatermark &&
					o.HighWatermark <= o.LogEndOffset && o.RecoveryPoint <= o.LogEndOffset) {
					bad.Store(o)
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		if _, err := l.AppendAsLeader(src, 0); err != nil {
			t.Fatal(err)
		}
		switch i % 50 {
		case 10:
			l.SetHighWatermark(l.LogEndOffset() - 3)
		case 20:
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		case 30:
			if err := l.TruncateTo(l.LogEndOffset() - 6); err != nil {
				t.Fatal(err)
			}
		case 40:
			if err := l.SetLogStartOffset(l.HighWatermark()); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if o := bad.Load(); o != nil {
		t.Fatalf("inconsistent reading %+v", o)
	}
	if n := testing.AllocsPerRun(100, func() { _ = l.Offsets() }); n != 0 {
		t.Errorf("Offsets allocates %v times", n)
	}
}

// BenchmarkOffsets measures one consistent reading against the five
// separate loads it replaces.
func BenchmarkOffsets(b *testing.B) {
	l, _ := openTestLog(b, smallOpts(b))
	if _, err := l.AppendAsLeader(makeBatch(b, 3, 50, 1000), 0); err != nil {
		b.Fatal(err)
	}
	b.Run("Offsets", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = l.Offsets()
		}
	})
	b.Run("separate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _, _, _ = l.LogStartOffset(), l.HighWatermark(), l.LastStableOffset(), l.LogEndOffset(), l.RecoveryPoint()
		}
	})
}
