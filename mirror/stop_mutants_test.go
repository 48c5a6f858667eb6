package mirror

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/testhook"
)

// TestStopTxnOpenAtOffsetZero: a transaction open from offset 0 of the
// mirrored log is an open transaction like any other: ABORT_OPEN writes
// its marker and TRUNCATE_LSO truncates the log to 0.
func TestStopTxnOpenAtOffsetZero(t *testing.T) {
	for _, policy := range []StopPolicy{TruncateLSO, AbortOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			a := newCluster(t, "A", 3)
			a.produce(9, 0, 0, 2, true) // offsets 0..1, left open
			a.produce(5, 0, 0, 1, false)
			l := openLog(t, filepath.Join(t.TempDir(), "B", "t-0"))
			b := &cluster{t: t, id: "B", p: openPartition(t, l, Options{})}
			s, err := b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourceLeaderEpoch: 3})
			if err != nil {
				t.Fatal(err)
			}
			pump(t, b.p, s, a.log())
			res, err := b.p.Stop(bg, policy)
			if err != nil {
				t.Fatal(err)
			}
			switch policy {
			case TruncateLSO:
				if res.LastMirrorOffset != 0 || len(res.Truncated) != 1 || res.Truncated[0].ProducerID != 9 || res.Truncated[0].FirstOffset != 0 {
					t.Fatalf("result %+v: want the log truncated to 0 and producer 9's transaction listed", res)
				}
			case AbortOpen:
				if len(res.Aborted) != 1 || res.Aborted[0].ProducerID != 9 || res.Aborted[0].FirstOffset != 0 {
					t.Fatalf("result %+v: want an ABORT for producer 9's transaction at 0", res)
				}
			}
			mustState(t, b.p, StateStopped)
			if got := b.log().Producers(); len(got) != 0 {
				t.Fatalf("producers after the stop: %+v", got)
			}
		})
	}
}

// TestStopFromFailedKeepsPosition: a partition that went FAILED after
// this session recorded its position resumes the stop at S4 with that
// position and policy when Stop is called again, whatever policy the new
// call names: S2 and S3 are not redone over what is in the log now.
func TestStopFromFailedKeepsPosition(t *testing.T) {
	f := newStopFixture(t, Options{crash: func(pt crashPoint) bool { return pt == crashStopPositionRecorded }})
	if _, err := f.b.p.Stop(bg, AbortOpen); !errors.Is(err, ErrCrashed) {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image")
	copyDir(t, f.mirrorDir, dir)
	l := openLog(t, dir)
	if err := l.TruncateTo(f.firstOpen); err != nil { // the disk lost the tail
		t.Fatal(err)
	}
	p := openPartition(t, l, Options{})
	mustState(t, p, StateFailed)
	recorded := p.Checkpoint()
	if _, err := p.Stop(bg, TruncateLSO); !errors.Is(err, ErrPositionLost) {
		t.Fatalf("Stop from FAILED with the position lost: %v, want ErrPositionLost", err)
	}
	c := p.Checkpoint()
	if c.LastMirrorOffset != recorded.LastMirrorOffset || c.StopPolicy != AbortOpen {
		t.Fatalf("checkpoint after the second Stop: LMO %d policy %s; want the recorded %d and ABORT_OPEN",
			c.LastMirrorOffset, c.StopPolicy, recorded.LastMirrorOffset)
	}
	if n := len(barrierOffsets(t, l)); n != 0 {
		t.Fatalf("%d barriers written over a lost position", n)
	}
}

// markerCoordinatorEpochs returns producer id → coordinator epoch of
// every ABORT or COMMIT marker of l at or after from.
func markerCoordinatorEpochs(t *testing.T, l *partlog.Log, from int64) map[int64]int32 {
	t.Helper()
	out := map[int64]int32{}
	for _, v := range batches(t, l) {
		if v.BaseOffset() < from || !v.IsControl() || v.IsBarrier() {
			continue
		}
		data, err := v.RecordData(nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var rec batch.Record
		it := batch.NewRecordIterator(v, data)
		if !it.Next(&rec) {
			t.Fatalf("marker at %d has no record: %v", v.BaseOffset(), it.Err())
		}
		m, err := batch.ParseEndTxnMarker(rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[v.ProducerID()] = m.CoordinatorEpoch
	}
	return out
}

// TestStopAbortMarkersAndEpochs: the ABORT markers of ABORT_OPEN carry
// each producer's coordinator epoch (0 when it never had a marker); after
// the stop the partition's leader epoch is E_stop and the high watermark
// covers the markers and the barrier (one replica).
func TestStopAbortMarkersAndEpochs(t *testing.T) {
	a := newCluster(t, "A", 3)
	a.produce(9, 0, 0, 1, true)
	if _, err := a.p.AppendCoordinator(marker(9, 0, true, 5), a.epoch); err != nil {
		t.Fatal(err)
	}
	a.produce(9, 0, 1, 1, true) // 9's next transaction, left open
	a.produce(11, 0, 0, 1, true)
	a.log().SetHighWatermark(a.log().LogEndOffset())
	l := openLog(t, filepath.Join(t.TempDir(), "B", "t-0"))
	b := &cluster{t: t, id: "B", p: openPartition(t, l, Options{})}
	s, err := b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourceLeaderEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	pump(t, b.p, s, a.log())
	end := l.LogEndOffset()
	res, err := b.p.Stop(bg, AbortOpen)
	if err != nil {
		t.Fatal(err)
	}
	if got := markerCoordinatorEpochs(t, l, end); len(got) != 2 || got[9] != 5 || got[11] != 0 {
		t.Fatalf("ABORT markers' coordinator epochs %v, want 9:5 and 11:0", got)
	}
	if e := b.p.LeaderEpoch(); e != res.StopLeaderEpoch {
		t.Fatalf("leader epoch %d after the stop, want E_stop %d", e, res.StopLeaderEpoch)
	}
	if hw, leo := l.HighWatermark(), l.LogEndOffset(); hw != leo {
		t.Fatalf("high watermark %d after the stop, want the log end %d", hw, leo)
	}
}

// TestStopAfterBarrierFsyncFailure: the fsync after the barrier append
// fails, so the partition goes FAILED with the barrier in the log but
// not recorded. After a restart (page cache kept), Stop resumes from the
// recorded position, finds that barrier instead of writing a second one,
// and says so.
func TestStopAfterBarrierFsyncFailure(t *testing.T) {
	var f *stopFixture
	var armed atomic.Bool
	boom := errors.New("injected fsync failure")
	fault := func(dir string) error {
		if armed.Load() && dir == f.mirrorDir {
			return boom
		}
		return nil
	}
	if !testhook.LogFlushFault.CompareAndSwap(nil, &fault) {
		t.Fatal("testhook.LogFlushFault is already set")
	}
	t.Cleanup(func() { testhook.LogFlushFault.Store(nil) })
	f = newStopFixture(t, Options{crash: func(pt crashPoint) bool {
		if pt == crashStopAbortsWritten {
			armed.Store(true) // the next flush is the barrier's
		}
		return false
	}})
	if _, err := f.b.p.Stop(bg, TruncateLSO); !errors.Is(err, boom) {
		t.Fatalf("stop with the barrier's fsync failing: %v, want the fsync error", err)
	}
	mustState(t, f.b.p, StateFailed)
	if n := len(barrierOffsets(t, f.b.log())); n != 1 {
		t.Fatalf("%d barriers in the log after the failed fsync, want 1", n)
	}
	armed.Store(false)
	image := filepath.Join(t.TempDir(), "image")
	copyDir(t, f.mirrorDir, image)
	p := openPartition(t, openLog(t, image), Options{LeaderEpoch: 13})
	mustState(t, p, StateFailed)
	res, err := p.Stop(bg, TruncateLSO)
	if err != nil {
		t.Fatalf("Stop after the restart: %v", err)
	}
	if !res.BarrierFound {
		t.Fatalf("result %+v: the barrier already in the log was not reported as found", res)
	}
	checkStopped(t, p, TruncateLSO, f.firstOpen, f.mirrorEnd)
}
