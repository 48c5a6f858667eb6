package producerstate

import (
	"testing"

	"github.com/partlog/partlog/batch"
)

// bspec describes one test batch.
type bspec struct {
	pid     int64
	epoch   int16
	seq     int32 // base sequence (-1 none)
	n       int   // records (data); 0 makes an empty batch
	txn     bool
	ts      int64
	control int // 0 data; 1 commit; 2 abort; 3 barrier; 4 other control type (LEADER_CHANGE); 5 empty control
	coord   int32
}

func data(pid int64, epoch int16, seq int32, n int) bspec {
	return bspec{pid: pid, epoch: epoch, seq: seq, n: n, ts: 1000}
}

func txnData(pid int64, epoch int16, seq int32, n int) bspec {
	b := data(pid, epoch, seq, n)
	b.txn = true
	return b
}

func commit(pid int64, epoch int16, coord int32) bspec {
	return bspec{pid: pid, epoch: epoch, seq: -1, control: 1, coord: coord, ts: 2000}
}

func abort(pid int64, epoch int16, coord int32) bspec {
	return bspec{pid: pid, epoch: epoch, seq: -1, control: 2, coord: coord, ts: 2000}
}

func barrier() bspec { return bspec{pid: -1, epoch: -1, seq: -1, control: 3, ts: 3000} }

// build encodes s; the base offset inside the bytes is irrelevant (the PSM
// takes it as a parameter).
func build(t testing.TB, s bspec) batch.View {
	t.Helper()
	c := batch.ControlSpec{ProducerID: s.pid, ProducerEpoch: s.epoch, Timestamp: s.ts, PartitionLeaderEpoch: 0}
	switch s.control {
	case 1, 2:
		return batch.View(batch.AppendEndTxnMarkerBatch(nil, c, s.control == 1, s.coord))
	case 3:
		v := batch.View(batch.AppendMirrorPidResetBatch(nil, c, "AAAAAAAAAAAAAAAAAAAAAQ"))
		if s.pid != -1 { // a non-standard writer (T46)
			v.SetBaseOffset(0)
			putPID(v, s.pid, s.epoch)
		}
		return v
	case 4:
		return batch.View(batch.AppendControlBatch(nil, c, batch.ControlLeaderChange, false, []byte{0, 0, 0, 0, 0, 1, 1, 1, 0}))
	case 5:
		spec := batch.NewBatchSpec(0)
		spec.Control, spec.Transactional = true, s.pid >= 0
		spec.ProducerID, spec.ProducerEpoch = s.pid, s.epoch
		var b batch.Builder
		out, err := b.AppendBatch(nil, &spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		return batch.View(out)
	}
	spec := batch.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = s.pid, s.epoch, s.seq, s.txn
	recs := make([]batch.RecordSpec, s.n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: s.ts + int64(i), Value: []byte("v")}
	}
	if s.n == 0 {
		spec.HasLastOffsetDelta, spec.LastOffsetDelta = true, 0
		spec.HasMaxTimestamp, spec.MaxTimestamp = true, s.ts
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return batch.View(out)
}

// putPID overwrites the producer fields of a built batch (the PSM does not
// check CRCs; tests only).
func putPID(v batch.View, pid int64, epoch int16) {
	for i := 0; i < 8; i++ {
		v[batch.OffProducerID+i] = byte(uint64(pid) >> (56 - 8*i))
	}
	v[batch.OffProducerEpoch], v[batch.OffProducerEpoch+1] = byte(uint16(epoch)>>8), byte(epoch)
}

// span is the number of offsets a batch takes.
func span(v batch.View) int64 { return int64(v.LastOffsetDelta()) + 1 }

// appendAt validates and commits specs as one append starting at offset
// next. It returns the append (for CompletedTxns/Barriers), the next
// offset and the first error.
func appendAt(t testing.TB, m *Manager, origin Origin, next int64, specs ...bspec) (*Append, int64, error) {
	t.Helper()
	a := new(Append)
	m.Begin(a, origin, 0)
	o := next
	for _, s := range specs {
		v := build(t, s)
		if err := m.Validate(a, v, o); err != nil {
			return a, next, err
		}
		o += span(v)
	}
	m.Commit(a)
	return a, o, nil
}

// logWriter is a tiny log: it keeps every committed batch so that tests can
// replay it.
type logWriter struct {
	t       testing.TB
	m       *Manager
	next    int64
	batches []batch.View // committed, with base offsets set
}

func newLog(t testing.TB, m *Manager) *logWriter { return &logWriter{t: t, m: m} }

func (l *logWriter) append(origin Origin, specs ...bspec) (*Append, error) {
	l.t.Helper()
	a := new(Append)
	l.m.Begin(a, origin, 0)
	o := l.next
	var vs []batch.View
	for _, s := range specs {
		v := build(l.t, s)
		if err := l.m.Validate(a, v, o); err != nil {
			return a, err
		}
		v.SetBaseOffset(o)
		vs = append(vs, v)
		o += span(v)
	}
	l.m.Commit(a)
	l.batches = append(l.batches, vs...)
	l.next = o
	return a, nil
}

func (l *logWriter) must(origin Origin, specs ...bspec) *Append {
	l.t.Helper()
	a, err := l.append(origin, specs...)
	if err != nil {
		l.t.Fatalf("append %v: %v", specs, err)
	}
	return a
}

// replay rebuilds a fresh Manager from batches (origin Replay), grouping
// them group-at-a-time (0 = all in one append).
func replay(t testing.TB, batches []batch.View, group int) *Manager {
	t.Helper()
	m := New(Config{})
	for i := 0; i < len(batches); {
		j := len(batches)
		if group > 0 {
			j = min(i+group, len(batches))
		}
		var a Append
		m.Begin(&a, Replay, 0)
		for _, v := range batches[i:j] {
			if err := m.Validate(&a, v, v.BaseOffset()); err != nil {
				t.Fatalf("replay of offset %d: %v", v.BaseOffset(), err)
			}
		}
		m.Commit(&a)
		i = j
	}
	return m
}

func mustEntry(t testing.TB, m *Manager, pid int64) Entry {
	t.Helper()
	e, ok := m.Producer(pid)
	if !ok {
		t.Fatalf("no entry for producer %d", pid)
	}
	return e
}

// stageAll begins a on m with origin and validates specs from offset
// next on; it fails the test on the first error.
func stageAll(t *testing.T, m *Manager, a *Append, origin Origin, next int64, specs ...bspec) int64 {
	t.Helper()
	m.Begin(a, origin, 0)
	for _, s := range specs {
		v := build(t, s)
		if err := m.Validate(a, v, next); err != nil {
			t.Fatalf("batch %+v at %d: %v", s, next, err)
		}
		next += span(v)
	}
	return next
}

// twoRounds returns, for producers first..first+n-1 in reverse order, a
// batch of seq0.. (one record) each, then a second one each: the second
// round finds its accumulators by producer id (through the map once more
// than linearAccumulators producers are staged).
func twoRounds(first int64, n int, seq0 int32) []bspec {
	var specs []bspec
	for round := int32(0); round < 2; round++ {
		for p := first + int64(n) - 1; p >= first; p-- {
			specs = append(specs, data(p, 0, seq0+round, 1))
		}
	}
	return specs
}
