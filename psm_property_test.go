package partlog

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testutil"
	"github.com/partlog/partlog/producerstate"
)

// psProp drives a Log with random operations and checks after every step
// that its producer state is the function of its bytes (mirror.md I4).
type psProp struct {
	t     *testing.T
	rng   *rand.Rand
	l     *Log
	exact bool // no snapshot load yet: the deques must match exactly
	steps map[string]int
}

const psPropPids = 4

// state returns pid's entry and whether it exists.
func (p *psProp) state(pid int64) (ProducerEntry, bool) { return p.l.ProducerState(pid) }

// validData returns a data batch of pid that the client rules accept.
func (p *psProp) validData(pid int64) []byte {
	e, ok := p.state(pid)
	n := 1 + p.rng.IntN(3)
	if !ok {
		return psData(p.t, pid, int16(p.rng.IntN(3)), int32(p.rng.IntN(6)), n, p.rng.IntN(3) == 0)
	}
	open := e.CurrentTxnFirstOffset >= 0
	if !open && p.rng.IntN(8) == 0 {
		return psData(p.t, pid, e.ProducerEpoch+1, 0, n, p.rng.IntN(2) == 0) // epoch bump
	}
	return psData(p.t, pid, e.ProducerEpoch, e.LastSequence+1, n, open || p.rng.IntN(3) == 0)
}

// invalidData returns a client batch of pid the rules reject, with the
// error expected, or nil if pid's state allows none of the kinds.
func (p *psProp) invalidData(pid int64) ([]byte, error) {
	e, ok := p.state(pid)
	if !ok || e.ProducerEpoch < 0 {
		return nil, nil
	}
	open := e.CurrentTxnFirstOffset >= 0
	switch p.rng.IntN(4) {
	case 0:
		if e.NumBatches > 0 {
			return psData(p.t, pid, e.ProducerEpoch, e.LastSequence+2+int32(p.rng.IntN(3)), 1, open),
				producerstate.ErrOutOfOrderSequence
		}
	case 1:
		if e.ProducerEpoch > 0 {
			return psData(p.t, pid, e.ProducerEpoch-1, 0, 1, open), producerstate.ErrInvalidProducerEpoch
		}
	case 2:
		if open {
			return psData(p.t, pid, e.ProducerEpoch, e.LastSequence+1, 1, false), producerstate.ErrInvalidTxnState
		}
	case 3:
		if e.NumBatches > 0 {
			return psData(p.t, pid, e.ProducerEpoch, e.LastSequence-e.OffsetDelta, int(e.OffsetDelta)+1, open),
				producerstate.ErrDuplicateSequence
		}
	}
	return nil, nil
}

func (p *psProp) pid() int64 { return 1 + p.rng.Int64N(psPropPids) }

// step runs one random operation.
func (p *psProp) step() {
	t, l := p.t, p.l
	switch k := p.rng.IntN(100); {
	case k < 40: // valid client append, sometimes of two producers
		pid := p.pid()
		b := p.validData(pid)
		if p.rng.IntN(4) == 0 {
			b = append(b, p.validData(pid%psPropPids+1)...)
		}
		if _, err := l.AppendAsLeader(b, psEpoch(l)); err != nil {
			t.Fatalf("valid client append: %v", err)
		}
		p.steps["client"]++
	case k < 55: // invalid client append: nothing changes
		pid := p.pid()
		b, want := p.invalidData(pid)
		if b == nil {
			b, want = psMarker(pid, 0, true, 0), ErrPolicy
		}
		if p.rng.IntN(3) == 0 { // behind a valid batch of another producer
			b = append(p.validData(pid%psPropPids+1), b...)
		}
		before := psFreeze(t, l)
		_, err := l.AppendAsLeader(b, psEpoch(l))
		if !errors.Is(err, want) {
			t.Fatalf("invalid client append: %v, want %v", err, want)
		}
		psCheckUnchanged(t, "rejected client append", l, before)
		p.steps["rejected"]++
	case k < 70: // coordinator marker
		pid := p.pid()
		e, ok := p.state(pid)
		epoch, ce := int16(0), int32(p.rng.IntN(2))
		if ok {
			epoch, ce = max(e.ProducerEpoch, 0)+int16(p.rng.IntN(4)/3), max(e.CoordinatorEpoch, 0)+int32(p.rng.IntN(2))
		}
		if _, err := l.AppendAsCoordinator(psMarker(pid, epoch, p.rng.IntN(2) == 0, ce), psEpoch(l)); err != nil {
			t.Fatalf("marker: %v", err)
		}
		p.steps["marker"]++
	case k < 76: // STOPPING (ABORT_OPEN): abort open transactions, then the barrier (R2)
		for _, txn := range l.psm.OngoingTransactions() {
			e, _ := p.state(txn.ProducerID)
			if _, err := l.AppendAsCoordinator(psMarker(txn.ProducerID, e.ProducerEpoch, false, max(e.CoordinatorEpoch, 0)), psEpoch(l)); err != nil {
				t.Fatalf("abort before the barrier: %v", err)
			}
		}
		if _, err := l.AppendAsCoordinator(psBarrier("src"), psEpoch(l)); err != nil {
			t.Fatalf("barrier: %v", err)
		}
		p.steps["barrier"]++
	case k < 84:
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		p.steps["roll"]++
	case k < 92: // truncation at a random batch boundary
		bs := ltBatches(t, l)
		if len(bs) == 0 {
			return
		}
		i := p.rng.IntN(len(bs)) // mostly near the end, so the log grows
		if p.rng.IntN(4) != 0 {
			i = len(bs) - 1 - p.rng.IntN(min(len(bs), 4))
		}
		to := bs[i].Base
		if err := l.TruncateTo(to); err != nil {
			t.Fatalf("truncate to %d: %v", to, err)
		}
		p.exact = false
		p.steps["truncate"]++
	default: // restart, clean or through recovery
		if p.rng.IntN(2) == 0 {
			p.l = psReopen(t, l)
			p.steps["reopen"]++
		} else {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			p.l = psOpen(t, l.Dir(), psUncleanOpts(t))
			p.steps["recover"]++
		}
		p.exact = false
	}
	p.l.SetHighWatermark(p.l.LogEndOffset())
}

// check compares the live state with a replay of the log's bytes.
func (p *psProp) check(i int) {
	t, l := p.t, p.l
	ref := psReplay(t, l)
	if p.exact {
		psCheckExact(t, "live vs replay", l.Producers(), ref.Producers())
	} else if err := psEquivalent(l.Producers(), ref.Producers()); err != nil {
		t.Fatalf("step %d: live vs replay: %v", i, err)
	}
	if a, b := l.LastStableOffset(), ref.LastStableOffset(l.HighWatermark()); a != b {
		t.Fatalf("step %d: LSO %d, replay %d", i, a, b)
	}
	if meo := l.psm.MapEndOffset(); meo != l.LogEndOffset() {
		t.Fatalf("step %d: map end offset %d, LEO %d", i, meo, l.LogEndOffset())
	}
}

func TestPSMProperty_StateIsAFunctionOfTheLog(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	budget, maxSteps := 2*time.Second, 1500
	if testing.Short() {
		budget, maxSteps = 500*time.Millisecond, 200
	}
	deadline := time.Now().Add(budget)
	for run := 0; time.Now().Before(deadline); run++ {
		s := seed + uint64(run)
		p := &psProp{t: t, rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), exact: true, steps: map[string]int{}}
		p.l = psOpen(t, t.TempDir(), psOpts(t))
		steps := 0
		for ; steps < maxSteps/5 && time.Now().Before(deadline); steps++ {
			p.step()
			p.check(steps)
			if t.Failed() {
				t.Fatalf("run seed %d, step %d", s, steps)
			}
		}
		t.Logf("run seed %d: %d steps %v, LEO %d, %d segments", s, steps, p.steps, p.l.LogEndOffset(), len(p.l.Segments()))
		_ = p.l.Close()
	}
}

// psReaders runs n goroutines calling the producer-state readers of l
// until stop is closed, checking what they can without a lock.
func psReaders(t *testing.T, l *Log, n int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	var bad atomic.Value
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					if msg := bad.Load(); msg != nil && r == 0 {
						t.Error(msg)
					}
					return
				default:
				}
				if e, ok := l.ProducerState(int64(1 + i%8)); ok && e.ProducerID != int64(1+i%8) {
					bad.Store("ProducerState returned another producer")
				}
				ps := l.Producers()
				if !slices.IsSortedFunc(ps, func(a, b ProducerEntry) int { return int(a.ProducerID - b.ProducerID) }) {
					bad.Store("Producers not sorted")
				}
				if lso := l.LastStableOffset(); lso > l.LogEndOffset() {
					bad.Store("LSO above the log end")
				}
				_ = l.Barriers()
			}
		}(r)
	}
	return &wg
}

func TestPSMRace_ReadersWhileAppending(t *testing.T) {
	l, _ := psNew(t)
	stop := make(chan struct{})
	wg := psReaders(t, l, 4, stop)
	rng := rand.New(rand.NewPCG(1, 2))
	seq := map[int64]int32{}
	n := 1500
	if testing.Short() || testutil.Race {
		n = 500
	}
	for i := 0; i < n; i++ {
		pid := int64(1 + rng.IntN(8))
		switch k := rng.IntN(100); {
		case k < 4:
			// A barrier is refused while transactions are open (R2).
			if _, err := l.AppendAsCoordinator(psBarrier("src"), psEpoch(l)); err != nil {
				if !errors.Is(err, ErrOpenTransactions) {
					t.Fatal(err)
				}
				continue
			}
			clear(seq)
		case k < 5:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		default:
			e, ok := l.ProducerState(pid)
			if ok && e.CurrentTxnFirstOffset >= 0 {
				psCoord(t, l, psMarker(pid, e.ProducerEpoch, rng.IntN(2) == 0, 0))
				seq[pid] = e.LastSequence + 1
				continue
			}
			if !ok {
				seq[pid] = 0
			}
			psLeader(t, l, psData(t, pid, 0, seq[pid], 1+rng.IntN(3), rng.IntN(4) == 0))
			seq[pid] = psProducer(t, l, pid).LastSequence + 1
		}
		l.SetHighWatermark(l.LogEndOffset() - int64(rng.IntN(3)))
	}
	close(stop)
	wg.Wait()
	psCheckExact(t, "live vs replay", l.Producers(), psReplay(t, l).Producers())
}

// TestLoadSnapshotBesideProducerStateReaders: TruncateTo reloads the
// producer state (LoadSnapshot) beside ProducerState readers under the
// shard locks they rely on.
func TestLoadSnapshotBesideProducerStateReaders(t *testing.T) {
	if !testutil.Race {
		t.Skip("needs -race")
	}
	l, _ := psNew(t)
	for pid := int64(1); pid <= 8; pid++ {
		psLeader(t, l, psData(t, pid, 0, 0, 1, false))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	cut := l.LogEndOffset()
	stop := make(chan struct{})
	wg := psReaders(t, l, 4, stop)
	for i := 0; i < 200; i++ {
		psLeader(t, l, psData(t, 1, 0, 1, 1, false))
		if err := l.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
