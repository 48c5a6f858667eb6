package producerstate

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestPropertyReplayEqualsLive: random appends (data from several
// producers with valid and invalid sequences, transactional batches,
// markers, barriers; single- and multi-batch) are applied live; after
// every committed append the state equals a fresh Manager replaying every
// committed batch from scratch with origin Replay, in random groupings
// (invariant 4 of doc.go; §6.8 R3/R5).
func TestPropertyReplayEqualsLive(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	steps := 400
	if testing.Short() {
		steps = 100
	}
	m := New(Config{Shards: 4})
	l := newLog(t, m)
	type prod struct {
		epoch int16
		seq   int32
		open  bool
	}
	prods := map[int64]*prod{}
	pick := func() (int64, *prod) {
		pid := int64(rng.IntN(6))
		p := prods[pid]
		if p == nil {
			p = &prod{}
			prods[pid] = p
		}
		return pid, p
	}
	dataSpec := func() bspec {
		pid, p := pick()
		n := 1 + rng.IntN(4)
		s := data(pid, p.epoch, p.seq, n)
		switch rng.IntN(10) {
		case 0:
			s.seq += int32(rng.IntN(3)) + 1 // gap
		case 1:
			s.epoch = p.epoch + 1
			s.seq = int32(rng.IntN(2))
		case 2:
			s.epoch = max(p.epoch-1, 0)
		}
		s.txn = p.open || rng.IntN(4) == 0
		if rng.IntN(15) == 0 {
			s.txn = !s.txn
		}
		return s
	}
	markerSpec := func() bspec {
		pid, p := pick()
		epoch := p.epoch
		if rng.IntN(6) == 0 {
			epoch++
		}
		if rng.IntN(2) == 0 {
			return commit(pid, epoch, int32(rng.IntN(3)))
		}
		return abort(pid, epoch, int32(rng.IntN(3)))
	}
	committed := 0
	for i := 0; i < steps; i++ {
		var origin Origin
		var specs []bspec
		switch k := rng.IntN(10); {
		case k < 5:
			origin, specs = Client, []bspec{dataSpec()}
			if rng.IntN(20) == 0 {
				specs = []bspec{markerSpec()}
			}
		case k < 7:
			origin, specs = Coordinator, []bspec{markerSpec()}
		case k < 8:
			origin, specs = Coordinator, []bspec{barrier()}
		default:
			origin = []Origin{Replication, Mirror, Replay}[rng.IntN(3)]
			for j := 0; j < 1+rng.IntN(6); j++ {
				switch r := rng.IntN(10); {
				case r < 6:
					specs = append(specs, dataSpec())
				case r < 8:
					specs = append(specs, markerSpec())
				case r < 9:
					specs = append(specs, barrier())
				default:
					specs = append(specs, data(-1, -1, -1, 1+rng.IntN(3)))
				}
			}
		}
		before := m.Producers()
		if _, err := l.append(origin, specs...); err != nil {
			if got := m.Producers(); !reflect.DeepEqual(got, before) {
				t.Fatalf("step %d: rejected append changed the state", i)
			}
			continue
		}
		committed++
		// Update the generator's view from the committed state.
		for pid, p := range prods {
			if e, ok := m.Producer(pid); ok {
				p.epoch = max(e.ProducerEpoch, 0)
				p.seq = e.LastSequence + 1
				p.open = e.CurrentTxnFirstOffset >= 0
			} else {
				*p = prod{}
			}
		}
		r := replay(t, l.batches, rng.IntN(4))
		if got, want := r.Producers(), m.Producers(); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d step %d: replay %+v\nlive %+v", seed, i, got, want)
		}
		if !reflect.DeepEqual(r.OngoingTransactions(), m.OngoingTransactions()) ||
			!reflect.DeepEqual(r.Barriers(), m.Barriers()) || r.MapEndOffset() != m.MapEndOffset() {
			t.Fatalf("seed %d step %d: transactions, barriers or MEO differ", seed, i)
		}
		rf, rok := r.FirstUnstableOffset()
		mf, mok := m.FirstUnstableOffset()
		if rf != mf || rok != mok {
			t.Fatalf("seed %d step %d: FUO %d/%v vs %d/%v", seed, i, rf, rok, mf, mok)
		}
	}
	t.Logf("%d of %d appends committed, %d batches, %d barriers", committed, steps, len(l.batches), m.BarrierCount())
}
