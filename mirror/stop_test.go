package mirror

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/internal/testutil"
)

// stopFixture is a source A (epoch 3) with plain and idempotent batches,
// a committed transaction of 7, open transactions of 9 and 11 (9 first),
// and a later batch of 5; and a destination B (MIRRORING, local epoch 13)
// that mirrored all of it.
type stopFixture struct {
	a, b       *cluster
	session    SessionID
	firstOpen  int64 // first offset of 9's transaction
	mirrorEnd  int64 // A's LEO = B's LEO before the stop
	opts       Options
	mirrorDir  string
	crashCount map[crashPoint]int
}

func newStopFixture(t *testing.T, opts Options) *stopFixture {
	t.Helper()
	return newStopFixtureIn(t, opts, t.TempDir())
}

// newStopFixtureIn is newStopFixture with B's log under root/B.
func newStopFixtureIn(t *testing.T, opts Options, root string) *stopFixture {
	t.Helper()
	f := &stopFixture{a: newCluster(t, "A", 3), crashCount: map[crashPoint]int{}}
	a := f.a
	a.produce(-1, 0, 0, 2, false)
	a.produce(5, 0, 0, 1, false)
	a.produce(5, 0, 1, 2, false)
	a.produce(7, 0, 0, 1, true)
	a.endTxn(7, 0, true)
	f.firstOpen = a.produce(9, 0, 0, 1, true).FirstOffset
	a.produce(5, 0, 3, 1, false)
	a.produce(11, 2, 0, 1, true)
	a.produce(9, 0, 1, 1, true)
	a.produce(5, 0, 4, 1, false)
	f.mirrorEnd = a.log().LogEndOffset()

	opts.LeaderEpoch = 0
	l := openLog(t, filepath.Join(root, "B", "t-0"))
	f.b = &cluster{t: t, id: "B", p: openPartition(t, l, opts)}
	f.mirrorDir = l.Dir()
	s, err := f.b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourceLeaderEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	f.session = s
	pump(t, f.b.p, s, a.log())
	if f.b.p.LeaderEpoch() != 13 {
		t.Fatalf("local epoch %d", f.b.p.LeaderEpoch())
	}
	// The mirrored data is durable before the stop (a periodic flush); a
	// power failure before it would only lose a tail to fetch again.
	if err := f.b.log().Flush(); err != nil {
		t.Fatal(err)
	}
	open := openTxns(f.b.log())
	if len(open) != 2 || open[0].ProducerID != 9 || open[1].ProducerID != 11 {
		t.Fatalf("open transactions on B: %+v", open)
	}
	return f
}

// checkStopped asserts the end state of a stop: STOPPED, exactly one
// barrier, at E_stop, after the ABORT markers, carrying A, empty producer
// state, LSO = LEO, and a new local producer 5 accepted.
func checkStopped(t *testing.T, p *Partition, policy StopPolicy, firstOpen, mirrorEnd int64) {
	t.Helper()
	mustState(t, p, StateStopped)
	c := p.Checkpoint()
	l := p.Log()
	wantLMO := mirrorEnd
	if policy == TruncateLSO {
		wantLMO = firstOpen
	}
	if c.LastMirrorOffset != wantLMO || c.LastMirrorEpoch != 3 || c.StopLeaderEpoch != 14 || c.StopPolicy != policy {
		t.Fatalf("checkpoint %+v: want LMO %d, LME 3, E_stop 14, policy %s", c, wantLMO, policy)
	}
	bs := barrierOffsets(t, l)
	if len(bs) != 1 || bs[0] != c.BarrierOffset || bs[0] < wantLMO {
		t.Fatalf("barriers %v, checkpoint barrier %d, LMO %d", bs, c.BarrierOffset, wantLMO)
	}
	var aborts []int64
	for _, b := range batches(t, l) {
		if b.BaseOffset() < wantLMO {
			continue
		}
		if b.PartitionLeaderEpoch() != 14 {
			t.Fatalf("batch at %d written at epoch %d, want E_stop 14", b.BaseOffset(), b.PartitionLeaderEpoch())
		}
		if !b.IsBarrier() {
			if b.BaseOffset() > c.BarrierOffset {
				t.Fatalf("batch at %d after the barrier", b.BaseOffset())
			}
			aborts = append(aborts, b.ProducerID())
		}
	}
	wantAborts := []int64(nil)
	if policy == AbortOpen {
		wantAborts = []int64{9, 11}
	}
	if !slices.Equal(aborts, wantAborts) {
		t.Fatalf("ABORT markers for %v, want %v", aborts, wantAborts)
	}
	if got := l.Producers(); len(got) != 0 {
		t.Fatalf("producers after the barrier: %+v", got)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if lso, leo := l.LastStableOffset(), l.LogEndOffset(); lso != leo {
		t.Fatalf("LSO %d, LEO %d", lso, leo)
	}
	checkEpochLine(t, p)
	// T27: a new local producer with PID 5, epoch 0, sequence 0 is stored.
	before := l.LogEndOffset()
	if _, err := p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 14); err != nil {
		t.Fatalf("client append after STOPPED: %v", err)
	}
	if l.LogEndOffset() != before+1 {
		t.Fatal("client append stored nothing")
	}
}

// TestT11T20T21Stop: a stop with each policy, without crashes.
func TestT11T20T21Stop(t *testing.T) {
	for _, policy := range []StopPolicy{TruncateLSO, AbortOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			f := newStopFixture(t, Options{})
			res, err := f.b.p.Stop(bg, policy)
			if err != nil {
				t.Fatal(err)
			}
			switch policy {
			case TruncateLSO: // T21
				if res.TruncatedFrom != f.mirrorEnd || len(res.Truncated) != 2 || res.LastMirrorOffset != f.firstOpen {
					t.Fatalf("result %+v", res)
				}
			case AbortOpen: // T20
				if len(res.Aborted) != 2 || res.Aborted[0].ProducerID != 9 || res.TruncatedFrom != -1 {
					t.Fatalf("result %+v", res)
				}
				// read_committed never sees 9's or 11's records.
				l := f.b.log()
				aborted, err := l.AbortedTransactions(0, l.LogEndOffset())
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, a := range aborted {
					got = append(got, a.ProducerID)
				}
				slices.Sort(got)
				if !slices.Equal(got, []int64{9, 11}) {
					t.Fatalf("aborted transactions %v", got)
				}
			}
			checkStopped(t, f.b.p, policy, f.firstOpen, f.mirrorEnd)
			// A second Stop is a no-op with the recorded result.
			again, err := f.b.p.Stop(bg, policy)
			if err != nil || again.BarrierOffset != res.BarrierOffset {
				t.Fatalf("second stop: %+v %v", again, err)
			}
			if n := len(barrierOffsets(t, f.b.log())); n != 1 {
				t.Fatalf("%d barriers after a second Stop", n)
			}
		})
	}
}

// stopCrashPoints are the crash points of STOPPING, with the hit at which
// to crash (the ABORT point is hit once per marker).
var stopCrashPoints = []struct {
	pt  crashPoint
	hit int
}{
	{crashStopIntent, 1},
	{crashStopTruncatedUnflushed, 1},
	{crashStopTruncated, 1},
	{crashStopPositionRecorded, 1},
	{crashStopEpochBumped, 1},
	{crashStopAbortAppended, 1},
	{crashStopAbortAppended, 2},
	{crashStopAbortsSynced, 1},
	{crashStopAbortsWritten, 1},
	{crashStopBarrierAppended, 1},
	{crashStopBarrierSynced, 1},
	{crashStopBarrierWritten, 1},
	{crashStopped, 1},
}

// stopNotReached lists, per policy, the crash points of stopCrashPoints
// that the policy never passes: TRUNCATE_LSO writes no ABORT marker, and
// ABORT_OPEN truncates nothing (its S2 flushes and goes straight to S3).
// Every other listed point must be reached, or TestStopCrashPoints fails.
var stopNotReached = map[StopPolicy][]crashPoint{
	TruncateLSO: {crashStopAbortAppended},
	AbortOpen:   {crashStopTruncatedUnflushed, crashStopTruncated},
}

// TestStopCrashPoints (T22-T27): for each policy, crash after every step
// of STOPPING (and between an append and its fsync), with three disk
// images each: the page cache survived (process crash), only what lies
// below the recovery point survived, or every segment file is as the
// log's last successful flush left it (power failure: a truncation or
// append not yet flushed is undone). Reopening the log and the partition
// must finish the stop with exactly one barrier, as a stop without crash
// does. A crash point the table expects but the stop does not pass fails
// the test (a renamed or moved point would otherwise go untested).
func TestStopCrashPoints(t *testing.T) {
	disk := trackFlushes(t)
	for _, policy := range []StopPolicy{TruncateLSO, AbortOpen} {
		for _, cp := range stopCrashPoints {
			for _, image := range []string{"cache", "synced", "flushed"} {
				name := fmt.Sprintf("%s/%s#%d/%s", policy, cp.pt, cp.hit, image)
				unreachable := slices.Contains(stopNotReached[policy], cp.pt)
				t.Run(name, func(t *testing.T) {
					imageDir := filepath.Join(t.TempDir(), "image")
					var f *stopFixture
					hits := 0
					crashed := false
					var lmoAtCrash int64 = -1
					var leoAtCrash int64 = -1
					var cpAtCrash Checkpoint
					opts := Options{crash: func(pt crashPoint) bool {
						if pt != cp.pt || crashed {
							return false
						}
						if hits++; hits != cp.hit {
							return false
						}
						crashed = true
						lmoAtCrash = f.b.p.cp.LastMirrorOffset
						leoAtCrash, cpAtCrash = f.b.log().LogEndOffset(), f.b.p.cp
						switch image {
						case "cache":
							testutil.CopyTree(t, f.mirrorDir, imageDir)
						case "synced":
							syncedImage(t, f.b.log(), imageDir)
						default:
							disk.image(t, f.mirrorDir, imageDir)
						}
						return true
					}}
					f = newStopFixture(t, opts)
					_, err := f.b.p.Stop(bg, policy)
					if unreachable {
						if crashed {
							t.Fatalf("crash point %s reached with %s, which stopNotReached says it never passes", cp.pt, policy)
						}
						if err != nil {
							t.Fatalf("stop: %v", err)
						}
						return
					}
					if !crashed {
						t.Fatalf("crash point %s#%d not reached with %s (err %v)", cp.pt, cp.hit, policy, err)
					}
					if !errors.Is(err, ErrCrashed) {
						t.Fatalf("stop: %v, want ErrCrashed", err)
					}
					// The process died at the crash point: nothing after it ran.
					if leo := f.b.log().LogEndOffset(); leo != leoAtCrash || f.b.p.cp != cpAtCrash {
						t.Fatalf("after the crash point: log end %d (was %d), checkpoint %+v (was %+v)", leo, leoAtCrash, f.b.p.cp, cpAtCrash)
					}
					// T28: the crashed incarnation stays refused.
					if _, err := f.b.p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 14); err == nil {
						t.Fatal("append after the crash point succeeded")
					}
					l := openLog(t, imageDir)
					p := openPartition(t, l, Options{LeaderEpoch: 13}) // the broker's persisted epoch
					if p.State() != StateStopped {
						t.Fatalf("after restart: state %s step %s, failure %v", p.State(), p.Step(), p.Failure())
					}
					// T23: a recorded position is reused unchanged.
					if lmoAtCrash >= 0 && p.Checkpoint().LastMirrorOffset != lmoAtCrash {
						t.Fatalf("LMO %d after restart, recorded %d", p.Checkpoint().LastMirrorOffset, lmoAtCrash)
					}
					checkStopped(t, p, policy, f.firstOpen, f.mirrorEnd)
				})
			}
		}
	}
}

// TestT28StoppingRefusesAppends: at every step of STOPPING, Client and
// Coordinator appends are refused and mirror appends are fenced, and
// LastMirrorPosition answers "not ready".
func TestT28StoppingRefusesAppends(t *testing.T) {
	for _, policy := range []StopPolicy{TruncateLSO, AbortOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			var f *stopFixture
			seen := 0
			f = newStopFixture(t, Options{crash: func(pt crashPoint) bool {
				if f == nil {
					return false
				}
				p := f.b.p
				if p.cp.State != StateStopping {
					return false
				}
				seen++
				if err := p.checkWritableLocked(); !errors.Is(err, ErrReadOnly) {
					t.Errorf("%s: client append check: %v", pt, err)
				}
				if _, err := p.LastMirrorPosition("A", topic, 0); !errors.Is(err, ErrNotReady) {
					t.Errorf("%s: position lookup: %v", pt, err)
				}
				return false
			}})
			if _, err := f.b.p.Stop(bg, policy); err != nil {
				t.Fatal(err)
			}
			if seen < 5 {
				t.Fatalf("only %d steps observed", seen)
			}
		})
	}
}

// TestT30LateFetchAfterS1: a fetch response of the old session delivered
// after the stop began is discarded.
func TestT30LateFetchAfterS1(t *testing.T) {
	f := newStopFixture(t, Options{})
	f.a.produce(5, 0, 5, 1, false)
	v, err := f.a.log().Read(f.mirrorEnd, 1<<20, f.a.log().LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	late := slices.Clone(v.Records)
	v.Release()
	if _, err := f.b.p.Stop(bg, AbortOpen); err != nil {
		t.Fatal(err)
	}
	leo := f.b.log().LogEndOffset()
	_, err = f.b.p.AppendMirror(f.session, late)
	if !errors.Is(err, ErrNotMirroring) {
		t.Fatalf("late append: %v", err)
	}
	if f.b.log().LogEndOffset() != leo {
		t.Fatal("late fetch appended")
	}
	// And in a new session, the old session id is fenced.
	if _, err := f.b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourcePosition: Position{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.p.AppendMirror(f.session, late); !errors.Is(err, ErrFencedSession) {
		t.Fatalf("old session append: %v", err)
	}
	mustState(t, f.b.p, StateMirroring)
}

// TestStopPositionLost: a restart at POSITION_RECORDED whose log ends
// below the recorded LMO goes FAILED (mirror.md §2.8).
func TestStopPositionLost(t *testing.T) {
	var f *stopFixture
	f = newStopFixture(t, Options{crash: func(pt crashPoint) bool { return pt == crashStopPositionRecorded }})
	if _, err := f.b.p.Stop(bg, AbortOpen); !errors.Is(err, ErrCrashed) {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image")
	testutil.CopyTree(t, f.mirrorDir, dir)
	l := openLog(t, dir)
	if err := l.TruncateTo(f.firstOpen); err != nil { // the disk lost the tail
		t.Fatal(err)
	}
	p := openPartition(t, l, Options{})
	mustState(t, p, StateFailed)
	if !errors.Is(p.Failure(), ErrPositionLost) {
		t.Fatalf("failure %v", p.Failure())
	}
	if _, err := p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 20); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append: %v", err)
	}
	if n := len(barrierOffsets(t, l)); n != 0 {
		t.Fatalf("%d barriers", n)
	}
}

var _ = partlog.ErrClosed

// TestStopUnsafeNoBarrier: the test switch skips S6 only. The partition
// still ends STOPPED with its position recorded, but no barrier is in
// the log, barrier_offset stays -1 and the mirrored producers are still
// in the producer state (what the servers' barrier-off scenarios rely
// on); a restart does not add one either.
func TestStopUnsafeNoBarrier(t *testing.T) {
	f := newStopFixture(t, Options{UnsafeNoBarrier: true})
	res, err := f.b.p.Stop(bg, TruncateLSO)
	if err != nil {
		t.Fatal(err)
	}
	mustState(t, f.b.p, StateStopped)
	if res.BarrierOffset != -1 || res.LastMirrorOffset != f.firstOpen || len(barrierOffsets(t, f.b.log())) != 0 {
		t.Fatalf("result %+v, barriers %v", res, barrierOffsets(t, f.b.log()))
	}
	if _, ok := pids(f.b.log().Producers())[5]; !ok {
		t.Fatalf("producer 5 of A gone without a barrier: %+v", f.b.log().Producers())
	}
	l := f.b.log()
	dir := l.Dir()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	p := openPartition(t, openLog(t, dir), Options{UnsafeNoBarrier: true})
	mustState(t, p, StateStopped)
	if n := len(barrierOffsets(t, p.Log())); n != 0 {
		t.Fatalf("%d barriers after a restart", n)
	}
}

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
	testutil.CopyTree(t, f.mirrorDir, dir)
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
		it := v.Records(data)
		rec, ok := it.Next()
		if !ok {
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
	testutil.CopyTree(t, f.mirrorDir, image)
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
