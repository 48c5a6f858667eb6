package producerstate

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
)

// pairedAppend runs one append on three Managers, one with the known
// path (validateKnownData), one without it, and one that takes the
// one-batch calls (FindKnown, CommitKnown) where they apply, as the
// log's leader does, and Begin, Validate, Commit otherwise; it fails the
// test unless all give the same error and the same state afterwards. It
// returns the error and whether the known path staged a batch (and
// whether it had to be materialized).
func pairedAppend(t *testing.T, ms *managers, next int64, origin Origin, vs []batch.View) (err error, took, materialized bool) {
	t.Helper()
	known, general := ms.known, ms.general
	var ak, ag Append
	known.Begin(&ak, origin, 0)
	general.Begin(&ag, origin, 0)
	o := next
	var errK, errG error
	for _, v := range vs {
		errK = known.Validate(&ak, v, o)
		took = took || ak.knownPending
		errG = general.Validate(&ag, v, o)
		if !reflect.DeepEqual(errK, errG) {
			t.Fatalf("batch at %d: known path %v, general path %v", o, errK, errG)
		}
		if errK != nil {
			break
		}
		o += span(v)
	}
	materialized = took && !ak.knownPending
	known.Commit(&ak)
	general.Commit(&ag)
	if !reflect.DeepEqual(ak.CompletedTxns(), ag.CompletedTxns()) {
		t.Fatalf("completed %v vs %v", ak.CompletedTxns(), ag.CompletedTxns())
	}
	if errD, direct := ms.appendDirect(next, origin, vs); !reflect.DeepEqual(errD, errK) {
		t.Fatalf("one-batch calls (taken %v): %v, known path %v", direct, errD, errK)
	} else if direct != (took && len(vs) == 1) {
		t.Fatalf("FindKnown took the batch %v, the known path %v", direct, took)
	}
	ms.same(t)
	return errK, took, materialized
}

// managers are the three Managers pairedAppend compares.
type managers struct{ known, general, direct *Manager }

// appendDirect is the append on ms.direct: FindKnown and CommitKnown for
// one batch of a Client that FindKnown accepts (reported), the general
// calls otherwise.
func (ms *managers) appendDirect(next int64, origin Origin, vs []batch.View) (err error, direct bool) {
	m := ms.direct
	if len(vs) == 1 && origin == Client {
		var h batch.BatchHeader
		vs[0].DecodeHeader(&h)
		var k Known
		if m.FindKnown(&h, next, &k) {
			m.CommitKnown(&k)
			return nil, true
		}
	}
	var a Append
	m.Begin(&a, origin, 0)
	o := next
	for _, v := range vs {
		if err = m.Validate(&a, v, o); err != nil {
			break
		}
		o += span(v)
	}
	m.Commit(&a)
	return err, false
}

// same fails the test unless the three Managers hold the same state.
func (ms *managers) same(t *testing.T) {
	t.Helper()
	sameState(t, ms.known, ms.general)
	sameState(t, ms.direct, ms.general)
}

// removeExpired is RemoveExpired on all three.
func (ms *managers) removeExpired(nowMs int64) {
	for _, m := range []*Manager{ms.known, ms.general, ms.direct} {
		m.RemoveExpired(nowMs)
	}
}

func sameState(t *testing.T, a, b *Manager) {
	t.Helper()
	if got, want := a.Producers(), b.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("producers differ:\nknown   %+v\ngeneral %+v", got, want)
	}
	if !reflect.DeepEqual(a.OngoingTransactions(), b.OngoingTransactions()) || a.MapEndOffset() != b.MapEndOffset() ||
		a.Len() != b.Len() || !reflect.DeepEqual(a.Barriers(), b.Barriers()) {
		t.Fatalf("transactions, MEO, count or barriers differ")
	}
}

func knownPair() *managers {
	ms := &managers{New(Config{Shards: 4}), New(Config{Shards: 4}), New(Config{Shards: 4})}
	ms.general.noKnownPath = true
	return ms
}

// TestKnownPathMatchesGeneralPath: random appends (mostly Client, one to
// three batches; replicated batches in and out of order, with retries of cached and evicted batches, gaps, epoch
// bumps and fenced epochs, transactions and their markers, batches
// without a producer id, barriers, sequences about to wrap) give the
// same errors and the same state with and without the known path, and
// the known path is taken, also as the first batch of longer appends.
func TestKnownPathMatchesGeneralPath(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x4b4e))
	steps := 4000
	if testing.Short() {
		steps = 1000
	}
	ms := knownPair()
	type prod struct {
		epoch int16
		seq   int32
		sent  []bspec // accepted data batches, newest last
	}
	prods := map[int64]*prod{}
	const producers = 8
	dataSpec := func() bspec {
		pid := int64(rng.IntN(producers))
		p := prods[pid]
		if p == nil {
			p = &prod{}
			prods[pid] = p
		}
		s := data(pid, p.epoch, p.seq, 1+rng.IntN(3))
		switch r := rng.IntN(20); {
		case r == 0 && len(p.sent) > 0: // retry of a recent (maybe evicted) batch
			s = p.sent[len(p.sent)-1-rng.IntN(min(len(p.sent), 7))]
		case r == 1:
			s.seq += 1 + int32(rng.IntN(2)) // gap
		case r == 2:
			s.seq-- // overlaps the last batch
		case r == 3:
			s.epoch, s.seq = p.epoch+1, int32(rng.IntN(2)) // bump (or a bad first sequence)
		case r == 4:
			s.epoch = p.epoch - 1 // fenced (or -1)
		case r == 5:
			s.txn = true
		case r == 6:
			s.seq = batch.MaxSequence - int32(rng.IntN(3)) // about to wrap
		case r == 7:
			s.seq = -1
		}
		return s
	}
	next := int64(0)
	var took, materialized, accepted int
	for i := range steps {
		var origin Origin = Client
		var specs []bspec
		switch r := rng.IntN(40); {
		case r == 0:
			origin, specs = Coordinator, []bspec{barrier()}
		case r < 3:
			pid := int64(rng.IntN(producers))
			epoch := int16(0)
			if p := prods[pid]; p != nil {
				epoch = p.epoch
			}
			origin, specs = Coordinator, []bspec{commit(pid, epoch, 0)}
			if r == 2 {
				specs = []bspec{abort(pid, epoch, 0)}
			}
		case r < 5:
			// A replicated batch near the producer's sequence, in or out
			// of order (no sequence checks): the cache the next Client
			// batches meet may not be ascending.
			s := dataSpec()
			s.txn = false
			if s.seq >= 0 {
				s.seq = max(0, s.seq+int32(rng.IntN(7))-4)
			}
			origin, specs = Replication, []bspec{s}
		default:
			for range 1 + rng.IntN(3) {
				if rng.IntN(6) == 0 {
					specs = append(specs, data(-1, -1, -1, 1))
				} else {
					specs = append(specs, dataSpec())
				}
			}
		}
		vs := make([]batch.View, len(specs))
		for j, s := range specs {
			vs[j] = build(t, s)
		}
		err, k, mat := pairedAppend(t, ms, next, origin, vs)
		if k {
			took++
		}
		if mat {
			materialized++
		}
		if err != nil {
			continue
		}
		accepted++
		for _, v := range vs {
			next += span(v)
		}
		// The generator follows the committed state.
		for pid, p := range prods {
			e, ok := ms.known.Producer(pid)
			if !ok {
				*p = prod{}
				continue
			}
			p.epoch = max(e.ProducerEpoch, 0)
			if e.ProducerEpoch < 0 {
				p.epoch = 0
			}
			p.seq = e.LastSequence + 1
			if e.LastSequence == batch.MaxSequence {
				p.seq = 0
			}
		}
		for _, s := range specs {
			if s.control == 0 && s.pid >= 0 {
				p := prods[s.pid]
				p.sent = append(p.sent, s)
			}
		}
		if i%500 == 0 {
			ms.removeExpired(1 << 62) // every producer without a transaction goes
			ms.same(t)
		}
	}
	t.Logf("%d of %d appends accepted; known path %d times, %d of them materialized", accepted, steps, took, materialized)
	if took < steps/4 || materialized == 0 {
		t.Fatalf("known path taken %d times (materialized %d) in %d appends: the test does not exercise it", took, materialized, steps)
	}
}

// TestKnownPathDecisions: the cases the known path takes, and each case
// it must leave to validateData (which then accepts or rejects it by the
// rules); either way the outcome equals the general path's.
func TestKnownPathDecisions(t *testing.T) {
	const pid = 5
	for _, c := range []struct {
		name  string
		setup []bspec // Client appends of one batch each before the case (Coordinator for markers)
		batch []bspec
		takes bool
		ok    bool
		// replicated: the setup is appended as Replication (no sequence
		// checks: the cache may be out of order).
		replicated bool
	}{
		{"next sequence", []bspec{data(pid, 0, 0, 2)}, []bspec{data(pid, 0, 2, 3)}, true, true, false},
		{"next sequence, full cache", []bspec{data(pid, 0, 0, 1), data(pid, 0, 1, 1), data(pid, 0, 2, 1), data(pid, 0, 3, 1), data(pid, 0, 4, 1), data(pid, 0, 5, 1)},
			[]bspec{data(pid, 0, 6, 1)}, true, true, false},
		{"first batch after a commit without data", []bspec{commit(pid, 0, 0)}, []bspec{data(pid, 0, 0, 1)}, true, true, false},
		// A wrap goes the general way, and so do the batches while one
		// that ends above the wrapped ones is cached.
		{"wrap to 0", []bspec{data(pid, 0, batch.MaxSequence-1, 2)}, []bspec{data(pid, 0, 0, 2)}, false, true, false},
		{"after a wrap", []bspec{data(pid, 0, batch.MaxSequence-1, 2), data(pid, 0, 0, 1)}, []bspec{data(pid, 0, 1, 1)}, false, true, false},
		{"after a wrap, evicted", []bspec{data(pid, 0, batch.MaxSequence-1, 2), data(pid, 0, 0, 1), data(pid, 0, 1, 1), data(pid, 0, 2, 1), data(pid, 0, 3, 1), data(pid, 0, 4, 1)},
			[]bspec{data(pid, 0, 5, 1)}, true, true, false},
		{"about to wrap", []bspec{data(pid, 0, batch.MaxSequence-3, 2)}, []bspec{data(pid, 0, batch.MaxSequence-1, 3)}, false, true, false},
		{"up to the last sequence", []bspec{data(pid, 0, batch.MaxSequence-3, 2)}, []bspec{data(pid, 0, batch.MaxSequence-1, 2)}, true, true, false},
		{"wrap to 0, one record", []bspec{data(pid, 0, batch.MaxSequence-1, 2)}, []bspec{data(pid, 0, 0, 1)}, false, true, false},
		{"first of two batches", []bspec{data(pid, 0, 0, 1)}, []bspec{data(pid, 0, 1, 1), data(pid, 0, 2, 1)}, true, true, false},
		{"after a batch without producer", []bspec{data(pid, 0, 0, 1)}, []bspec{data(-1, -1, -1, 1), data(pid, 0, 1, 1)}, true, true, false},
		{"second batch out of order", []bspec{data(pid, 0, 0, 1)}, []bspec{data(pid, 0, 1, 1), data(pid, 0, 3, 1)}, true, false, false},
		{"unknown producer", nil, []bspec{data(pid, 0, 0, 1)}, false, true, false},
		{"new epoch", []bspec{data(pid, 0, 0, 1)}, []bspec{data(pid, 1, 0, 1)}, false, true, false},
		{"new epoch, bad sequence", []bspec{data(pid, 0, 0, 1)}, []bspec{data(pid, 1, 1, 1)}, false, false, false},
		{"fenced epoch", []bspec{data(pid, 1, 0, 1)}, []bspec{data(pid, 0, 1, 1)}, false, false, false},
		{"epoch -1", []bspec{data(pid, -1, 0, 1)}, []bspec{data(pid, -1, 1, 1)}, false, true, false},
		{"gap", []bspec{data(pid, 0, 0, 1)}, []bspec{data(pid, 0, 2, 1)}, false, false, false},
		{"overlap", []bspec{data(pid, 0, 0, 2)}, []bspec{data(pid, 0, 1, 1)}, false, false, false},
		{"duplicate", []bspec{data(pid, 0, 0, 2), data(pid, 0, 2, 1)}, []bspec{data(pid, 0, 0, 2)}, false, false, false},
		{"no base sequence", []bspec{data(pid, 0, 0, 1)}, []bspec{data(pid, 0, -1, 1)}, false, false, false},
		{"transactional", []bspec{data(pid, 0, 0, 1)}, []bspec{txnData(pid, 0, 1, 1)}, false, true, false},
		{"open transaction", []bspec{txnData(pid, 0, 0, 1)}, []bspec{txnData(pid, 0, 1, 1)}, false, true, false},
		{"open transaction, plain batch", []bspec{txnData(pid, 0, 0, 1)}, []bspec{data(pid, 0, 1, 1)}, false, false, false},
		{"after the commit", []bspec{txnData(pid, 0, 0, 1), commit(pid, 0, 0)}, []bspec{data(pid, 0, 1, 1)}, true, true, false},
		// Replicated caches out of order: the newest batch is not the
		// highest, so the cached batches are looked at.
		{"replicated out of order, next", []bspec{data(pid, 0, 5, 1), data(pid, 0, 2, 1)}, []bspec{data(pid, 0, 3, 1)}, false, true, true},
		{"replicated out of order, ends on a cached last sequence", []bspec{data(pid, 0, 3, 1), data(pid, 0, 1, 1)}, []bspec{data(pid, 0, 2, 2)}, false, true, true},
		{"replicated out of order, duplicate", []bspec{data(pid, 0, 3, 1), data(pid, 0, 1, 1)}, []bspec{data(pid, 0, 3, 1)}, false, false, true},
		{"replicated in order, next", []bspec{data(pid, 0, 1, 1), data(pid, 0, 7, 1)}, []bspec{data(pid, 0, 8, 1)}, true, true, true},
		{"replicated without sequences", []bspec{data(pid, 0, -1, 1)}, []bspec{data(pid, 0, 0, 1)}, true, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := knownPair()
			next := int64(0)
			for _, s := range c.setup {
				origin := Client
				if s.control != 0 {
					origin = Coordinator
				}
				if c.replicated {
					origin = Replication
				}
				v := build(t, s)
				if err, _, _ := pairedAppend(t, ms, next, origin, []batch.View{v}); err != nil {
					t.Fatalf("setup %+v: %v", s, err)
				}
				next += span(v)
			}
			vs := make([]batch.View, len(c.batch))
			for i, s := range c.batch {
				vs[i] = build(t, s)
			}
			err, took, _ := pairedAppend(t, ms, next, Client, vs)
			if took != c.takes || (err == nil) != c.ok {
				t.Fatalf("known path taken %v (want %v), error %v (want ok %v)", took, c.takes, err, c.ok)
			}
		})
	}
}

// TestKnownPathLeavesControlBatches: a control batch from a client is
// refused even when its header looks like the next data batch of a
// stored producer (same epoch, not transactional, the next sequence).
func TestKnownPathLeavesControlBatches(t *testing.T) {
	ms := knownPair()
	v := build(t, data(5, 0, 0, 1))
	if err, _, _ := pairedAppend(t, ms, 0, Client, []batch.View{v}); err != nil {
		t.Fatal(err)
	}
	c := build(t, bspec{pid: 5, epoch: 0, control: 4, ts: 1000})
	binary.BigEndian.PutUint32(c[batch.OffBaseSequence:], 1)
	if c.IsTransactional() || !c.IsControl() || c.BaseSequence() != 1 {
		t.Fatalf("test batch: transactional %v control %v sequence %d", c.IsTransactional(), c.IsControl(), c.BaseSequence())
	}
	err, took, _ := pairedAppend(t, ms, 1, Client, []batch.View{c})
	if took || !errors.Is(err, ErrControlFromClient) {
		t.Fatalf("known path taken %v, error %v", took, err)
	}
}

// TestSeqTop: after any sequence of batches and epoch changes (last
// sequences ascending, repeated, descending, wrapping, -1), seqTop is
// what its definition says, computed here from the cached batches.
func TestSeqTop(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	want := func(e *entry) int32 {
		if e.n == 0 {
			return -1
		}
		top := e.newest().LastSequence
		for i := 0; i < int(e.n)-1; i++ {
			if e.at(i).LastSequence >= top {
				return noSeqTop
			}
		}
		return top
	}
	e := blankEntry(1)
	last := int32(0)
	for i := range 20000 {
		r := rng.IntN(20)
		switch {
		case r == 0:
			e.setEpoch(e.epoch + 1)
		case r == 1:
			e.applyMarker(e.epoch, 0, int64(i))
		case r == 2:
			last = batch.MaxSequence - int32(rng.IntN(3))
		case r == 3:
			last = -1
		case r < 7:
			last = max(-1, last-int32(rng.IntN(4))) // repeated or below
		default:
			last = batch.IncrementSequence(max(last, 0), int32(1+rng.IntN(3)))
		}
		if r >= 2 {
			e.addBatch(e.epoch, BatchMetadata{LastSequence: last, LastOffset: int64(i), Timestamp: int64(i)})
		}
		if got := want(&e); e.seqTop != got {
			t.Fatalf("step %d: seqTop %d, want %d (entry %+v)", i, e.seqTop, got, e.export())
		}
	}
}

// TestEntryHotFieldsShareALine: what the known path reads and its
// commit writes besides the batch slot is in the entry's first 32 bytes,
// and the entry is 160 bytes, so every entry (size class 160, or a slab
// of them: all the size classes above are multiples of 32) starts on a
// 32-byte boundary and those fields are one cache line.
func TestEntryHotFieldsShareALine(t *testing.T) {
	typ := reflect.TypeFor[entry]()
	if typ.Size() != 160 {
		t.Fatalf("entry is %d bytes, want 160", typ.Size())
	}
	for _, name := range []string{"lastTimestamp", "txnFirstOffset", "seqTop", "epoch", "n", "head"} {
		f, ok := typ.FieldByName(name)
		if !ok {
			t.Fatalf("no field %s", name)
		}
		if f.Offset+f.Type.Size() > 32 {
			t.Errorf("%s at bytes [%d, %d), beyond the first 32", name, f.Offset, f.Offset+f.Type.Size())
		}
	}
}
