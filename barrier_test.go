package partlog

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/snapshot"
)

// Single-partition cases of producer-state.md §7 (T44–T70) and mirror.md
// §6, run through the Log. Clusters are simulated by separate logs: a
// "mirror" copies another log's batches byte for byte with AppendAsMirror;
// a barrier is what the stopping leader appends with AppendAsCoordinator.

// psCopy returns the batches of src in [from, to) as one fetch chunk.
func psCopy(t testing.TB, src *Log, from, to int64) []byte {
	t.Helper()
	var out []byte
	for _, b := range ltBatches(t, src) {
		if b.Base >= from && b.Base < to {
			out = append(out, b.Bytes...)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no batches of %s in [%d, %d)", src.Dir(), from, to)
	}
	return out
}

// psMirrorUpTo mirrors src into dst from dst's end up to src's offset to.
func psMirrorUpTo(t testing.TB, dst, src *Log, to int64) {
	t.Helper()
	psMirror(t, dst, psCopy(t, src, dst.LogEndOffset(), to))
}

// psSameLog fails unless a and b hold the same bytes at the same offsets.
func psSameLog(t testing.TB, a, b *Log) {
	t.Helper()
	x, y := ltBatches(t, a), ltBatches(t, b)
	if len(x) != len(y) {
		t.Fatalf("%d batches vs %d", len(x), len(y))
	}
	for i := range x {
		if x[i].Base != y[i].Base || !bytes.Equal(x[i].Bytes, y[i].Bytes) {
			t.Fatalf("batch %d differs (base %d vs %d)", i, x[i].Base, y[i].Base)
		}
	}
}

// psOnly fails unless l's producers are exactly pids.
func psOnly(t testing.TB, what string, l *Log, pids ...int64) {
	t.Helper()
	if got := psPids(l.Producers()); !slices.Equal(got, pids) && !(len(got) == 0 && len(pids) == 0) {
		t.Fatalf("%s: producers %v, want %v", what, got, pids)
	}
}

// TestBarrier_Chain is mirror.md §4.5 (T40, T49) at one partition: B
// mirrors A's PID 5, stops (barrier), and its own PID-5 producer starts
// at epoch 0 sequence 0; C mirrors B and holds B's state at every offset.
func TestBarrier_Chain(t *testing.T) {
	a, _ := psNew(t)
	psLeader(t, a, psData(t, 5, 0, 0, 21, false))  // 5(A) seq 0..20
	psLeader(t, a, psData(t, 5, 0, 21, 21, false)) // 5(A) seq 21..41
	aLEO := a.LogEndOffset()

	b, _ := psNew(t)
	c, _ := psNew(t)
	var states [][]ProducerEntry // PSM_B after each step, with the LEO
	var ends []int64
	record := func() {
		states = append(states, b.Producers())
		ends = append(ends, b.LogEndOffset())
	}
	psMirrorUpTo(t, b, a, aLEO)
	psCheckExact(t, "B = A", b.Producers(), a.Producers())
	record()

	cb := psCoord(t, b, psBarrier("cluster-A")) // B stops mirroring A
	if cb.FirstOffset != aLEO || !slices.Equal(b.Barriers(), []int64{aLEO}) {
		t.Fatalf("barrier at %d, barriers %v, want at %d", cb.FirstOffset, b.Barriers(), aLEO)
	}
	psOnly(t, "B after its barrier", b)
	record()

	// 5(B): another cluster's producer with the same id, epoch 0 seq 0.
	psLeader(t, b, psData(t, 5, 0, 0, 5, false))
	e := psProducer(t, b, 5)
	if e.ProducerEpoch != 0 || e.LastSequence != 4 || e.NumBatches != 1 || e.LastOffset != cb.FirstOffset+5 {
		t.Fatalf("T49: B's entry 5 %+v, want epoch 0 last seq 4, one batch, unaffected by 5(A)", e)
	}
	record()
	psLeader(t, b, psData(t, 5, 0, 5, 1, false))
	record()

	// C mirrors B chunk by chunk and matches B at every step (I5).
	for i, end := range ends {
		psMirrorUpTo(t, c, b, end)
		psCheckExact(t, "PSM_C = PSM_B", c.Producers(), states[i])
	}
	if !slices.Equal(c.Barriers(), []int64{aLEO}) {
		t.Fatalf("C's barriers %v, want [%d]", c.Barriers(), aLEO)
	}
	psSameLog(t, b, c)
	psCheckExact(t, "C vs replay", c.Producers(), psReplay(t, c).Producers())
}

// TestBarrier_ChainWithoutBarrierIsLoud is T50: without the barrier B's
// local PID-5 producer meets 5(A)'s state and is rejected.
func TestBarrier_ChainWithoutBarrierIsLoud(t *testing.T) {
	b, _ := psNew(t)
	psMirror(t, b, psAt(0, 3, psData(t, 5, 0, 0, 21, false), psData(t, 5, 0, 21, 21, false)))
	before := psFreeze(t, b)
	_, err := b.AppendAsLeader(psData(t, 5, 0, 0, 5, false), 14)
	psWant(t, "T50", err, producerstate.ErrOutOfOrderSequence)
	psCheckUnchanged(t, "T50", b, before)
}

// TestBarrier_FalseDuplicate is T51 / T49 of mirror.md (§4.1 step 7): on
// the failover target, a new local producer whose first batches repeat
// the (epoch, sequences) of the mirrored producer's cached batches.
func TestBarrier_FalseDuplicate(t *testing.T) {
	mirrored := psAt(0, 3, psData(t, 5, 0, 0, 5, false), psData(t, 5, 0, 5, 1, false), psData(t, 5, 0, 6, 1, false))
	t.Run("without barrier", func(t *testing.T) {
		b, _ := psNew(t)
		psMirror(t, b, mirrored)
		before := psFreeze(t, b)
		// THE CORRUPTION: 5(B)'s first batch is acknowledged as a
		// duplicate with 5(A)'s offsets 0..4 and nothing is stored; the
		// client believes its records are at 0..4, which hold A's records.
		_, err := b.AppendAsLeader(psData(t, 5, 0, 0, 5, false), 14)
		var dup *producerstate.DuplicateSequenceError
		if !errors.As(err, &dup) || dup.FirstOffset != 0 || dup.LastOffset != 4 || producerstate.KafkaErrorCode(err) != 0 {
			t.Fatalf("error %v, want a duplicate (success) at A's offsets 0..4", err)
		}
		psCheckUnchanged(t, "false duplicate", b, before)
		// So is the next one (A's 5..5).
		_, err = b.AppendAsLeader(psData(t, 5, 0, 5, 1, false), 14)
		if !errors.As(err, &dup) || dup.FirstOffset != 5 {
			t.Fatalf("error %v, want a duplicate at 5", err)
		}
	})
	t.Run("with barrier", func(t *testing.T) {
		b, _ := psNew(t)
		psMirror(t, b, mirrored)
		psCoord(t, b, psBarrier("A"))
		info := psLeader(t, b, psData(t, 5, 0, 0, 5, false))
		if info.FirstOffset != 8 || info.LastOffset != 12 {
			t.Fatalf("5(B) stored at %d..%d, want 8..12", info.FirstOffset, info.LastOffset)
		}
		psLeader(t, b, psData(t, 5, 0, 5, 1, false))
		if e := psProducer(t, b, 5); e.NumBatches != 2 || e.Batches[0].LastOffset != 12 {
			t.Fatalf("entry 5 %+v, want only 5(B)'s two batches", e)
		}
	})
}

// TestBarrier_Failback is mirror.md §4.2 (T31, T37, T68, T69).
func TestBarrier_Failback(t *testing.T) {
	a, _ := psNew(t)
	for s := int32(0); s < 3; s++ {
		if _, err := a.AppendAsLeader(psData(t, 5, 0, s, 1, false), 3); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := psNew(t)
	psMirrorUpTo(t, b, a, 3) // §4.1 step 3
	// A writes s3 and is lost before B fetches it.
	if _, err := a.AppendAsLeader(psData(t, 5, 0, 3, 1, false), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AppendAsCoordinator(psBarrier("A"), 14); err != nil { // CB(B) at 3
		t.Fatal(err)
	}
	for s := int32(0); s < 2; s++ { // 5(B) at 4..5
		if _, err := b.AppendAsLeader(psData(t, 5, 0, s, 1, false), 14); err != nil {
			t.Fatal(err)
		}
	}
	bAt5 := b.Producers()

	// Step 9: A aligns with B's position for source A (LMO 3).
	if err := a.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if e := psProducer(t, a, 5); e.LastSequence != 2 || e.LastOffset != 2 {
		t.Fatalf("A after truncation to 3: %+v, want {5: e0 s2}", e)
	}
	// Step 11: A mirrors B's [3] then [4..5].
	psMirrorUpTo(t, a, b, 4)
	psOnly(t, "A after CB(B)", a)
	if !slices.Equal(a.Barriers(), []int64{3}) {
		t.Fatalf("A's barriers %v, want [3]", a.Barriers())
	}
	psMirrorUpTo(t, a, b, 6)
	psCheckExact(t, "PSM(A) = PSM(B) after [5]", a.Producers(), bAt5)
	// Step 13: 5(B) writes s2; A fetches it.
	if _, err := b.AppendAsLeader(psData(t, 5, 0, 2, 1, false), 14); err != nil {
		t.Fatal(err)
	}
	psMirrorUpTo(t, a, b, 7)
	psCheckExact(t, "PSM(A) = PSM(B) after [6]", a.Producers(), b.Producers())
	psSameLog(t, a, b)
	// Step 14: A stops mirroring B: its own barrier, then A's producer 6.
	if _, err := a.AppendAsCoordinator(psBarrier("B"), 25); err != nil {
		t.Fatal(err)
	}
	psOnly(t, "A after CB(A)", a)
	// T69: a new local producer with PID 5 is accepted with any sequence.
	psLeader(t, a, psData(t, 5, 0, 17, 1, false))
	if err := a.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	psOnly(t, "A truncated to after CB(A)", a)
	if _, err := a.AppendAsLeader(psData(t, 6, 0, 0, 1, false), 25); err != nil {
		t.Fatal(err)
	}
	// Steps 16-17: B keeps [0..6] and mirrors A's [7..8].
	psMirrorUpTo(t, b, a, 8)
	psOnly(t, "B after CB(A)", b)
	psMirrorUpTo(t, b, a, 9)
	psCheckExact(t, "PSM(B) = PSM(A)", b.Producers(), a.Producers())
	psOnly(t, "B at the end", b, 6)
	psSameLog(t, a, b)
	if !slices.Equal(b.Barriers(), []int64{3, 7}) { // its own CB(B), then A's CB(A)
		t.Fatalf("B's barriers %v, want [3 7]", b.Barriers())
	}
}

// TestBarrier_ReplayedOverEarlierSnapshot is T15/T58 and mirror T27: the
// snapshot of a roll precedes the barrier; a restart that starts from it
// replays the barrier.
func TestBarrier_ReplayedOverEarlierSnapshot(t *testing.T) {
	l, dir := psNew(t)
	psMirror(t, l, psAt(0, 3, psData(t, 5, 0, 0, 3, false), psData(t, 7, 2, 10, 1, false)))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	rolled := l.LogEndOffset()
	psMirror(t, l, psAt(rolled, 3, psData(t, 5, 0, 3, 1, false)))
	cb := psCoord(t, l, psBarrier("A"))
	psLeader(t, l, psData(t, 5, 0, 0, 1, false)) // 5(B)
	live := l.Producers()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Keep only the snapshot taken before the barrier.
	for _, off := range psSnapshots(t, dir) {
		if off != rolled {
			if err := os.Remove(filepath.Join(dir, filenames.Make(off, filenames.Snapshot))); err != nil {
				t.Fatal(err)
			}
		}
	}
	l = psOpen(t, dir, psOpts(t))
	psCheckExact(t, "after replay over the older snapshot", l.Producers(), live)
	psOnly(t, "after replay", l, 5)
	if e := psProducer(t, l, 5); e.NumBatches != 1 || e.LastSequence != 0 {
		t.Fatalf("entry 5 %+v, want only 5(B)", e)
	}
	if !slices.Equal(l.Barriers(), []int64{cb.FirstOffset}) {
		t.Fatalf("barriers %v, want [%d]", l.Barriers(), cb.FirstOffset)
	}
	// T16/T57: the close-time snapshot lies after the barrier; loading
	// it gives the same state without meeting the barrier.
	l = psReopen(t, l)
	psCheckExact(t, "from the snapshot after the barrier", l.Producers(), live)
	for _, off := range psSnapshots(t, dir) {
		if off > cb.FirstOffset {
			entries, err := snapshot.Read(filepath.Join(dir, filenames.Make(off, filenames.Snapshot)))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.ProducerID != 5 || e.LastOffset <= cb.FirstOffset {
					t.Fatalf("snapshot %d holds a pre-barrier producer %+v", off, e)
				}
			}
		}
	}
	// T27: a new producer with PID 5 epoch 0 seq 0 after a restart at
	// the barrier.
	if err := l.TruncateTo(cb.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	psOnly(t, "truncated to just after the barrier", l)
	psLeader(t, l, psData(t, 5, 0, 0, 1, false))
}

// TestBarrier_InsideMultiBatchMirrorAppend is T55, T14 and T59: the
// barrier acts at its exact position inside one append.
func TestBarrier_InsideMultiBatchMirrorAppend(t *testing.T) {
	for _, origin := range []string{"mirror", "follower"} {
		t.Run(origin, func(t *testing.T) {
			l, _ := psNew(t)
			chunk := psAt(0, 3, psData(t, 7, 1, 0, 2, false), psData(t, 5, 0, 0, 10, false), psBarrier("A"),
				psData(t, 5, 0, 0, 1, false))
			var err error
			if origin == "mirror" {
				_, err = l.AppendAsMirror(chunk)
			} else {
				_, err = l.AppendAsFollower(chunk)
			}
			if err != nil {
				t.Fatal(err)
			}
			psOnly(t, "after the chunk", l, 5)
			e := psProducer(t, l, 5)
			if e.NumBatches != 1 || e.LastSequence != 0 || e.FirstSequence() != 0 || e.LastOffset != 13 {
				t.Fatalf("entry 5 %+v, want only the post-barrier batch (seq 0 at 13)", e)
			}
			if !slices.Equal(l.Barriers(), []int64{12}) {
				t.Fatalf("barriers %v, want [12]", l.Barriers())
			}
			psCheckExact(t, "vs replay", l.Producers(), psReplay(t, l).Producers())
		})
	}
}

// TestBarrier_GroupOrdering is T56: [7 txn data][ABORT 7][barrier] in one
// follower append writes the aborted-index entry before the reset.
func TestBarrier_GroupOrdering(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, makeBatch(t, 2, 10, psTS))
	if _, err := l.AppendAsFollower(psAt(2, 1, psData(t, 7, 0, 0, 3, true), psMarker(7, 0, false, 0), psBarrier("A"))); err != nil {
		t.Fatal(err)
	}
	want := []index.AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 5, LastStableOffset: 6}}
	if got, err := l.AbortedTransactions(0, l.LogEndOffset()); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions %+v (%v), want %+v", got, err, want)
	}
	psOnly(t, "after the barrier", l)
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != l.LogEndOffset() {
		t.Fatalf("LSO %d, want %d", lso, l.LogEndOffset())
	}
}

// TestBarrier_SilentCorruption1 is mirror.md §1.2 case 1 (T52): same
// epoch, wrong sequence, at a partition that mirrors both producers.
func TestBarrier_SilentCorruption1(t *testing.T) {
	fromA := psAt(0, 3, psData(t, 5, 0, 0, 21, false), psData(t, 5, 0, 21, 21, false)) // 5(A) seq 0..41
	t.Run("without barrier", func(t *testing.T) {
		d, _ := psNew(t)
		psMirror(t, d, fromA)
		// D is re-pointed to B; B's PID-5 producer (epoch 0, seq 0..4)
		// arrives. THE CORRUPTION: it is accepted with no error although
		// seq 0 does not follow 41, and entry 5 now caches A's and B's
		// batches mixed, describing whichever came last.
		if _, err := d.AppendAsMirror(psAt(42, 14, psData(t, 5, 0, 0, 5, false))); err != nil {
			t.Fatalf("expected the silent acceptance, got %v", err)
		}
		e := psProducer(t, d, 5)
		if e.NumBatches != 3 || e.Batches[0].LastSequence != 20 || e.Batches[1].LastSequence != 41 || e.LastSequence != 4 {
			t.Fatalf("entry 5 %+v, want A's batches (..20, ..41) mixed with B's (..4)", e)
		}
	})
	t.Run("with barrier", func(t *testing.T) {
		d, _ := psNew(t)
		psMirror(t, d, fromA)
		// B's log continues with its barrier, then 5(B): judged against
		// an empty state, entry 5 holds only B's batch.
		psMirror(t, d, psAt(42, 14, psBarrier("A"), psData(t, 5, 0, 0, 5, false)))
		e := psProducer(t, d, 5)
		if e.NumBatches != 1 || e.LastSequence != 4 || e.FirstSequence() != 0 || e.LastOffset != 47 {
			t.Fatalf("entry 5 %+v, want only B's batch", e)
		}
	})
}

// TestBarrier_SilentCorruption2 is mirror.md §1.2 case 2 (T53): different
// epochs.
func TestBarrier_SilentCorruption2(t *testing.T) {
	fromA := psAt(0, 3, psData(t, 5, 3, 0, 11, false)) // 5(A) epoch 3 seq 0..10
	t.Run("without barrier", func(t *testing.T) {
		d, _ := psNew(t)
		psMirror(t, d, fromA)
		// THE CORRUPTION: B's PID 5 at epoch 0 is accepted (a lower epoch
		// only warns on a copy path); the stored epoch falls to 0 and A's
		// deque is dropped, so both producers live under one entry ...
		if _, err := d.AppendAsMirror(psAt(11, 14, psData(t, 5, 0, 0, 2, false))); err != nil {
			t.Fatalf("expected the silent acceptance, got %v", err)
		}
		if e := psProducer(t, d, 5); e.ProducerEpoch != 0 || e.NumBatches != 1 {
			t.Fatalf("entry 5 %+v, want epoch 0 with B's batch only", e)
		}
		// ... and a later epoch-3 batch of A flips it back, silently.
		if _, err := d.AppendAsMirror(psAt(13, 14, psData(t, 5, 3, 11, 1, false))); err != nil {
			t.Fatalf("expected the silent flip back, got %v", err)
		}
		if e := psProducer(t, d, 5); e.ProducerEpoch != 3 || e.NumBatches != 1 {
			t.Fatalf("entry 5 %+v, want epoch 3 again", e)
		}
		// On B's leader the same epoch-0 producer is fenced (loud).
		b, _ := psNew(t)
		psMirror(t, b, fromA)
		_, err := b.AppendAsLeader(psData(t, 5, 0, 0, 2, false), 14)
		psWant(t, "B's leader", err, producerstate.ErrInvalidProducerEpoch)
	})
	t.Run("with barrier", func(t *testing.T) {
		d, _ := psNew(t)
		psMirror(t, d, fromA)
		psMirror(t, d, psAt(11, 14, psBarrier("A"), psData(t, 5, 0, 0, 2, false)))
		if e := psProducer(t, d, 5); e.ProducerEpoch != 0 || e.NumBatches != 1 || e.LastOffset != 13 {
			t.Fatalf("entry 5 %+v, want a new producer at epoch 0", e)
		}
		// B's leader accepts its epoch-0 producer after its barrier.
		b, _ := psNew(t)
		psMirror(t, b, fromA)
		psCoord(t, b, psBarrier("A"))
		psLeader(t, b, psData(t, 5, 0, 0, 2, false))
	})
}

// TestBarrier_SilentCorruption3 is mirror.md §1.2 case 3 (T54, T54a,
// T54b): transactional interleaving.
func TestBarrier_SilentCorruption3(t *testing.T) {
	// 5(A)'s transaction is open at offset 2 when A is lost.
	fromA := psAt(0, 3, makeBatch(t, 2, 10, psTS), psData(t, 5, 0, 0, 3, true))
	t.Run("without barrier", func(t *testing.T) {
		d, _ := psNew(t)
		psMirror(t, d, fromA)
		d.SetHighWatermark(d.LogEndOffset())
		if lso := d.LastStableOffset(); lso != 2 {
			t.Fatalf("LSO %d, want 2 (A's open transaction)", lso)
		}
		// B's PID 5 (epoch 1, it is B's producer) runs a transaction at 5
		// and commits at 7. THE CORRUPTION: B's data joins A's open
		// transaction and B's COMMIT closes it: A's undecided records at
		// 2..4 become committed, visible to read-committed readers.
		if _, err := d.AppendAsMirror(psAt(5, 14, psData(t, 5, 1, 0, 2, true), psMarker(5, 1, true, 0))); err != nil {
			t.Fatalf("expected the silent acceptance, got %v", err)
		}
		d.SetHighWatermark(d.LogEndOffset())
		if lso := d.LastStableOffset(); lso != d.LogEndOffset() {
			t.Fatalf("LSO %d, want %d: A's transaction committed by B's marker", lso, d.LogEndOffset())
		}
		if a, _ := d.AbortedTransactions(0, d.LogEndOffset()); len(a) != 0 {
			t.Fatalf("aborted transactions %v, want none: A's data reads as committed", a)
		}
		var sawA bool
		for _, v := range psReadAll(t, d, d.LastStableOffset()) {
			sawA = sawA || (v.ProducerID() == 5 && v.BaseOffset() == 2)
		}
		if !sawA {
			t.Fatal("A's undecided batch is not below the LSO")
		}
		// T54a: B's non-transactional PID-5 data fails loudly instead.
		d2, _ := psNew(t)
		psMirror(t, d2, fromA)
		_, err := d2.AppendAsMirror(psAt(5, 14, psData(t, 5, 1, 0, 1, false)))
		psWant(t, "T54a", err, producerstate.ErrInvalidTxnState)
	})
	t.Run("with barrier", func(t *testing.T) {
		d, _ := psNew(t)
		psMirror(t, d, fromA)
		// B's STOPPING (ABORT_OPEN): ABORT of A's transaction at E_stop,
		// then the barrier, then B's own PID-5 transaction.
		psMirror(t, d, psAt(5, 14, psMarker(5, 0, false, 0), psBarrier("A")))
		psOnly(t, "after the barrier", d)
		if _, err := d.AppendAsMirror(psAt(7, 14, psData(t, 5, 1, 0, 2, true))); err != nil {
			t.Fatal(err)
		}
		if e := psProducer(t, d, 5); e.CurrentTxnFirstOffset != 7 {
			t.Fatalf("entry 5 %+v, want B's own transaction at 7", e)
		}
		d.SetHighWatermark(d.LogEndOffset())
		if lso := d.LastStableOffset(); lso != 7 {
			t.Fatalf("LSO %d, want 7", lso)
		}
		psMirror(t, d, psAt(9, 14, psMarker(5, 1, true, 0)))
		want := []index.AbortedTxn{{ProducerID: 5, FirstOffset: 2, LastOffset: 5, LastStableOffset: 6}}
		if a, _ := d.AbortedTransactions(0, d.LogEndOffset()); !reflect.DeepEqual(a, want) {
			t.Fatalf("aborted transactions %+v, want A's own abort %+v", a, want)
		}
	})
	// T54b: B's leader stores A's coordinator epoch 7 for PID 5.
	withCE := psAt(0, 3, psData(t, 5, 0, 0, 1, true), psMarker(5, 0, true, 7))
	t.Run("T54b without barrier", func(t *testing.T) {
		b, _ := psNew(t)
		psMirror(t, b, withCE)
		psLeader(t, b, psData(t, 5, 1, 0, 1, true))
		_, err := b.AppendAsCoordinator(psMarker(5, 1, true, 2), 14)
		psWant(t, "B's coordinator", err, producerstate.ErrTransactionCoordinatorFenced)
	})
	t.Run("T54b with barrier", func(t *testing.T) {
		b, _ := psNew(t)
		psMirror(t, b, withCE)
		psCoord(t, b, psBarrier("A"))
		psLeader(t, b, psData(t, 5, 1, 0, 1, true))
		psCoord(t, b, psMarker(5, 1, true, 2))
	})
}

// psGolden is the barrier vector of mirror.md §3.2.
const psGolden = "0000000000000064000000560000000702a9d226be0020000000000000018bcf" +
	"e568000000018bcfe56800ffffffffffffffffffffffffffff00000001480000" +
	"0008000000073400001745524552455349694969497a4d7a4d7a524552455241" +
	"0000"

// TestBarrier_CarriesSourceClusterID is mirror T01, T02 and T18: the
// barrier as the log stores it (offset and epoch assigned) decodes to
// MIRROR_PID_RESET with its SourceClusterId.
func TestBarrier_CarriesSourceClusterID(t *testing.T) {
	l, _ := psNew(t)
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	const id = "ERERESIiIiIzMzMzRERERA"
	b := batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: 0, Timestamp: psTS}, id)
	info, err := l.AppendAsCoordinator(b, 7)
	if err != nil || info.FirstOffset != 100 {
		t.Fatalf("append: %+v %v", info, err)
	}
	stored := ltBatches(t, l)
	if len(stored) != 1 {
		t.Fatalf("%d batches", len(stored))
	}
	v := batch.View(stored[0].Bytes)
	if got := hex.EncodeToString(v); got != psGolden {
		t.Fatalf("stored barrier\n %s\nwant the golden vector\n %s", got, psGolden)
	}
	if v.CRC() != 0xa9d226be || v.ComputeCRC() != v.CRC() {
		t.Fatalf("CRC %08x (computed %08x)", v.CRC(), v.ComputeCRC())
	}
	if !v.IsControl() || v.IsTransactional() || v.Attributes() != 0x20 || v.ProducerID() != -1 ||
		v.ProducerEpoch() != -1 || v.BaseSequence() != -1 || v.RecordsCount() != 1 || v.PartitionLeaderEpoch() != 7 {
		t.Fatalf("header: attrs %#x pid %d epoch %d seq %d records %d ple %d", v.Attributes(), v.ProducerID(),
			v.ProducerEpoch(), v.BaseSequence(), v.RecordsCount(), v.PartitionLeaderEpoch())
	}
	data, err := v.RecordData(nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	it := v.Records(data)
	r, ok := it.Next()
	if !ok {
		t.Fatalf("no record: %v", it.Err())
	}
	ver, typ, err := batch.ParseControlKey(r.Key)
	if err != nil || ver != 0 || typ != batch.ControlMirrorPidReset || typ.String() != "MIRROR_PID_RESET" {
		t.Fatalf("key: version %d type %v (%v)", ver, typ, err)
	}
	val, err := batch.DecodeControlValue(typ, r.Value)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := val.(batch.MirrorPidReset)
	if !ok || m.Version != 0 || m.SourceClusterID != id {
		t.Fatalf("value %#v, want MirrorPidReset{0, %q}", val, id)
	}
	if js := batch.ControlValueJSON(val); !strings.Contains(js, `"sourceClusterId":"`+id+`"`) {
		t.Fatalf("dump %s lacks the source cluster id", js)
	}
	if !slices.Equal(l.Barriers(), []int64{100}) {
		t.Fatalf("barriers %v", l.Barriers())
	}
}

// TestBarrier_FromClientRejected is mirror T04 (producer-state T15).
func TestBarrier_FromClientRejected(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, psData(t, 5, 0, 0, 2, false))
	before := psFreeze(t, l)
	for name, b := range map[string][]byte{
		"alone":      psBarrier("A"),
		"in a batch": slices.Concat(psData(t, 5, 0, 2, 1, false), psBarrier("A"), psData(t, 5, 0, 0, 1, false)),
	} {
		_, err := l.AppendAsLeader(b, psEpoch(l))
		if !errors.Is(err, ErrPolicy) && !errors.Is(err, producerstate.ErrControlFromClient) {
			t.Fatalf("%s: error %v, want a rejection", name, err)
		}
		psCheckUnchanged(t, name, l, before)
	}
	psLeader(t, l, psData(t, 5, 0, 2, 1, false))
}

// TestBarrier_CoordinatorClearsState is T44, T45 (follower equality) and
// mirror T11/T12.
func TestBarrier_CoordinatorClearsState(t *testing.T) {
	l, _ := psNew(t)
	f, _ := psNew(t)
	psLeader(t, l, psData(t, 5, 0, 0, 2, false))
	psLeader(t, l, psData(t, 9, 1, 0, 1, false))
	leo := l.LogEndOffset()
	info := psCoord(t, l, psBarrier(""))
	if info.FirstOffset != leo || l.LogEndOffset() != leo+1 || l.psm.MapEndOffset() != leo+1 {
		t.Fatalf("barrier at %d, LEO %d, MEO %d; want %d, %d, %d", info.FirstOffset, l.LogEndOffset(),
			l.psm.MapEndOffset(), leo, leo+1, leo+1)
	}
	psOnly(t, "T44", l)
	if _, ok := l.ProducerState(-1); ok {
		t.Fatal("T44: an entry for PID -1")
	}
	psLeader(t, l, psData(t, 5, 0, 0, 1, false)) // T11: a client append succeeds
	if _, err := f.AppendAsFollower(psCopy(t, l, 0, l.LogEndOffset())); err != nil {
		t.Fatal(err)
	}
	psCheckExact(t, "T45 follower = leader", f.Producers(), l.Producers())
	if !slices.Equal(f.Barriers(), l.Barriers()) {
		t.Fatalf("follower barriers %v, leader %v", f.Barriers(), l.Barriers())
	}
}

// TestBarrier_Recognition is T46, T47, T48 (with T22) and mirror T03.
func TestBarrier_Recognition(t *testing.T) {
	build := func(key, value []byte, pid int64, records bool) []byte {
		spec := batch.NewBatchSpec(0)
		spec.Control, spec.ProducerID, spec.ProducerEpoch = true, pid, 0
		var recs []batch.RecordSpec
		if records {
			recs = []batch.RecordSpec{{Timestamp: psTS, Key: key, Value: value}}
		}
		var b batch.Builder
		out, err := b.AppendBatch(nil, &spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	v1 := append([]byte{0, 1}, batch.AppendUvarint(nil, 2)...)
	v1 = append(v1, 'A', 1, 5, 2, 0xaa, 0xbb) // id "A", one tagged field
	cases := []struct {
		name    string
		b       []byte
		barrier bool
		left    []int64 // producers after it
	}{
		{"T46 with PID 12", batch.AppendControlBatch(nil, batch.ControlSpec{Timestamp: psTS, ProducerID: 12, ProducerEpoch: 3},
			batch.ControlMirrorPidReset, true, batch.AppendMirrorPidReset(nil, "A")), true, nil},
		{"T47 key version 1", build([]byte{0, 1, 0, 7}, batch.AppendMirrorPidReset(nil, "A"), -1, true), true, nil},
		{"mirror T03 value version 1 with a tagged field", build([]byte{0, 0, 0, 7}, v1, -1, true), true, nil},
		{"T48 no records", build(nil, nil, -1, false), false, []int64{5, 9}},
		{"T48 no records, PID 12 (T22)", build(nil, nil, 12, false), false, []int64{5, 9, 12}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := psNew(t)
			psLeader(t, l, psData(t, 5, 0, 0, 2, false))
			psLeader(t, l, psData(t, 9, 0, 0, 2, true))
			chunk := psAt(l.LogEndOffset(), 3, c.b)
			psMirror(t, l, chunk)
			got := ltBatches(t, l)
			if last := got[len(got)-1]; !bytes.Equal(last.Bytes, chunk) {
				t.Fatal("stored bytes differ from the fetched ones")
			}
			psOnly(t, c.name, l, c.left...)
			if (len(l.Barriers()) == 1) != c.barrier {
				t.Fatalf("barriers %v, barrier %v", l.Barriers(), c.barrier)
			}
			if e, ok := l.ProducerState(12); ok && (e.ProducerEpoch != -1 || e.LastTimestamp != -1) {
				t.Fatalf("entry 12 %+v, want blank", e)
			}
			psCheckExact(t, "vs replay", l.Producers(), psReplay(t, l).Producers())
		})
	}
}

// TestBarrier_TruncateBelowBarrier is T60 and mirror T61: truncation
// below a barrier restores the pre-barrier state.
func TestBarrier_TruncateBelowBarrier(t *testing.T) {
	l, _ := psNew(t)
	psMirror(t, l, psAt(0, 3, psData(t, 5, 0, 0, 3, false), psData(t, 7, 0, 0, 1, false)))
	before := l.Producers()
	cut := l.LogEndOffset()
	psCoord(t, l, psBarrier("A"))
	// mirror T61: stopped right after the barrier, PSM empty, then a new
	// session truncates below it.
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	psCheckEquivalent(t, "T61 mirror", l.Producers(), before)
	psCoord(t, l, psBarrier("A"))
	psLeader(t, l, psData(t, 9, 0, 0, 2, false))
	if err := l.TruncateTo(cut); err != nil { // T60
		t.Fatal(err)
	}
	psCheckEquivalent(t, "T60", l.Producers(), before)
	if len(l.Barriers()) != 0 {
		t.Fatalf("barriers %v after truncating below the barrier", l.Barriers())
	}
}

// TestBarrier_WasEmptyShortcut is T61: the PSM is empty (barrier) and a
// snapshot below holds only 7; truncating between 9's batches and the
// barrier must replay 9 too.
func TestBarrier_WasEmptyShortcut(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, psData(t, 7, 0, 0, 2, false))
	if err := l.Roll(); err != nil { // snapshot {7}
		t.Fatal(err)
	}
	psLeader(t, l, psData(t, 9, 0, 0, 2, false))
	psLeader(t, l, psData(t, 9, 0, 2, 2, false))
	cut := l.LogEndOffset()
	psLeader(t, l, psData(t, 7, 0, 2, 1, false))
	psCoord(t, l, psBarrier("A"))
	psLeader(t, l, makeBatch(t, 3, 10, psTS))
	psOnly(t, "before truncation", l)
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	psOnly(t, "after truncation", l, 7, 9)
	psCheckEquivalent(t, "vs replay", l.Producers(), psReplay(t, l).Producers())
}

// TestBarrier_Consecutive is T62.
func TestBarrier_Consecutive(t *testing.T) {
	one, _ := psNew(t)
	two, _ := psNew(t)
	for _, l := range []*Log{one, two} {
		psLeader(t, l, psData(t, 5, 0, 0, 2, false))
		psCoord(t, l, psBarrier("A"))
	}
	psCoord(t, two, psBarrier("A"))
	if !slices.Equal(two.Barriers(), []int64{2, 3}) {
		t.Fatalf("barriers %v", two.Barriers())
	}
	for _, l := range []*Log{one, two} {
		psLeader(t, l, psData(t, 5, 0, 0, 1, false))
	}
	a, b := one.Producers(), two.Producers()
	a[0].Batches[0].LastOffset, a[0].LastOffset = b[0].Batches[0].LastOffset, b[0].LastOffset // one offset apart
	psCheckExact(t, "one vs two barriers", a, b)
}

// TestBarrier_OpenTransactionOnReplica is T63: a barrier met while a
// transaction is open (precondition violated upstream) drops it; a
// restart gives the same LSO.
func TestBarrier_OpenTransactionOnReplica(t *testing.T) {
	l, _ := psNew(t)
	psMirror(t, l, psAt(0, 3, psData(t, 5, 0, 0, 2, true), psBarrier("A"), makeBatch(t, 2, 10, psTS)))
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != l.LogEndOffset() {
		t.Fatalf("LSO %d, want %d (the open transaction went with the barrier)", lso, l.LogEndOffset())
	}
	if n := l.psm.OrphanedTransactions(); n != 1 {
		t.Fatalf("orphaned transactions %d, want 1", n)
	}
	for _, del := range []bool{false, true} {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if del {
			if _, err := snapshot.DeleteAbove(l.Dir(), -1); err != nil {
				t.Fatal(err)
			}
		}
		l = psOpen(t, l.Dir(), psOpts(t))
		l.SetHighWatermark(l.LogEndOffset())
		if lso := l.LastStableOffset(); lso != l.LogEndOffset() {
			t.Fatalf("LSO %d after restart (snapshots deleted: %v), want %d", lso, del, l.LogEndOffset())
		}
	}
}

// TestBarrier_KeepsDecidedTransactions is T64: a committed transaction
// whose marker is not yet below the HW keeps pinning the LSO across a
// barrier.
func TestBarrier_KeepsDecidedTransactions(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, psData(t, 5, 0, 0, 2, true))
	m := psCoord(t, l, psMarker(5, 0, true, 0))
	psCoord(t, l, psBarrier("A"))
	psOnly(t, "after the barrier", l)
	l.SetHighWatermark(m.LastOffset)
	if lso := l.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d, want 0 (marker %d not below the HW)", lso, m.LastOffset)
	}
	l.SetHighWatermark(m.LastOffset + 1)
	if lso := l.LastStableOffset(); lso != m.LastOffset+1 {
		t.Fatalf("LSO %d, want %d", lso, m.LastOffset+1)
	}
}

// TestBarrier_SnapshotAfterBarrierIsEmpty is T66 and T70.
func TestBarrier_SnapshotAfterBarrierIsEmpty(t *testing.T) {
	var clock psClock
	clock.ms.Store(psTS)
	o := psOpts(t)
	o.Now, o.ProducerIDExpirationMs = clock.now, 1000
	l := psOpen(t, t.TempDir(), o)
	psLeader(t, l, psData(t, 5, 0, 0, 2, false))
	cb := psCoord(t, l, psBarrier("A"))
	snaps := psSnapshots(t, l.Dir())
	clock.ms.Store(psTS + 10_000)
	if n := l.ExpireProducers(); n != 0 { // T70
		t.Fatalf("expired %d after a barrier", n)
	}
	if got := psSnapshots(t, l.Dir()); !slices.Equal(got, snaps) {
		t.Fatalf("expiration wrote snapshots %v (were %v)", got, snaps)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	entries, err := snapshot.Read(filepath.Join(l.Dir(), filenames.Make(cb.LastOffset+1, filenames.Snapshot)))
	if err != nil || len(entries) != 0 {
		t.Fatalf("snapshot after the barrier: %v entries (%v), want a zero-entry file", len(entries), err)
	}
	l = psReopen(t, l)
	psOnly(t, "loaded", l)
}

// TestBarrier_EpochLine is mirror T56 (I7): every batch the destination
// writes after mirroring carries a leader epoch above the last mirrored.
func TestBarrier_EpochLine(t *testing.T) {
	l, _ := psNew(t)
	psMirror(t, l, psAt(0, 13, psData(t, 5, 0, 0, 2, false)))
	lmo := l.LogEndOffset()
	if _, err := l.AppendAsCoordinator(psBarrier("A"), 14); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(psData(t, 5, 0, 0, 1, false), 14); err != nil {
		t.Fatal(err)
	}
	for _, b := range ltBatches(t, l) {
		if b.Base >= lmo && b.Epoch <= 13 {
			t.Fatalf("batch at %d has epoch %d, not above 13", b.Base, b.Epoch)
		}
	}
	if e := l.LeaderEpochs(); len(e) != 2 || e[1].Epoch != 14 || e[1].StartOffset != lmo {
		t.Fatalf("leader epochs %v", e)
	}
}

// TestBarrierRefusedWithOpenTransaction: the storage API refuses a
// barrier while a transaction is open, with a retriable error
// (producer-state.md T65, §6.8 R2).
func TestBarrierRefusedWithOpenTransaction(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, psData(t, 5, 0, 0, 2, true))
	before := psFreeze(t, l)
	if _, err := l.AppendAsCoordinator(psBarrier("A"), psEpoch(l)); err == nil {
		t.Fatalf("barrier appended over the transaction open at 0 (orphaned %d)", l.psm.OrphanedTransactions())
	}
	psCheckUnchanged(t, "refused barrier", l, before)
}

// TestBarrier_RecoveryAppliesBarrier is mirror T13 (producer-state T59
// through Open): after an unclean shutdown with no snapshot after the
// barrier, recovery's replay applies it.
func TestBarrier_RecoveryAppliesBarrier(t *testing.T) {
	l, dir := psNew(t)
	psMirror(t, l, psAt(0, 3, psData(t, 7, 0, 0, 1, false), psData(t, 5, 0, 0, 3, false)))
	cb := psCoord(t, l, psBarrier("A"))
	psLeader(t, l, psData(t, 5, 0, 0, 2, false))
	live := l.Producers()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.DeleteAbove(dir, cb.FirstOffset); err != nil {
		t.Fatal(err)
	}
	l = psOpen(t, dir, psUncleanOpts(t))
	psOnly(t, "recovered", l, 5)
	psCheckExact(t, "recovered", l.Producers(), live)
	psLeader(t, l, psData(t, 5, 0, 2, 1, false))
}
