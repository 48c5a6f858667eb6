package mirror

import (
	"bytes"
	"errors"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

var topic, _ = ParseTopicID("ASNFZ4mrze8P7cuph2VDIQ")

// checkProducer fails unless l's producer state is exactly want
// (pid -> last sequence, all at producer epoch 0).
func checkProducers(t *testing.T, what string, l *partlog.Log, want map[int64]int32) {
	t.Helper()
	got := pids(l.Producers())
	if len(got) != len(want) {
		t.Fatalf("%s: producers %v, want %v", what, keys(got), want)
	}
	for pid, seq := range want {
		e, ok := got[pid]
		if !ok || e.LastSequence != seq || e.ProducerEpoch != 0 {
			t.Fatalf("%s: producer %d = %+v, want e0 s%d", what, pid, e, seq)
		}
	}
}

func keys(m map[int64]partlog.ProducerEntry) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkEpochLine checks I7 (T56): every batch at or after LMO carries an
// epoch above LME.
func checkEpochLine(t *testing.T, p *Partition) {
	t.Helper()
	c := p.Checkpoint()
	for _, b := range batches(t, p.Log()) {
		if b.BaseOffset() >= c.LastMirrorOffset && b.PartitionLeaderEpoch() <= c.LastMirrorEpoch {
			t.Fatalf("batch at %d has epoch %d, not above LME %d", b.BaseOffset(), b.PartitionLeaderEpoch(), c.LastMirrorEpoch)
		}
	}
}

func barrierSource(t *testing.T, l *partlog.Log, offset int64) string {
	t.Helper()
	for _, b := range batches(t, l) {
		if b.BaseOffset() == offset && b.IsBarrier() {
			data, err := b.RecordData(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			it := b.Records(data)
			r, ok := it.Next()
			if !ok {
				t.Fatal(it.Err())
			}
			m, err := batch.ParseMirrorPidReset(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			return m.SourceClusterID
		}
	}
	t.Fatalf("no barrier at %d", offset)
	return ""
}

// TestT36ActivePassive_T37Failback plays mirror.md §4.1 then §4.2 row by
// row (T36, T37), with T31 (A truncates to 3 and ends byte-equal to B),
// T34 (A's own barrier, B realigns to A's LMO), T11, T27, T56 and T57 on
// the way.
func TestT36ActivePassive_T37Failback(t *testing.T) {
	a, b := newCluster(t, "A", 3), newCluster(t, "B", 0)
	// 4.1 #1
	for s := int32(0); s < 3; s++ {
		a.produce(5, 0, s, 1, false)
	}
	// #2: A has no position for B -> target 0; epoch 13.
	sess, err := b.p.Start(StartRequest{MirrorName: "dr", SourceClusterID: "A", TopicID: topic, SourceLeaderEpoch: a.epoch})
	if err != nil {
		t.Fatal(err)
	}
	mustState(t, b.p, StateMirroring)
	if e := b.p.LeaderEpoch(); e != 13 {
		t.Fatalf("B local epoch %d, want 13", e)
	}
	// #3
	pump(t, b.p, sess, a.log())
	if !bytes.Equal(readAll(t, a.log(), 0), readAll(t, b.log(), 0)) {
		t.Fatal("B is not byte-identical to A")
	}
	checkProducers(t, "PSM(B) #3", b.log(), map[int64]int32{5: 2})
	// #4 (T06)
	if _, err := b.p.AppendClient(dataBatch(t, 5, 0, 0, 1, false, batch.CompressionNone), 13); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("client produce to a mirror: %v, want ErrReadOnly", err)
	}
	if b.log().LogEndOffset() != 3 {
		t.Fatal("B's LEO moved")
	}
	// #5: A writes s3, then is lost.
	a.produce(5, 0, 3, 1, false)
	// #6
	res, err := b.p.Stop(bg, AbortOpen)
	if err != nil {
		t.Fatal(err)
	}
	if res.LastMirrorEpoch != 3 || res.LastMirrorOffset != 3 || res.StopLeaderEpoch != 14 || res.BarrierOffset != 3 {
		t.Fatalf("stop result %+v, want LME 3 LMO 3 E_stop 14 barrier 3", res)
	}
	mustState(t, b.p, StateStopped)
	if got := barrierOffsets(t, b.log()); len(got) != 1 || got[0] != 3 {
		t.Fatalf("barriers %v, want [3]", got)
	}
	if src := barrierSource(t, b.log(), 3); src != "A" {
		t.Fatalf("barrier source %q", src)
	}
	checkProducers(t, "PSM(B) #6", b.log(), nil)
	// T57
	if pos, err := b.p.LastMirrorPosition("A", topic, 0); err != nil || pos != (Position{Found: true, Epoch: 3, Offset: 3}) {
		t.Fatalf("position for A: %+v %v", pos, err)
	}
	if _, err := b.p.LastMirrorPosition("C", topic, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("position for C: %v", err)
	}
	// #7: 5(B) at E_stop.
	b.epoch = 14
	b.produce(5, 0, 0, 1, false)
	b.produce(5, 0, 1, 1, false)
	checkProducers(t, "PSM(B) #7", b.log(), map[int64]int32{5: 1})
	checkEpochLine(t, b.p)
	// B restart rebuilds {5: e0 s1} (T27).
	dir := b.log().Dir()
	if err := b.log().Close(); err != nil {
		t.Fatal(err)
	}
	b.p = openPartition(t, openLog(t, dir), Options{LeaderEpoch: 14})
	b.log().SetHighWatermark(b.log().LogEndOffset()) // the replication-offset checkpoint's job
	mustState(t, b.p, StateStopped)
	checkProducers(t, "PSM(B) after restart", b.log(), map[int64]int32{5: 1})

	// 4.2 #8-#9: A returns with its divergent record at 3.
	pos, err := b.p.LastMirrorPosition("A", topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	sessA, err := a.p.Start(StartRequest{MirrorName: "back", SourceClusterID: "B", TopicID: topic, SourcePosition: pos, SourceLeaderEpoch: 14})
	if err != nil {
		t.Fatal(err)
	}
	if c := a.p.Checkpoint(); c.AlignTargetOffset != 3 || c.AlignTargetEpoch != 3 {
		t.Fatalf("A's alignment target %d/%d, want offset 3 epoch 3", c.AlignTargetOffset, c.AlignTargetEpoch)
	}
	if a.log().LogEndOffset() != 3 {
		t.Fatalf("A not truncated to 3: LEO %d", a.log().LogEndOffset())
	}
	checkProducers(t, "PSM(A) #9", a.log(), map[int64]int32{5: 2})
	// #10
	if e := a.p.LeaderEpoch(); e != 24 {
		t.Fatalf("A local epoch %d, want 24", e)
	}
	// #11: the barrier CB(B) empties A's PSM, 5(B) follows.
	pump(t, a.p, sessA, b.log())
	if !bytes.Equal(readAll(t, a.log(), 0), readAll(t, b.log(), 0)) {
		t.Fatal("A is not byte-identical to B")
	}
	checkProducers(t, "PSM(A) #11", a.log(), map[int64]int32{5: 1})
	// #12
	if _, err := a.p.AppendClient(dataBatch(t, 6, 0, 0, 1, false, batch.CompressionNone), 24); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("client produce to A: %v", err)
	}
	// #13
	b.produce(5, 0, 2, 1, false)
	pump(t, a.p, sessA, b.log())
	checkProducers(t, "PSM(A) #13", a.log(), map[int64]int32{5: 2})
	// #14
	res, err = a.p.Stop(bg, AbortOpen)
	if err != nil {
		t.Fatal(err)
	}
	if res.LastMirrorEpoch != 14 || res.LastMirrorOffset != 7 || res.StopLeaderEpoch != 25 || res.BarrierOffset != 7 {
		t.Fatalf("A stop result %+v, want LME 14 LMO 7 E_stop 25 barrier 7", res)
	}
	if src := barrierSource(t, a.log(), 7); src != "B" {
		t.Fatalf("A's barrier source %q", src)
	}
	checkProducers(t, "PSM(A) #14", a.log(), nil)
	checkEpochLine(t, a.p)
	// #15
	a.epoch = 25
	a.produce(6, 0, 0, 1, false)
	// #16: B aligns with A's position for B = (14, 7).
	pos, err = a.p.LastMirrorPosition("B", topic, 0)
	if err != nil || pos != (Position{Found: true, Epoch: 14, Offset: 7}) {
		t.Fatalf("A's position for B: %+v %v", pos, err)
	}
	sessB, err := b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourcePosition: pos, SourceLeaderEpoch: 25})
	if err != nil {
		t.Fatal(err)
	}
	if b.log().LogEndOffset() != 7 {
		t.Fatalf("B truncated to %d, want 7 kept", b.log().LogEndOffset())
	}
	checkProducers(t, "PSM(B) #16", b.log(), map[int64]int32{5: 2})
	// #17
	if e := b.p.LeaderEpoch(); e != 35 {
		t.Fatalf("B local epoch %d, want 35", e)
	}
	pump(t, b.p, sessB, a.log())
	checkProducers(t, "PSM(B) #17", b.log(), map[int64]int32{6: 0})
	if !bytes.Equal(readAll(t, a.log(), 0), readAll(t, b.log(), 0)) {
		t.Fatal("B is not byte-identical to A at the end")
	}
}
