package mirror

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

var allStates = []State{StateNone, StateLogAlignment, StateEpochFencing, StateULERecovery, StateMirroring,
	StatePausing, StatePaused, StateStopping, StateStopped, StateFailed}

// specTransitions is the "Allowed transitions" table of mirror.md §2.2,
// as written there (target <- sources).
const specTransitions = `
LOG_ALIGNMENT <- NONE STOPPED FAILED
EPOCH_FENCING <- LOG_ALIGNMENT MIRRORING
MIRRORING <- LOG_ALIGNMENT EPOCH_FENCING PAUSED FAILED
PAUSING <- MIRRORING
PAUSED <- PAUSING
STOPPING <- LOG_ALIGNMENT EPOCH_FENCING MIRRORING PAUSING PAUSED FAILED
STOPPED <- STOPPING
`

// TestTransitions checks every (from, to) pair against the spec table:
// same-state is a no-op, FAILED is reachable from anywhere, nothing else.
func TestTransitions(t *testing.T) {
	allowed := map[[2]string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(specTransitions), "\n") {
		to, froms, _ := strings.Cut(line, " <- ")
		for _, from := range strings.Fields(froms) {
			allowed[[2]string{from, to}] = true
		}
	}
	for _, from := range allStates {
		for _, to := range allStates {
			want := from == to || to == StateFailed || allowed[[2]string{from.String(), to.String()}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("%s -> %s: %v, want %v", from, to, got, want)
			}
		}
	}
}

// forceState puts p in state s in memory only (white box), to test the
// rules that depend on nothing but the state.
func forceState(p *Partition, s State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cp.State, p.cp.Step = s, StepNone
	p.localEpoch = 100 // no epoch fencing in these tests
	if s == StateLogAlignment || s == StateStopping {
		p.cp.Step = StepIntent
	}
	if s == StateFailed {
		p.failure = &FailedError{Op: "test", Reason: errors.New("forced")}
	}
	p.publish()
}

// TestAppendRules is the table of mirror.md §2.3: per state and origin,
// accepted or refused with the typed error, and nothing written when
// refused. (MirrorControl appends are made only by Stop, in STOPPING.)
func TestAppendRules(t *testing.T) {
	type origin struct {
		name   string
		append func(p *Partition) (partlog.AppendInfo, error)
		okIn   func(State) bool
		refuse error
	}
	follower := func() []byte {
		b := dataBatch(t, 3, 0, 0, 1, false, batch.CompressionNone)
		batch.View(b).SetPartitionLeaderEpoch(2) // offsets 0, epoch 2: CRC unaffected
		return b
	}
	origins := []origin{
		{"Client", func(p *Partition) (partlog.AppendInfo, error) {
			return p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 0)
		}, func(s State) bool { return !s.ReadOnly() }, ErrReadOnly},
		{"Coordinator", func(p *Partition) (partlog.AppendInfo, error) {
			return p.AppendCoordinator(marker(5, 0, false, 0), 0)
		}, func(s State) bool { return !s.ReadOnly() }, ErrReadOnly},
		{"Replication", func(p *Partition) (partlog.AppendInfo, error) { return p.AppendFollower(follower()) },
			func(State) bool { return true }, nil},
		{"Mirror", func(p *Partition) (partlog.AppendInfo, error) { return p.AppendMirror(p.Session(), follower()) },
			func(s State) bool { return s == StateMirroring }, ErrNotMirroring},
	}
	for _, s := range allStates {
		for _, o := range origins {
			t.Run(s.String()+"/"+o.name, func(t *testing.T) {
				p := newPartition(t)
				forceState(p, s)
				_, err := o.append(p)
				if o.okIn(s) {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if !errors.Is(err, o.refuse) {
					t.Fatalf("err %v, want %v", err, o.refuse)
				}
				if p.Log().LogEndOffset() != 0 {
					t.Fatal("a refused append wrote")
				}
				mustState(t, p, s)
			})
		}
	}
}

// TestT04ClientControlBatch: a client append carrying a barrier is
// refused with log and producer state unchanged.
func TestT04ClientControlBatch(t *testing.T) {
	p := newPartition(t)
	if _, err := p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 0); err != nil {
		t.Fatal(err)
	}
	cb := batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1}, "X")
	if _, err := p.AppendClient(cb, 0); !errors.Is(err, partlog.ErrPolicy) {
		t.Fatalf("err %v", err)
	}
	if p.Log().LogEndOffset() != 1 || len(p.Log().Producers()) != 1 {
		t.Fatal("log or producer state changed")
	}
}

// mirroring returns a source A (epoch 3) with 3 batches of producer 5 and
// a destination B mirroring it (local epoch 13), caught up.
func mirroring(t *testing.T) (a, b *cluster, s SessionID) {
	t.Helper()
	a, b = newCluster(t, "A", 3), newCluster(t, "B", 0)
	for i := int32(0); i < 3; i++ {
		a.produce(5, 0, i, 1, false)
	}
	s, err := b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourceLeaderEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	pump(t, b.p, s, a.log())
	return a, b, s
}

func fetch(t *testing.T, l *partlog.Log, from int64) []byte {
	t.Helper()
	v, err := l.Read(from, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	return bytes.Clone(v.Records)
}

// TestT07BadFetchFails: fetched bytes that fail validation move the
// partition to FAILED and leave the log byte-identical; Resume retries.
func TestT07BadFetchFails(t *testing.T) {
	cases := []struct {
		name string
		make func(a *partlog.Log) []byte
		want error
	}{
		{"T07 starts below LEO", func(a *partlog.Log) []byte { return fetch(t, a, 1) }, partlog.ErrUnexpectedOffset},
		{"CRC flipped", func(a *partlog.Log) []byte {
			b := fetch(t, a, 3)
			b[len(b)-1] ^= 0xff
			return b
		}, partlog.ErrInvalidRecords},
		{"torn", func(a *partlog.Log) []byte { b := fetch(t, a, 3); return b[:len(b)-3] }, partlog.ErrInvalidRecords},
		{"offsets not increasing", func(a *partlog.Log) []byte {
			b := fetch(t, a, 3)
			second := batch.View(b[batch.View(b).Size():])
			second.SetBaseOffset(3) // outside the CRC
			return b
		}, partlog.ErrUnexpectedOffset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b, s := mirroring(t)
			a.produce(5, 0, 3, 1, false)
			a.produce(5, 0, 4, 1, false)
			before := readAll(t, b.log(), 0)
			leo := b.log().LogEndOffset()
			_, err := b.p.AppendMirror(s, tc.make(a.log()))
			if !errors.Is(err, ErrFailed) || !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want ErrFailed wrapping %v", err, tc.want)
			}
			mustState(t, b.p, StateFailed)
			if !errors.Is(b.p.Failure(), tc.want) {
				t.Fatalf("failure %v", b.p.Failure())
			}
			if b.log().LogEndOffset() != leo || !bytes.Equal(before, readAll(t, b.log(), 0)) {
				t.Fatal("log changed")
			}
			if _, err := b.p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 20); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("client append while FAILED: %v", err)
			}
			if s2, err := b.p.Resume(); err != nil || s2 != s {
				t.Fatalf("resume: %v %v", s2, err)
			}
			pump(t, b.p, s, a.log())
			if !bytes.Equal(readAll(t, a.log(), 0), readAll(t, b.log(), 0)) {
				t.Fatal("not equal after the retry")
			}
		})
	}
}

// TestT29CorruptCheckpoint: a damaged mirror.checkpoint leaves the
// partition FAILED and read-only with the reason; the file is kept as
// evidence until an operator starts or stops a session.
func TestT29CorruptCheckpoint(t *testing.T) {
	_, b, _ := mirroring(t)
	if _, err := b.p.Stop(bg, TruncateLSO); err != nil {
		t.Fatal(err)
	}
	dir := b.log().Dir()
	path := filepath.Join(dir, CheckpointFile)
	data, _ := os.ReadFile(path)
	data[20] ^= 0x04
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.log().Close(); err != nil {
		t.Fatal(err)
	}
	p := openPartition(t, openLog(t, dir), Options{})
	mustState(t, p, StateFailed)
	var ce *CheckpointError
	if !errors.As(p.Failure(), &ce) || !strings.Contains(ce.Reason, "crc32c") || ce.Path != path {
		t.Fatalf("failure %v", p.Failure())
	}
	_, err := p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 20)
	if !errors.Is(err, ErrReadOnly) || !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("append: %v", err)
	}
	if _, err := p.Resume(); !errors.Is(err, ErrTransition) {
		t.Fatalf("resume: %v", err)
	}
	if _, err := p.LastMirrorPosition("A", topic, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("position: %v", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, data) {
		t.Fatal("the corrupt file was rewritten")
	}
	// The operator stops: a barrier is written (unknown source: empty id).
	if _, err := p.Stop(bg, TruncateLSO); err != nil {
		t.Fatal(err)
	}
	mustState(t, p, StateStopped)
	if n := len(barrierOffsets(t, p.Log())); n != 2 {
		t.Fatalf("%d barriers, want the old and the new", n)
	}
}

// TestT54PauseResume: pausing and resuming truncates nothing, keeps the
// producer state, and fetching goes on from LEO in the same session.
func TestT54PauseResume(t *testing.T) {
	a, b, s := mirroring(t)
	if err := b.p.Pause(); err != nil {
		t.Fatal(err)
	}
	mustState(t, b.p, StatePaused)
	if err := b.p.Pause(); err != nil { // same state: no-op
		t.Fatal(err)
	}
	a.produce(5, 0, 3, 1, false)
	if _, err := b.p.AppendMirror(s, fetch(t, a.log(), 3)); !errors.Is(err, ErrNotMirroring) {
		t.Fatalf("append while paused: %v", err)
	}
	if _, err := b.p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 20); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("client while paused: %v", err)
	}
	// A restart while PAUSING comes back PAUSED.
	dir := b.log().Dir()
	next := b.p.Checkpoint()
	next.State = StatePausing
	if err := WriteCheckpoint(dir, &next); err != nil {
		t.Fatal(err)
	}
	if err := b.log().Close(); err != nil {
		t.Fatal(err)
	}
	b.p = openPartition(t, openLog(t, dir), Options{LeaderEpoch: 13})
	mustState(t, b.p, StatePaused)
	s2, err := b.p.Resume()
	if err != nil || s2 != s {
		t.Fatalf("resume: %v %v", s2, err)
	}
	if b.log().LogEndOffset() != 3 {
		t.Fatal("truncated on resume")
	}
	checkProducers(t, "PSM after resume", b.log(), map[int64]int32{5: 2})
	pump(t, b.p, s, a.log())
	checkProducers(t, "PSM after fetch", b.log(), map[int64]int32{5: 3})
	// Operations refused by the table.
	if _, err := newPartition(t).Resume(); !errors.Is(err, ErrTransition) {
		t.Fatalf("resume of an ordinary partition: %v", err)
	}
	if err := newPartition(t).Pause(); !errors.Is(err, ErrTransition) {
		t.Fatalf("pause of an ordinary partition: %v", err)
	}
	if _, err := newPartition(t).Stop(bg, TruncateLSO); !errors.Is(err, ErrTransition) {
		t.Fatalf("stop of an ordinary partition: %v", err)
	}
}

// TestT09EpochFencing: a fetched batch above the local epoch is not
// stored; the partition fences to source+10 and stores it on redelivery.
// One within 3 of the local epoch bumps proactively and is stored.
func TestT09EpochFencing(t *testing.T) {
	a, b, s := mirroring(t)
	a.epoch = 20
	a.produce(5, 0, 3, 1, false)
	chunk := fetch(t, a.log(), 3)
	leo := b.log().LogEndOffset()
	if _, err := b.p.AppendMirror(s, chunk); !errors.Is(err, ErrEpochFenced) {
		t.Fatalf("err %v", err)
	}
	if b.log().LogEndOffset() != leo || b.p.LeaderEpoch() != 30 {
		t.Fatalf("LEO %d epoch %d", b.log().LogEndOffset(), b.p.LeaderEpoch())
	}
	mustState(t, b.p, StateMirroring)
	if _, err := b.p.AppendMirror(s, chunk); err != nil {
		t.Fatal(err)
	}
	a.epoch = 28 // 28 > 30-3: proactive bump, stored
	a.produce(5, 0, 4, 1, false)
	if _, err := b.p.AppendMirror(s, fetch(t, a.log(), 4)); err != nil {
		t.Fatal(err)
	}
	if b.p.LeaderEpoch() != 38 || b.log().LogEndOffset() != 5 {
		t.Fatalf("epoch %d LEO %d", b.p.LeaderEpoch(), b.log().LogEndOffset())
	}
	res, err := b.p.Stop(bg, TruncateLSO)
	if err != nil || res.StopLeaderEpoch != 39 || res.LastMirrorEpoch != 28 {
		t.Fatalf("stop %+v %v", res, err)
	}
}

// TestT05T08T10BytesOffsetsGaps: compressed, transactional, plain and
// compacted (offset gaps) batches are stored byte for byte at the same
// offsets.
func TestT05T08T10BytesOffsetsGaps(t *testing.T) {
	a := newCluster(t, "A", 3)
	var bl batch.Builder
	bl.ExplicitOffsetDeltas = true
	var src []byte
	base := int64(0)
	add := func(comp batch.Compression, pid int64, txn bool, deltas ...int32) {
		spec := batch.NewBatchSpec(base)
		spec.PartitionLeaderEpoch, spec.Compression, spec.Transactional = 3, comp, txn
		if pid >= 0 {
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, 0, int32(base)
		}
		var recs []batch.RecordSpec
		for _, d := range deltas {
			recs = append(recs, batch.RecordSpec{OffsetDelta: d, Timestamp: 1, Value: bytes.Repeat([]byte("v"), 100)})
		}
		var err error
		if src, err = bl.AppendBatch(src, &spec, recs); err != nil {
			t.Fatal(err)
		}
		base += int64(deltas[len(deltas)-1]) + 5 // a gap after each batch
	}
	add(batch.CompressionNone, -1, false, 0, 1)
	add(batch.CompressionGzip, 5, false, 0, 2, 3)
	add(batch.CompressionZstd, 7, true, 0)
	add(batch.CompressionLZ4, -1, false, 1, 4)
	if _, err := a.p.AppendFollower(src); err != nil { // A as a follower keeps the offsets
		t.Fatal(err)
	}
	a.log().SetHighWatermark(a.log().LogEndOffset())
	b := newCluster(t, "B", 0)
	s, err := b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourceLeaderEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	pump(t, b.p, s, a.log())
	if !bytes.Equal(readAll(t, b.log(), 0), src) {
		t.Fatal("B's bytes differ from A's")
	}
	if b.log().LogEndOffset() != a.log().LogEndOffset() {
		t.Fatal("log ends differ")
	}
}

// TestT03UnknownBarrierVersion: a type-7 batch with Version 1 and an
// unknown tagged field is stored as is by Mirror and still empties the
// producer state.
func TestT03UnknownBarrierVersion(t *testing.T) {
	a, b, s := mirroring(t)
	value := []byte{0x00, 0x01, 0x02, 'X', 0x01, 0x05, 0x01, 'z'}
	cb := batch.AppendControlBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: 1, ProducerID: -1, ProducerEpoch: -1},
		batch.ControlMirrorPidReset, false, value)
	if _, err := a.log().AppendAsCoordinator(cb, 3); err != nil {
		t.Fatal(err)
	}
	a.log().SetHighWatermark(a.log().LogEndOffset())
	pump(t, b.p, s, a.log())
	if !bytes.Equal(readAll(t, a.log(), 0), readAll(t, b.log(), 0)) {
		t.Fatal("not byte-identical")
	}
	checkProducers(t, "after the v1 barrier", b.log(), nil)
	mustState(t, b.p, StateMirroring)
}

// TestT14BarrierInOneChunk: [7(A)] [CB] [5(B)] fetched in one chunk
// leaves only 5(B).
func TestT14BarrierInOneChunk(t *testing.T) {
	a := newCluster(t, "A", 3)
	a.produce(7, 0, 0, 1, false)
	cb := batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: 1}, "Z")
	if _, err := a.log().AppendAsCoordinator(cb, 3); err != nil {
		t.Fatal(err)
	}
	a.produce(5, 0, 0, 1, false)
	b := newCluster(t, "B", 0)
	s, err := b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourceLeaderEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.p.AppendMirror(s, fetch(t, a.log(), 0)); err != nil {
		t.Fatal(err)
	}
	checkProducers(t, "after the chunk", b.log(), map[int64]int32{5: 0})
}

// TestT55SourceLogStartPastLEO: the source's log start moved past B's
// LEO: B restarts empty there and continues.
func TestT55SourceLogStartPastLEO(t *testing.T) {
	a, b, s := mirroring(t)
	for i := int32(3); i < 10; i++ {
		a.produce(5, 0, i, 1, false)
	}
	if err := a.log().SetLogStartOffset(8); err != nil {
		t.Fatal(err)
	}
	if err := b.p.AdvanceLogStart(s, a.log().LogStartOffset()); err != nil {
		t.Fatal(err)
	}
	if b.log().LogStartOffset() != 8 || b.log().LogEndOffset() != 8 || len(b.log().Producers()) != 0 {
		t.Fatalf("start %d end %d producers %d", b.log().LogStartOffset(), b.log().LogEndOffset(), len(b.log().Producers()))
	}
	pump(t, b.p, s, a.log())
	if !bytes.Equal(readAll(t, a.log(), 8), readAll(t, b.log(), 8)) {
		t.Fatal("not equal from 8")
	}
	if err := b.p.AdvanceLogStart(s-1, 9); !errors.Is(err, ErrFencedSession) {
		t.Fatalf("old session: %v", err)
	}
}

// TestT58SecondSource_T35Loop: a second source for a mirroring partition
// and a loop are refused without any change.
func TestT58SecondSource_T35Loop(t *testing.T) {
	_, b, s := mirroring(t)
	if _, err := b.p.Start(StartRequest{SourceClusterID: "C", TopicID: topic}); !errors.Is(err, ErrTransition) {
		t.Fatalf("second source: %v", err)
	}
	if b.p.Session() != s || b.p.Checkpoint().SourceClusterID != "A" {
		t.Fatal("state changed")
	}
	mustState(t, b.p, StateMirroring)
	p := newPartition(t)
	if _, err := p.Start(StartRequest{SourceClusterID: "B", SourceMirrorsFromUs: true}); !errors.Is(err, ErrLoop) {
		t.Fatalf("loop: %v", err)
	}
	mustState(t, p, StateNone)
	if _, err := os.Stat(filepath.Join(p.Log().Dir(), CheckpointFile)); !os.IsNotExist(err) {
		t.Fatal("a refused start wrote a checkpoint")
	}
}

// TestULERecoveryFails: a checkpoint in ULE_RECOVERY (out of scope)
// opens FAILED.
func TestULERecoveryFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := openLog(t, dir)
	c := newCheckpoint()
	c.State = StateULERecovery
	if err := WriteCheckpoint(dir, &c); err != nil {
		t.Fatal(err)
	}
	p := openPartition(t, l, Options{})
	mustState(t, p, StateFailed)
	if p.Failure() == nil {
		t.Fatal("no reason")
	}
}

// TestSourceLogStartInsideBatch: the source's log start is inside a
// batch (DeleteRecords). B restarts empty at it and is then sent the
// batch holding it, which begins below: the empty log restarts at the
// batch's base offset and takes it. A log with data refuses such a batch
// (FAILED), as before.
func TestSourceLogStartInsideBatch(t *testing.T) {
	a, b, s := mirroring(t)
	a.produce(5, 0, 3, 4, false) // one batch [3, 7)
	a.produce(5, 0, 7, 2, false) // [7, 9)
	if err := a.log().SetLogStartOffset(5); err != nil {
		t.Fatal(err)
	}
	if err := b.p.AdvanceLogStart(s, a.log().LogStartOffset()); err != nil {
		t.Fatal(err)
	}
	if b.log().LogStartOffset() != 5 || b.log().LogEndOffset() != 5 {
		t.Fatalf("start %d end %d", b.log().LogStartOffset(), b.log().LogEndOffset())
	}
	pump(t, b.p, s, a.log())
	if b.log().LogEndOffset() != 9 || !bytes.Equal(readAll(t, a.log(), 5), readAll(t, b.log(), 5)) {
		t.Fatalf("end %d; bytes from 5 differ", b.log().LogEndOffset())
	}
	if err := b.p.AdvanceLogStart(s, 5); err != nil || b.log().LogStartOffset() != 5 {
		t.Fatalf("log start %d: %v", b.log().LogStartOffset(), err)
	}
	// With data in the log, a batch beginning below its end is refused.
	if _, err := b.p.AppendMirror(s, fetch(t, a.log(), 7)); err == nil {
		t.Fatal("a batch below the log end of a log with data was appended")
	}
	mustState(t, b.p, StateFailed)
}
