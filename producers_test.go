package partlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/snapshot"
)

// Helpers of producers_test.go, barrier_test.go and psm_property_test.go
// carry a "ps" prefix.

// psTS is the base record timestamp of the batches these tests build.
const psTS int64 = 1_700_000_000_000

// psOpts are ltOpts with a clock fixed one second after psTS, so that
// snapshot loads never drop producers as expired (record timestamps are
// compared with the broker clock, §4.1). Reopens are clean restarts
// (CleanShutdown: the newest snapshot at or below the LEO plus a replay);
// psUncleanOpts makes Open run recovery instead.
func psOpts(t testing.TB) *Options {
	o := ltOpts(t)
	o.Now = func() time.Time { return time.UnixMilli(psTS + 1_000) }
	o.CleanShutdown = true
	return o
}

// psUncleanOpts are psOpts for an Open after an unclean shutdown.
func psUncleanOpts(t testing.TB) *Options {
	o := psOpts(t)
	o.CleanShutdown = false
	return o
}

// psOpen opens a log on dir with opts and closes it at cleanup.
func psOpen(t testing.TB, dir string, opts *Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// psNew opens a log in a fresh directory.
func psNew(t testing.TB) (*Log, string) {
	t.Helper()
	dir := t.TempDir()
	return psOpen(t, dir, psOpts(t)), dir
}

// psReopen closes l and opens its directory again with psOpts.
func psReopen(t testing.TB, l *Log) *Log {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return psOpen(t, l.Dir(), psOpts(t))
}

// psData builds a data batch of n records for producer pid (pid -1: a
// plain batch) starting at sequence seq.
func psData(t testing.TB, pid int64, epoch int16, seq int32, n int, txn bool) []byte {
	t.Helper()
	spec := batch.NewBatchSpec(0)
	if pid >= 0 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
	}
	spec.Transactional = txn
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: psTS + int64(seq%1000) + int64(i),
			Key: fmt.Appendf(nil, "p%d-e%d-s%d", pid, epoch, int64(seq)+int64(i)), Value: []byte("value")}
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// psMarker builds a COMMIT (commit) or ABORT marker batch.
func psMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32) []byte {
	return batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: psTS + 500,
		ProducerID: pid, ProducerEpoch: epoch}, commit, coordinatorEpoch)
}

// psBarrier builds a MIRROR_PID_RESET barrier batch for sourceClusterID.
func psBarrier(sourceClusterID string) []byte {
	return batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: psTS + 600},
		sourceClusterID)
}

// psAt copies the batches into one buffer at consecutive offsets from
// base, with partition leader epoch ple (a follower's or mirror's fetch).
func psAt(base int64, ple int32, bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		start := len(out)
		out = append(out, b...)
		v := batch.View(out[start:])
		v.SetBaseOffset(base)
		v.SetPartitionLeaderEpoch(ple)
		base += int64(v.LastOffsetDelta()) + 1
	}
	return out
}

// psEpoch is the leader epoch a local append uses: the latest of the
// leader-epoch cache, at least 1 (appends below it are refused).
func psEpoch(l *Log) int32 {
	if e := l.LeaderEpochs(); len(e) > 0 {
		return max(e[len(e)-1].Epoch, 1)
	}
	return 1
}

// psLeader appends b as a client at psEpoch and fails on error.
func psLeader(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(b, psEpoch(l))
	if err != nil {
		t.Fatalf("client append: %v", err)
	}
	return info
}

// psCoord appends b as the coordinator at psEpoch.
func psCoord(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.AppendAsCoordinator(b, psEpoch(l))
	if err != nil {
		t.Fatalf("coordinator append: %v", err)
	}
	return info
}

// psMirror appends b (offsets already set) as a mirror.
func psMirror(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.AppendAsMirror(b)
	if err != nil {
		t.Fatalf("mirror append: %v", err)
	}
	return info
}

// psReplay rebuilds the producer state of l from its bytes alone: a fresh
// Manager replays (origin Replay) every batch from the log start to the
// log end as Log.Read returns it, one batch per append.
func psReplay(t testing.TB, l *Log) *producerstate.Manager {
	t.Helper()
	m := producerstate.New(producerstate.Config{ProducerIDExpirationMs: 1 << 50})
	m.Reset(l.LogStartOffset())
	if start := l.LogStartOffset(); start > 0 {
		m.OnLogStartOffsetIncremented(start)
	}
	var a producerstate.Append
	for _, b := range ltBatches(t, l) {
		m.Begin(&a, producerstate.Replay, 0)
		if err := m.Validate(&a, batch.View(b.Bytes), b.Base); err != nil {
			t.Fatalf("replay of the batch at %d: %v", b.Base, err)
		}
		m.Commit(&a)
	}
	return m
}

// psEquivalent reports how got differs from want, where got may have
// gone through a snapshot (which keeps only each producer's newest cached
// batch, producer-state.md §5.1) and want is a full replay: every scalar
// field must match, and got's cached batches must be a suffix of want's,
// non-empty iff want's is. The oldest batch of got may have been restored
// from a snapshot, whose timestamp is the entry's last timestamp (§5.1),
// so its timestamp is not compared.
func psEquivalent(got, want []ProducerEntry) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d producers %v, want %d %v", len(got), psPids(got), len(want), psPids(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		gs, ws := g, w
		gs.Batches, ws.Batches, gs.NumBatches, ws.NumBatches = [producerstate.MaxCachedBatches]producerstate.BatchMetadata{},
			[producerstate.MaxCachedBatches]producerstate.BatchMetadata{}, 0, 0
		if gs != ws {
			return fmt.Errorf("producer %d: %+v, want %+v", g.ProducerID, g, w)
		}
		gb, wb := g.CachedBatches(), w.CachedBatches()
		if len(gb) > len(wb) || (len(gb) == 0) != (len(wb) == 0) {
			return fmt.Errorf("producer %d: cached batches %v, want a non-empty suffix of %v", g.ProducerID, gb, wb)
		}
		tail := wb[len(wb)-len(gb):]
		for j := range gb {
			x, y := gb[j], tail[j]
			if j == 0 {
				x.Timestamp, y.Timestamp = 0, 0
			}
			if x != y {
				return fmt.Errorf("producer %d: cached batches %v, want a suffix of %v", g.ProducerID, gb, wb)
			}
		}
	}
	return nil
}

func psPids(es []ProducerEntry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.ProducerID
	}
	return out
}

// psCheckEquivalent fails unless got is equivalent to want (psEquivalent).
func psCheckEquivalent(t testing.TB, what string, got, want []ProducerEntry) {
	t.Helper()
	if err := psEquivalent(got, want); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// psCheckExact fails unless got equals want field for field.
func psCheckExact(t testing.TB, what string, got, want []ProducerEntry) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// psFrozen is everything a rejected append must leave unchanged.
type psFrozen struct {
	LEO       int64
	LSO       int64
	Producers []ProducerEntry
	Barriers  []int64
	Files     map[string][]byte
}

func psFreeze(t testing.TB, l *Log) psFrozen {
	t.Helper()
	files := map[string][]byte{}
	for _, name := range ltNames(t, l.Dir()) {
		b, err := os.ReadFile(filepath.Join(l.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return psFrozen{LEO: l.LogEndOffset(), LSO: l.LastStableOffset(), Producers: l.Producers(),
		Barriers: l.Barriers(), Files: files}
}

// psCheckUnchanged fails unless l is still exactly as frozen.
func psCheckUnchanged(t testing.TB, what string, l *Log, before psFrozen) {
	t.Helper()
	after := psFreeze(t, l)
	if after.LEO != before.LEO || after.LSO != before.LSO {
		t.Fatalf("%s: LEO/LSO %d/%d, want %d/%d", what, after.LEO, after.LSO, before.LEO, before.LSO)
	}
	psCheckExact(t, what+": producers", after.Producers, before.Producers)
	if !slices.Equal(after.Barriers, before.Barriers) {
		t.Fatalf("%s: barriers %v, want %v", what, after.Barriers, before.Barriers)
	}
	if len(after.Files) != len(before.Files) {
		t.Fatalf("%s: files %v, want %v", what, mapKeys(after.Files), mapKeys(before.Files))
	}
	for name, b := range before.Files {
		a, ok := after.Files[name]
		if !ok || !slices.Equal(a, b) {
			t.Fatalf("%s: file %s changed (%d bytes, was %d)", what, name, len(a), len(b))
		}
	}
}

func mapKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// psWant fails unless err matches target (errors.Is).
func psWant(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

// psProducer returns pid's entry, failing if it is absent.
func psProducer(t testing.TB, l *Log, pid int64) ProducerEntry {
	t.Helper()
	e, ok := l.ProducerState(pid)
	if !ok {
		t.Fatalf("producer %d absent; producers %v", pid, psPids(l.Producers()))
	}
	return e
}

// psSnapForm is e as a snapshot stores it (its newest cached batch only).
func psSnapForm(e ProducerEntry) snapshot.Entry {
	return snapshot.Entry{ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch, LastSequence: e.LastSequence,
		LastOffset: e.LastOffset, OffsetDelta: e.OffsetDelta, Timestamp: e.LastTimestamp,
		CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnFirstOffset: e.CurrentTxnFirstOffset}
}

// psCheckSnapshot reads the snapshot at offset in dir and fails unless it
// holds exactly the producers (by id) in snapshot form.
func psCheckSnapshot(t testing.TB, dir string, offset int64, producers []ProducerEntry) {
	t.Helper()
	entries, err := snapshot.Read(filepath.Join(dir, filenames.Make(offset, filenames.Snapshot)))
	if err != nil {
		t.Fatalf("snapshot at %d: %v", offset, err)
	}
	got := map[int64]snapshot.Entry{}
	for _, e := range entries {
		if _, dup := got[e.ProducerID]; dup {
			t.Fatalf("snapshot at %d: producer %d twice", offset, e.ProducerID)
		}
		got[e.ProducerID] = e
	}
	want := map[int64]snapshot.Entry{}
	for _, e := range producers {
		want[e.ProducerID] = psSnapForm(e)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot at %d:\n got  %+v\n want %+v", offset, got, want)
	}
}

// psSnapshots lists the snapshot offsets in dir.
func psSnapshots(t testing.TB, dir string) []int64 {
	t.Helper()
	files, err := snapshot.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, f := range files {
		out = append(out, f.Offset)
	}
	slices.Sort(out)
	return out
}

// psReadAll returns the batches Read returns from the log start up to upTo.
func psReadAll(t testing.TB, l *Log, upTo int64) []batch.View {
	t.Helper()
	var out []batch.View
	next := l.LogStartOffset()
	for next < min(upTo, l.LogEndOffset()) {
		v, err := l.Read(next, 1<<20, upTo)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		if len(v.Records) == 0 {
			v.Release()
			break
		}
		it := batch.NewIterator(v.Records, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			out = append(out, batch.View(slices.Clone(b)))
			next = b.NextOffset()
		}
		v.Release()
	}
	return out
}

func TestProducers_IdempotentSequenceContinuity(t *testing.T) {
	l, _ := psNew(t)
	var infos []AppendInfo
	seq := int32(0)
	for i := 0; i < 7; i++ {
		n := 1 + i%3
		infos = append(infos, psLeader(t, l, psData(t, 7, 0, seq, n, false)))
		seq += int32(n)
	}
	e := psProducer(t, l, 7)
	if e.ProducerEpoch != 0 || e.LastSequence != seq-1 || e.LastOffset != infos[6].LastOffset || e.NumBatches != 5 {
		t.Fatalf("entry %+v, want epoch 0 last seq %d last offset %d, 5 cached", e, seq-1, infos[6].LastOffset)
	}
	if e.FirstSequence() != 3 { // batches 0..1 (seq 0..2) fell out of the window
		t.Fatalf("first cached sequence %d, want 3", e.FirstSequence())
	}
	// A multi-batch client append continues the sequence batch by batch.
	two := append(psData(t, 7, 0, seq, 2, false), psData(t, 7, 0, seq+2, 1, false)...)
	psLeader(t, l, two)
	seq += 3
	psCheckExact(t, "live vs replay", l.Producers(), psReplay(t, l).Producers())
	before := l.Producers()

	// Close/Open: the state comes from the snapshot at LEO, which keeps
	// only the newest batch of each producer (§5.1, T20).
	l = psReopen(t, l)
	e = psProducer(t, l, 7)
	if e.LastSequence != seq-1 || e.NumBatches != 1 {
		t.Fatalf("after reopen: %+v, want last seq %d and one cached batch", e, seq-1)
	}
	psCheckEquivalent(t, "after reopen", l.Producers(), before)
	var dup *producerstate.DuplicateSequenceError
	_, err := l.AppendAsLeader(psData(t, 7, 0, seq-1, 1, false), psEpoch(l))
	if !errors.As(err, &dup) || dup.LastOffset != l.LogEndOffset()-1 {
		t.Fatalf("retry of the newest batch after reopen: %v, want a duplicate at %d", err, l.LogEndOffset()-1)
	}
	_, err = l.AppendAsLeader(psData(t, 7, 0, seq-3, 2, false), psEpoch(l))
	psWant(t, "retry of an older batch after reopen", err, producerstate.ErrOutOfOrderSequence)
	psLeader(t, l, psData(t, 7, 0, seq, 2, false))
	seq += 2

	// Snapshot + replay: roll (snapshot), append, then reopen without the
	// close-time snapshot so that the tail is replayed.
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	rolled := l.LogEndOffset()
	for i := 0; i < 3; i++ {
		psLeader(t, l, psData(t, 7, 0, seq, 1, false))
		seq++
	}
	psLeader(t, l, psData(t, 8, 2, 40, 2, false))
	before = l.Producers()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, off := range psSnapshots(t, l.Dir()) {
		if off > rolled {
			if err := os.Remove(filepath.Join(l.Dir(), filenames.Make(off, filenames.Snapshot))); err != nil {
				t.Fatal(err)
			}
		}
	}
	l = psOpen(t, l.Dir(), psOpts(t))
	psCheckEquivalent(t, "snapshot at the roll + replay", l.Producers(), before)
	if e := psProducer(t, l, 7); e.NumBatches != 4 { // restored batch + 3 replayed
		t.Fatalf("after snapshot+replay: %d cached batches, want 4", e.NumBatches)
	}
	psLeader(t, l, psData(t, 7, 0, seq, 1, false))
	psLeader(t, l, psData(t, 8, 2, 42, 1, false))

	// Replay from the log start only (no snapshot at all) gives back the
	// full deques: exactly the live state.
	before = l.Producers()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.DeleteAbove(l.Dir(), -1); err != nil {
		t.Fatal(err)
	}
	l = psOpen(t, l.Dir(), psOpts(t))
	psCheckExact(t, "full replay", l.Producers(), before)
	psCheckExact(t, "full replay vs reference", l.Producers(), psReplay(t, l).Producers())
}

func TestProducers_DuplicateRetryWritesNothing(t *testing.T) {
	l, _ := psNew(t)
	var infos []AppendInfo
	for i := 0; i < 5; i++ {
		infos = append(infos, psLeader(t, l, psData(t, 3, 1, int32(i*2), 2, false)))
	}
	// T06: the 3rd cached batch resent exactly.
	before := psFreeze(t, l)
	_, err := l.AppendAsLeader(psData(t, 3, 1, 4, 2, false), psEpoch(l))
	var dup *producerstate.DuplicateSequenceError
	if !errors.As(err, &dup) {
		t.Fatalf("retry: %v, want *DuplicateSequenceError", err)
	}
	if dup.FirstOffset != infos[2].FirstOffset || dup.LastOffset != infos[2].LastOffset || dup.ProducerID != 3 ||
		dup.FirstSequence != 4 || dup.LastSequence != 5 {
		t.Fatalf("duplicate %+v, want offsets %d..%d", dup, infos[2].FirstOffset, infos[2].LastOffset)
	}
	psWant(t, "retry", err, producerstate.ErrDuplicateSequence)
	if producerstate.KafkaErrorCode(err) != 0 {
		t.Fatalf("duplicate answers code %d, want 0 (success)", producerstate.KafkaErrorCode(err))
	}
	psCheckUnchanged(t, "after a duplicate", l, before)

	// A duplicate inside a multi-batch client append rejects the whole append.
	_, err = l.AppendAsLeader(append(psData(t, 3, 1, 8, 2, false), psData(t, 3, 1, 10, 1, false)...), psEpoch(l))
	psWant(t, "duplicate then new batch", err, producerstate.ErrDuplicateSequence)
	psCheckUnchanged(t, "after a multi-batch duplicate", l, before)

	// T07: after a sixth batch the oldest is no longer cached.
	psLeader(t, l, psData(t, 3, 1, 10, 2, false))
	before = psFreeze(t, l)
	_, err = l.AppendAsLeader(psData(t, 3, 1, 0, 2, false), psEpoch(l))
	psWant(t, "resend of an evicted batch", err, producerstate.ErrOutOfOrderSequence)
	psCheckUnchanged(t, "after an evicted resend", l, before)
	// T08: a partial overlap is not a duplicate.
	_, err = l.AppendAsLeader(psData(t, 3, 1, 10, 1, false), psEpoch(l))
	psWant(t, "partial overlap", err, producerstate.ErrOutOfOrderSequence)
	// A different epoch never matches the cache.
	_, err = l.AppendAsLeader(psData(t, 3, 2, 10, 2, false), psEpoch(l))
	psWant(t, "same sequences, new epoch", err, producerstate.ErrOutOfOrderSequence)
	psCheckUnchanged(t, "after rejected resends", l, before)
}

func TestProducers_OutOfOrderRejected(t *testing.T) {
	l, _ := psNew(t)
	// T01: an unknown producer may start at any sequence.
	psLeader(t, l, psData(t, 7, 0, 17, 3, false))
	if e := psProducer(t, l, 7); e.LastSequence != 19 || e.NumBatches != 1 || e.ProducerEpoch != 0 {
		t.Fatalf("T01: %+v", e)
	}
	before := psFreeze(t, l)
	for _, seq := range []int32{21, 19, 0, 17} { // T03 gap, regressions
		_, err := l.AppendAsLeader(psData(t, 7, 0, seq, 1, false), psEpoch(l))
		psWant(t, fmt.Sprintf("seq %d after 19", seq), err, producerstate.ErrOutOfOrderSequence)
		if c := producerstate.KafkaErrorCode(err); c != 45 {
			t.Fatalf("code %d, want 45", c)
		}
	}
	// T16: an idempotent batch without a base sequence.
	_, err := l.AppendAsLeader(psData(t, 7, 0, -1, 1, false), psEpoch(l))
	if err == nil {
		t.Fatal("idempotent batch with sequence -1 accepted")
	}
	psCheckUnchanged(t, "after rejected sequences", l, before)
	psLeader(t, l, psData(t, 7, 0, 20, 1, false)) // T02

	// T04/T05: wrap-around at MaxInt32.
	psLeader(t, l, psData(t, 9, 0, 2147483646, 1, false))
	psLeader(t, l, psData(t, 9, 0, 2147483647, 3, false))
	e := psProducer(t, l, 9)
	if e.LastSequence != 1 || e.FirstSequence() != 2147483646 || e.CachedBatches()[1].FirstSequence() != 2147483647 {
		t.Fatalf("T05: %+v", e)
	}
	psLeader(t, l, psData(t, 9, 0, 2, 1, false))
	psLeader(t, l, psData(t, 11, 0, 2147483647, 1, false))
	psLeader(t, l, psData(t, 11, 0, 0, 5, false)) // T04
	psCheckExact(t, "live vs replay", l.Producers(), psReplay(t, l).Producers())
}

func TestProducers_EpochFencing(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, psData(t, 4, 3, 0, 2, false))
	before := psFreeze(t, l)
	_, err := l.AppendAsLeader(psData(t, 4, 2, 2, 1, false), psEpoch(l)) // T11
	psWant(t, "lower epoch", err, producerstate.ErrInvalidProducerEpoch)
	if c := producerstate.KafkaErrorCode(err); c != 47 {
		t.Fatalf("code %d, want 47", c)
	}
	_, err = l.AppendAsLeader(psData(t, 4, 4, 5, 1, false), psEpoch(l)) // T10
	psWant(t, "new epoch not at 0", err, producerstate.ErrOutOfOrderSequence)
	_, err = l.AppendAsCoordinator(psMarker(4, 2, true, 0), psEpoch(l)) // T28
	psWant(t, "marker with a lower epoch", err, producerstate.ErrInvalidProducerEpoch)
	psCheckUnchanged(t, "after fenced appends", l, before)

	psLeader(t, l, psData(t, 4, 4, 0, 1, false)) // T09
	if e := psProducer(t, l, 4); e.ProducerEpoch != 4 || e.NumBatches != 1 || e.LastSequence != 0 {
		t.Fatalf("T09: %+v", e)
	}
	// T21: a marker bumps the epoch and empties the deque; the producer
	// must then start at 0.
	psCoord(t, l, psMarker(4, 5, false, 3))
	before = psFreeze(t, l)
	_, err = l.AppendAsLeader(psData(t, 4, 5, 1, 1, false), psEpoch(l))
	psWant(t, "after an epoch-bumping marker", err, producerstate.ErrOutOfOrderSequence)
	_, err = l.AppendAsCoordinator(psMarker(4, 5, true, 2), psEpoch(l)) // T27
	psWant(t, "stale coordinator", err, producerstate.ErrTransactionCoordinatorFenced)
	psCheckUnchanged(t, "after a fenced coordinator", l, before)
	psLeader(t, l, psData(t, 4, 5, 0, 1, false))

	// T12: a follower accepts a lower epoch, which lowers the stored one.
	leo := l.LogEndOffset()
	if _, err := l.AppendAsFollower(psAt(leo, 1, psData(t, 4, 2, 77, 1, false))); err != nil {
		t.Fatal(err)
	}
	if e := psProducer(t, l, 4); e.ProducerEpoch != 2 || e.NumBatches != 1 || e.LastSequence != 77 {
		t.Fatalf("T12: %+v", e)
	}
	// T27 (replication): a lower coordinator epoch is accepted.
	leo = l.LogEndOffset()
	if _, err := l.AppendAsFollower(psAt(leo, 1, psMarker(4, 2, true, 1))); err != nil {
		t.Fatal(err)
	}
	if e := psProducer(t, l, 4); e.CoordinatorEpoch != 1 {
		t.Fatalf("T27: %+v", e)
	}
	psCheckExact(t, "live vs replay", l.Producers(), psReplay(t, l).Producers())
}

func TestProducers_RejectedBatchInMultiBatchAppend(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, psData(t, 1, 0, 0, 2, false))
	psLeader(t, l, psData(t, 2, 0, 0, 1, true))
	before := psFreeze(t, l)

	// Leader: the third batch breaks the sequence the first one continued.
	req := slices.Concat(psData(t, 1, 0, 2, 2, false), psData(t, 3, 0, 0, 1, false), psData(t, 1, 0, 9, 1, false))
	_, err := l.AppendAsLeader(req, psEpoch(l))
	psWant(t, "leader, bad third batch", err, producerstate.ErrOutOfOrderSequence)
	psCheckUnchanged(t, "leader, bad third batch", l, before)
	// Leader: a non-transactional batch of a producer with an open txn.
	req = slices.Concat(psData(t, 1, 0, 2, 1, false), psData(t, 2, 0, 1, 1, false))
	_, err = l.AppendAsLeader(req, psEpoch(l))
	psWant(t, "leader, non-transactional in a txn", err, producerstate.ErrInvalidTxnState)
	psCheckUnchanged(t, "leader, non-transactional in a txn", l, before)

	// Follower: replication checks no sequence, but still refuses a
	// non-transactional batch inside an open transaction (T17), and a
	// control batch with a producer id that is neither COMMIT nor ABORT.
	leo := l.LogEndOffset()
	chunk := psAt(leo, 2, psData(t, 5, 0, 0, 2, true), psData(t, 6, 0, 0, 1, false), psData(t, 5, 0, 2, 1, false))
	_, err = l.AppendAsFollower(chunk)
	psWant(t, "follower, T17", err, producerstate.ErrInvalidTxnState)
	psCheckUnchanged(t, "follower, T17", l, before)
	odd := batch.AppendControlBatch(nil, batch.ControlSpec{Timestamp: psTS, ProducerID: 6, ProducerEpoch: 0},
		batch.ControlLeaderChange, false, []byte{0, 0, 0, 0, 0, 1, 1, 1, 0})
	chunk = psAt(leo, 2, psData(t, 6, 0, 0, 1, false), odd)
	_, err = l.AppendAsFollower(chunk)
	psWant(t, "follower, row 18", err, producerstate.ErrUnknownControlType)
	psCheckUnchanged(t, "follower, row 18", l, before)

	// The same kinds of appends, valid, go through whole.
	psLeader(t, l, slices.Concat(psData(t, 1, 0, 2, 2, false), psData(t, 3, 0, 0, 1, false), psData(t, 1, 0, 4, 1, false)))
	leo = l.LogEndOffset()
	if _, err := l.AppendAsFollower(psAt(leo, 2, psData(t, 5, 0, 0, 2, true), psData(t, 6, 0, 0, 1, false),
		psData(t, 5, 0, 2, 1, true))); err != nil {
		t.Fatal(err)
	}
	psCheckExact(t, "live vs replay", l.Producers(), psReplay(t, l).Producers())
}

func TestProducers_TransactionPinsLastStableOffset(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, makeBatch(t, 3, 10, psTS)) // plain data 0..2
	txn := psLeader(t, l, psData(t, 7, 0, 0, 3, true))
	psLeader(t, l, psData(t, 8, 0, 0, 2, false)) // another producer after the txn
	if txn.FirstOffset != 3 {
		t.Fatalf("txn at %d, want 3", txn.FirstOffset)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != 3 { // T23
		t.Fatalf("LSO %d, want 3 (the open transaction)", lso)
	}
	for _, v := range psReadAll(t, l, l.LastStableOffset()) {
		if v.ProducerID() == 7 || v.LastOffset() >= 3 {
			t.Fatalf("read bounded by the LSO returned the batch at %d (producer %d)", v.BaseOffset(), v.ProducerID())
		}
	}
	if got := len(psReadAll(t, l, l.LastStableOffset())); got != 1 {
		t.Fatalf("%d batches below the LSO, want 1", got)
	}
	// T24: the COMMIT releases the LSO once the HW passes the marker.
	m := psCoord(t, l, psMarker(7, 0, true, 0))
	l.SetHighWatermark(m.LastOffset)
	if lso := l.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO %d with the marker at the HW, want 3", lso)
	}
	l.SetHighWatermark(m.LastOffset + 1)
	if lso := l.LastStableOffset(); lso != m.LastOffset+1 {
		t.Fatalf("LSO %d after the commit, want %d", lso, m.LastOffset+1)
	}
	if e := psProducer(t, l, 7); e.CurrentTxnFirstOffset != -1 || e.CoordinatorEpoch != 0 {
		t.Fatalf("after commit: %+v", e)
	}
	if got := len(psReadAll(t, l, l.LastStableOffset())); got != 4 {
		t.Fatalf("%d batches below the LSO, want 4", got)
	}
	if a, err := l.AbortedTransactions(0, l.LogEndOffset()); err != nil || len(a) != 0 {
		t.Fatalf("a COMMIT left aborted transactions %v (%v)", a, err)
	}
	// T26: a marker for a producer without an open txn changes no offset.
	psCoord(t, l, psMarker(8, 0, true, 4))
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != l.LogEndOffset() {
		t.Fatalf("LSO %d after an empty transaction, want %d", lso, l.LogEndOffset())
	}
	if e := psProducer(t, l, 8); e.CoordinatorEpoch != 4 || e.NumBatches != 1 {
		t.Fatalf("T26: %+v", e)
	}
}

func TestProducers_AbortWritesTxnIndex(t *testing.T) {
	l, dir := psNew(t)
	psLeader(t, l, makeBatch(t, 2, 10, psTS))
	t7 := psLeader(t, l, psData(t, 7, 0, 0, 2, true))
	t8 := psLeader(t, l, psData(t, 8, 0, 0, 1, true))
	psLeader(t, l, psData(t, 7, 0, 2, 1, true))
	ab := psCoord(t, l, psMarker(7, 0, false, 0))
	want := []index.AbortedTxn{{ProducerID: 7, FirstOffset: t7.FirstOffset, LastOffset: ab.FirstOffset,
		LastStableOffset: t8.FirstOffset}} // T25: the other producer's open txn
	got, err := l.AbortedTransactions(0, l.LogEndOffset())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions %+v (%v), want %+v", got, err, want)
	}
	l.SetHighWatermark(ab.LastOffset + 1)
	if lso := l.LastStableOffset(); lso != t8.FirstOffset {
		t.Fatalf("LSO %d, want %d (producer 8 still open)", lso, t8.FirstOffset)
	}
	ab8 := psCoord(t, l, psMarker(8, 0, false, 0))
	want = append(want, index.AbortedTxn{ProducerID: 8, FirstOffset: t8.FirstOffset, LastOffset: ab8.FirstOffset,
		LastStableOffset: ab8.FirstOffset + 1})
	readIndex := func() []index.AbortedTxn {
		b, err := os.ReadFile(filenames.Path(dir, l.Segments()[0], filenames.TxnIndex))
		if err != nil {
			t.Fatal(err)
		}
		entries, err := index.DecodeTxnIndex(b)
		if err != nil {
			t.Fatal(err)
		}
		return entries
	}
	if got := readIndex(); !reflect.DeepEqual(got, want) {
		t.Fatalf(".txnindex %+v, want %+v", got, want)
	}
	if got, _ := l.AbortedTransactions(0, l.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions %+v, want %+v", got, want)
	}
	// An aborted transaction overlaps a fetch when its marker is at or
	// after the fetch offset.
	if got, _ := l.AbortedTransactions(ab.FirstOffset, l.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions from %d: %+v, want %+v", ab.FirstOffset, got, want)
	}
	if got, _ := l.AbortedTransactions(ab.FirstOffset+1, l.LogEndOffset()); !reflect.DeepEqual(got, want[1:]) {
		t.Fatalf("aborted transactions from %d: %+v, want %+v", ab.FirstOffset+1, got, want[1:])
	}
	if got, _ := l.AbortedTransactions(0, t7.FirstOffset); len(got) != 0 {
		t.Fatalf("aborted transactions below %d: %+v", t7.FirstOffset, got)
	}
	l = psReopen(t, l)
	if got := readIndex(); !reflect.DeepEqual(got, want) {
		t.Fatalf(".txnindex after reopen %+v, want %+v", got, want)
	}
	if got, _ := l.AbortedTransactions(0, l.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions after reopen %+v, want %+v", got, want)
	}
}

// TestProducers_AbortMiddleTxnIndexLSO: with three open transactions,
// aborting the middle one stores, in the .txnindex entry's
// lastStableOffset field, the first offset of the earliest other open
// transaction (Kafka: the first of ongoingTxns other than the aborted
// producer's), not the latest; the field survives a reopen.
func TestProducers_AbortMiddleTxnIndexLSO(t *testing.T) {
	l, dir := psNew(t)
	t7 := psLeader(t, l, psData(t, 7, 0, 0, 2, true))
	t8 := psLeader(t, l, psData(t, 8, 0, 0, 2, true))
	t9 := psLeader(t, l, psData(t, 9, 0, 0, 2, true))
	ab8 := psCoord(t, l, psMarker(8, 0, false, 0))
	ab7 := psCoord(t, l, psMarker(7, 0, false, 0))
	want := []index.AbortedTxn{
		{ProducerID: 8, FirstOffset: t8.FirstOffset, LastOffset: ab8.FirstOffset, LastStableOffset: t7.FirstOffset},
		{ProducerID: 7, FirstOffset: t7.FirstOffset, LastOffset: ab7.FirstOffset, LastStableOffset: t9.FirstOffset},
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			l = psReopen(t, l)
		}
		b, err := os.ReadFile(filenames.Path(dir, l.Segments()[0], filenames.TxnIndex))
		if err != nil {
			t.Fatal(err)
		}
		got, err := index.DecodeTxnIndex(b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf(".txnindex (reopened %v) %+v (%v), want %+v", reopen, got, err, want)
		}
	}
}

func TestProducers_ClientMayNotAppendControlBatches(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, psData(t, 7, 0, 0, 1, true))
	before := psFreeze(t, l)
	for name, b := range map[string][]byte{
		"commit":     psMarker(7, 0, true, 0),
		"abort":      psMarker(7, 0, false, 0),
		"in a batch": slices.Concat(psData(t, 7, 0, 1, 1, true), psMarker(7, 0, true, 0)),
	} {
		if _, err := l.AppendAsLeader(b, psEpoch(l)); err == nil {
			t.Fatalf("%s: a client appended a control batch", name)
		} else if !errors.Is(err, ErrPolicy) && !errors.Is(err, producerstate.ErrControlFromClient) {
			t.Fatalf("%s: error %v, want ErrPolicy or ErrControlFromClient", name, err)
		}
		psCheckUnchanged(t, name, l, before)
	}
}

// psClock is a settable clock.
type psClock struct{ ms atomic.Int64 }

func (c *psClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

func TestProducers_ExpireProducers(t *testing.T) {
	var clock psClock
	clock.ms.Store(psTS)
	o := psOpts(t)
	o.Now, o.ProducerIDExpirationMs = clock.now, 1000
	l := psOpen(t, t.TempDir(), o)
	psLeader(t, l, psData(t, 1, 0, 0, 1, false)) // timestamp psTS
	psLeader(t, l, psData(t, 2, 0, 0, 1, true))  // open transaction
	psLeader(t, l, psData(t, 3, 0, 10, 1, false))
	snaps := psSnapshots(t, l.Dir())

	clock.ms.Store(psTS + 999)
	if n := l.ExpireProducers(); n != 0 {
		t.Fatalf("expired %d producers before their time", n)
	}
	clock.ms.Store(psTS + 1000) // T30: producer 1 (ts psTS) goes
	if n := l.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	if got := psPids(l.Producers()); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("producers %v, want [2 3]", got)
	}
	clock.ms.Store(psTS + 1_000_000) // producer 2 has an open txn
	if n := l.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	if got := psPids(l.Producers()); !slices.Equal(got, []int64{2}) {
		t.Fatalf("producers %v, want [2] (open transaction)", got)
	}
	m := psCoord(t, l, psMarker(2, 0, true, 0)) // marker timestamp psTS+500
	l.SetHighWatermark(m.LastOffset + 1)
	if n := l.ExpireProducers(); n != 1 || len(l.Producers()) != 0 {
		t.Fatalf("after the commit: expired %d, producers %v", n, psPids(l.Producers()))
	}
	if got := psSnapshots(t, l.Dir()); !slices.Equal(got, snaps) {
		t.Fatalf("expiration wrote snapshots: %v, were %v", got, snaps)
	}
	// An expired producer is unknown again: any sequence is accepted.
	clock.ms.Store(psTS + 1000)
	psLeader(t, l, psData(t, 1, 0, 55, 1, false))
}

// psScriptOp is one step of a scripted log: an append (coord: as the
// coordinator, else as a client) or a roll.
type psScriptOp struct {
	roll  bool
	coord bool
	b     []byte
}

// psTruncateScript has producers with transactions, aborts, commits and
// epoch bumps over four segments.
func psTruncateScript(t testing.TB) []psScriptOp {
	return []psScriptOp{
		{b: psData(t, 1, 0, 0, 3, false)},
		{b: psData(t, 2, 0, 0, 2, true)},
		{b: psData(t, 1, 0, 3, 1, false)},
		{roll: true},
		{b: psData(t, 1, 0, 4, 2, false)},
		{b: psData(t, 3, 0, 0, 1, true)},
		{coord: true, b: psMarker(2, 0, false, 0)},
		{b: psData(t, 1, 0, 6, 1, false)},
		{roll: true},
		{b: psData(t, 1, 1, 0, 1, false)},
		{coord: true, b: psMarker(3, 0, true, 1)},
		{b: psData(t, 2, 0, 2, 2, true)},
		{b: makeBatch(t, 2, 10, psTS)},
		{roll: true},
		{b: psData(t, 4, 0, 0, 1, false)},
		{b: psData(t, 1, 1, 1, 2, false)},
		{b: psData(t, 3, 0, 1, 1, true)},
	}
}

// psRunScript applies ops to l, stopping as soon as the log end reaches
// stop.
func psRunScript(t testing.TB, l *Log, ops []psScriptOp, stop int64) {
	t.Helper()
	for _, op := range ops {
		if l.LogEndOffset() >= stop {
			return
		}
		switch {
		case op.roll:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		case op.coord:
			psCoord(t, l, op.b)
		default:
			psLeader(t, l, op.b)
		}
	}
}

func TestProducers_TruncateToRebuildsState(t *testing.T) {
	ops := psTruncateScript(t)
	full, _ := psNew(t)
	psRunScript(t, full, ops, 1<<62)
	if len(full.Segments()) != 4 {
		t.Fatalf("segments %v, want 4", full.Segments())
	}
	var targets []int64
	for _, b := range ltBatches(t, full) {
		targets = append(targets, b.Base)
	}
	for _, target := range targets {
		t.Run(fmt.Sprint(target), func(t *testing.T) {
			l, dir := psNew(t)
			psRunScript(t, l, ops, 1<<62)
			l.SetHighWatermark(l.LogEndOffset())
			if err := l.TruncateTo(target); err != nil {
				t.Fatal(err)
			}
			for _, off := range psSnapshots(t, dir) {
				if off > target {
					t.Fatalf("snapshot %d above the truncation point %d survived", off, target)
				}
			}
			fresh, _ := psNew(t)
			psRunScript(t, fresh, ops, target)
			if fresh.LogEndOffset() != target {
				t.Fatalf("fresh log ends at %d, want %d", fresh.LogEndOffset(), target)
			}
			psCheckEquivalent(t, "truncated vs fresh", l.Producers(), fresh.Producers())
			psCheckEquivalent(t, "truncated vs replay", l.Producers(), psReplay(t, l).Producers())
			l.SetHighWatermark(target)
			fresh.SetHighWatermark(target)
			if a, b := l.LastStableOffset(), fresh.LastStableOffset(); a != b {
				t.Fatalf("LSO %d, fresh %d", a, b)
			}
			a1, err1 := l.AbortedTransactions(0, target)
			a2, err2 := fresh.AbortedTransactions(0, target)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(a1, a2) {
				t.Fatalf("aborted transactions %v (%v), fresh %v (%v)", a1, err1, a2, err2)
			}
			// Both go on identically: every producer continues.
			for _, lg := range []*Log{l, fresh} {
				for _, e := range lg.Producers() {
					if e.CurrentTxnFirstOffset >= 0 {
						psCoord(t, lg, psMarker(e.ProducerID, e.ProducerEpoch, true, max(e.CoordinatorEpoch, 0)))
					}
					psLeader(t, lg, psData(t, e.ProducerID, e.ProducerEpoch, e.LastSequence+1, 1, false))
				}
			}
			psCheckEquivalent(t, "after more appends", l.Producers(), fresh.Producers())
			l = psReopen(t, l)
			psCheckEquivalent(t, "reopened", l.Producers(), psReplay(t, l).Producers())
		})
	}
}

func TestProducers_TruncateFullyAndStartAt(t *testing.T) {
	l, dir := psNew(t)
	psLeader(t, l, psData(t, 1, 0, 0, 3, false))
	psLeader(t, l, psData(t, 2, 0, 0, 1, true))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	psLeader(t, l, psData(t, 1, 0, 3, 1, false))
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if p := l.Producers(); len(p) != 0 {
		t.Fatalf("producers %v after full truncation", psPids(p))
	}
	if s := psSnapshots(t, dir); len(s) != 0 { // T42
		t.Fatalf("snapshots %v after full truncation", s)
	}
	l.SetHighWatermark(500)
	if lso := l.LastStableOffset(); lso != 500 {
		t.Fatalf("LSO %d, want 500", lso)
	}
	psLeader(t, l, psData(t, 1, 0, 0, 1, false)) // producer 1 is unknown again
	psLeader(t, l, psData(t, 2, 3, 9, 1, false)) // producer 2 has no open txn any more
	l = psReopen(t, l)
	psCheckExact(t, "reopened", l.Producers(), psReplay(t, l).Producers())
}

func TestProducers_SetLogStartOffsetThenReopen(t *testing.T) {
	l, dir := psNew(t)
	psLeader(t, l, psData(t, 1, 0, 0, 2, false))
	psLeader(t, l, psData(t, 2, 0, 0, 1, false))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	psLeader(t, l, psData(t, 3, 0, 0, 1, false))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	psLeader(t, l, psData(t, 3, 0, 1, 1, false))
	before := l.Producers()
	start := l.Segments()[1]
	if err := l.SetLogStartOffset(start); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); got[0] != start {
		t.Fatalf("segments %v after SetLogStartOffset(%d)", got, start)
	}
	psCheckExact(t, "in memory after the start moved (T32)", l.Producers(), before)
	for _, off := range psSnapshots(t, dir) {
		if off < start {
			t.Fatalf("snapshot %d below the first segment %d kept", off, start)
		}
	}
	// Reopen with the persisted start: the close-time snapshot keeps the
	// producers last seen below the start.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o := psOpts(t)
	o.LogStartOffset = start
	l = psOpen(t, dir, o)
	psCheckEquivalent(t, "reopened", l.Producers(), before)
	psLeader(t, l, psData(t, 1, 0, 2, 1, false))
	psLeader(t, l, psData(t, 3, 0, 2, 1, false))
	// Without snapshots the state is a replay from the start: producers
	// seen only below it are gone (T37, accepted Kafka behaviour).
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.DeleteAbove(dir, -1); err != nil {
		t.Fatal(err)
	}
	l = psOpen(t, dir, o)
	if got := psPids(l.Producers()); !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("producers %v after a replay from %d, want [1 3]", got, start)
	}
	psCheckExact(t, "replayed", l.Producers(), psReplay(t, l).Producers())
}

func TestProducers_SnapshotsMatchProducers(t *testing.T) {
	l, dir := psNew(t)
	seq, epoch := map[int64]int32{}, map[int64]int16{}
	for round := 0; round < 4; round++ {
		for pid := int64(1); pid <= 3+int64(round); pid++ {
			psLeader(t, l, psData(t, pid, epoch[pid], seq[pid], 2, pid == 2))
			seq[pid] += 2
		}
		if round == 2 {
			psCoord(t, l, psMarker(2, 1, false, 5))
			seq[2], epoch[2] = 0, 1
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		psCheckSnapshot(t, dir, l.LogEndOffset(), l.Producers())
	}
	psLeader(t, l, psData(t, 9, 4, 0, 1, false))
	want, leo := l.Producers(), l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	psCheckSnapshot(t, dir, leo, want)
	// Snapshots sit at segment bases plus the close-time one at LEO.
	segs, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, e := range segs {
		if n, err := filenames.Parse(e.Name()); err == nil && n.Kind == filenames.Log && n.Offset > 0 {
			bases = append(bases, n.Offset)
		}
	}
	slices.Sort(bases)
	if got := psSnapshots(t, dir); !slices.Equal(got, append(bases, leo)) {
		t.Fatalf("snapshots %v, want %v", got, append(bases, leo))
	}
}

// TestProducers_TruncateWritesSnapshotAtTarget is T36: truncation deletes
// snapshots above the target, loads the newest below and writes one at
// the target.
func TestProducers_TruncateWritesSnapshotAtTarget(t *testing.T) {
	l, dir := psNew(t)
	var rolls []int64
	for i := 0; i < 3; i++ {
		psLeader(t, l, psData(t, 1, 0, int32(i*4), 2, false))
		psLeader(t, l, psData(t, 1, 0, int32(i*4+2), 2, false))
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		rolls = append(rolls, l.LogEndOffset())
	}
	psLeader(t, l, psData(t, 1, 0, 12, 2, false))
	target := rolls[1] + 2
	if err := l.TruncateTo(target); err != nil {
		t.Fatal(err)
	}
	// Snapshots above the cut are gone, and one is written at the cut
	// (producer-state.md §4.4, T36) so the next load starts there.
	if got, want := psSnapshots(t, dir), []int64{rolls[0], rolls[1], target}; !slices.Equal(got, want) {
		t.Fatalf("snapshots %v after truncation to %d, want %v", got, target, want)
	}
	psCheckEquivalent(t, "after truncation", l.Producers(), psReplay(t, l).Producers())
}

// TestLastStableOffsetClampedToLogStartAfterReopen: after a reopen with
// a log start above an open transaction's first offset, the LSO is
// clamped up to the log start (§1.4, T29), as on the live log.
func TestLastStableOffsetClampedToLogStartAfterReopen(t *testing.T) {
	l, dir := psNew(t)
	psLeader(t, l, makeBatch(t, 2, 10, psTS))
	txn := psLeader(t, l, psData(t, 7, 0, 0, 2, true)) // open at 2
	psLeader(t, l, makeBatch(t, 4, 10, psTS))
	start := txn.FirstOffset + 3
	if err := l.SetLogStartOffset(start); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != start {
		t.Fatalf("live LSO %d, want the log start %d", lso, start)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o := psOpts(t)
	o.LogStartOffset = start
	l = psOpen(t, dir, o)
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != start {
		t.Fatalf("LSO %d after reopen, want the log start %d (log start %d)", lso, start, l.LogStartOffset())
	}
}

// TestTruncateBelowLogStartKeepsLSOOnOpenTransaction: TruncateTo below
// the log start lowers the first unstable offset's floor with it, so a
// transaction opened after the truncation holds the LSO.
func TestTruncateBelowLogStartKeepsLSOOnOpenTransaction(t *testing.T) {
	l, _ := psNew(t)
	for i := 0; i < 5; i++ {
		psLeader(t, l, makeBatch(t, 2, 10, psTS))
	}
	if err := l.SetLogStartOffset(6); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 2 {
		t.Fatalf("log start %d, want 2", l.LogStartOffset())
	}
	txn := psLeader(t, l, psData(t, 7, 0, 0, 2, true)) // open at 2
	psLeader(t, l, makeBatch(t, 6, 10, psTS))
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != txn.FirstOffset {
		t.Fatalf("LSO %d with a transaction open at %d: read-committed readers see undecided records", lso, txn.FirstOffset)
	}
}

// TestHighWatermarkPrunesDecidedTransactions: a decided transaction
// leaves the producer state's unreplicated set when the high watermark
// passes its marker (§3.5).
func TestHighWatermarkPrunesDecidedTransactions(t *testing.T) {
	l, _ := psNew(t)
	first := psLeader(t, l, psData(t, 7, 0, 0, 1, true))
	psCoord(t, l, psMarker(7, 0, true, 0))
	for i := 1; i < 100; i++ {
		psLeader(t, l, psData(t, 7, 0, int32(i), 1, true))
		psCoord(t, l, psMarker(7, 0, true, 0))
	}
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != l.LogEndOffset() {
		t.Fatalf("LSO %d, want %d", lso, l.LogEndOffset())
	}
	if fuo, ok := l.psm.FirstUnstableOffset(); ok {
		t.Fatalf("first unstable offset %d (the transaction at %d) after the high watermark passed every marker", fuo, first.FirstOffset)
	}
}

// TestCompressedControlBatchKeepsFetchBytes: a follower fetch holding
// an uncompressed COMMIT marker and then a (non-standard)
// gzip-compressed ABORT marker is stored byte for byte: decoding the
// second marker does not overwrite the first in the fetch buffer.
func TestCompressedControlBatchKeepsFetchBytes(t *testing.T) {
	l, _ := psNew(t)
	if _, err := l.AppendAsFollower(psAt(0, 1, psData(t, 7, 0, 0, 1, true), psData(t, 8, 0, 0, 1, true))); err != nil {
		t.Fatal(err)
	}
	spec := batch.BatchSpec{Transactional: true, ProducerID: 8, BaseSequence: batch.NoSequence, Compression: batch.CompressionGzip}
	var b batch.Builder
	abort8, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Timestamp: psTS + 500,
		Key: batch.AppendControlKey(nil, batch.ControlAbort), Value: batch.AppendEndTxnMarker(nil, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	abort8[batch.OffAttributes+1] |= batch.AttrControl
	binary.BigEndian.PutUint32(abort8[batch.OffCRC:], batch.Checksum(abort8[batch.OffAttributes:]))
	fetch := psAt(2, 1, psMarker(7, 0, true, 0), abort8)
	want := bytes.Clone(fetch)
	if _, err := l.AppendAsFollower(fetch); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fetch, want) {
		t.Error("the append changed the caller's fetch buffer")
	}
	v, err := l.Read(2, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if !bytes.Equal(v.Records, want) {
		t.Fatalf("the stored markers differ from the fetched bytes")
	}
}

// TestProducerReadersWaitOutAppendAfterReopen: the commit of a known
// producer's batch writes its entry without the shard lock when no reader
// is counted, which is safe only because readers of entries wait out the
// append in flight on appendMu (producerstate.Manager.SetAppendLock). A Log
// whose producer state comes from recovery (every reopen) must give the
// Manager the same lock as a new one: a reader of entries started while
// appendMu is held waits for it, and readers racing known commits are
// ordered (run with -race).
func TestProducerReadersWaitOutAppendAfterReopen(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := map[bool]string{true: "clean", false: "unclean"}[clean]
		t.Run(name, func(t *testing.T) {
			l, dir := psNew(t)
			psLeader(t, l, psData(t, 7, 0, 0, 1, false))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			opts := psOpts(t)
			opts.CleanShutdown = clean
			l = psOpen(t, dir, opts)

			// A reader of entries waits for an append in flight.
			l.appendMu.Lock()
			got := make(chan struct{})
			go func() { l.ProducerState(7); l.Producers(); close(got) }()
			select {
			case <-got:
				l.appendMu.Unlock()
				t.Fatal("ProducerState returned while appendMu was held: the reopened Log's producer state has no append lock")
			case <-time.After(50 * time.Millisecond):
			}
			l.appendMu.Unlock()
			<-got

			// Known commits against readers: -race sees an unordered one.
			const n = 2000
			bs := make([][]byte, n+1)
			for seq := 1; seq <= n; seq++ {
				bs[seq] = psData(t, 7, 0, int32(seq), 1, false)
			}
			errs := make(chan error, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for seq := int32(1); seq <= n; seq++ {
					if _, err := l.AppendAsLeader(bs[seq], 1); err != nil {
						errs <- err
						return
					}
				}
			}()
			last := int32(-1)
			for reading := true; reading; {
				select {
				case <-done:
					reading = false
				default:
				}
				e, ok := l.ProducerState(7)
				if !ok {
					t.Fatal("producer 7 is gone")
				}
				if e.LastSequence < last {
					t.Fatalf("last sequence went back from %d to %d", last, e.LastSequence)
				}
				last = e.LastSequence
				l.Producers()
			}
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			if e := psProducer(t, l, 7); e.LastSequence != n {
				t.Fatalf("last sequence %d, want %d", e.LastSequence, n)
			}
		})
	}
}

// TestProducerReadersBesideWriters runs readers of producer entries
// against a writer that appends a known producer's batches, rolls and
// truncates a reopened log: every writer holds appendMu, which readers
// take after counting themselves, so none deadlocks and -race sees every
// lock-free commit ordered with the reads.
func TestProducerReadersBesideWriters(t *testing.T) {
	l, dir := psNew(t)
	psLeader(t, l, psData(t, 7, 0, 0, 1, false))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = psOpen(t, dir, psOpts(t))
	n := 3000
	if testing.Short() {
		n = 600
	}
	bs := make([][]byte, n+1)
	for seq := 1; seq <= n; seq++ {
		bs[seq] = psData(t, 7, 0, int32(seq), 1, false)
	}
	errs := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fail := func(err error) {
			select {
			case errs <- err:
			default:
			}
		}
		seq := 1
		for i := 0; seq <= n; i++ {
			switch {
			case i%97 == 96:
				if err := l.Roll(); err != nil {
					fail(err)
					return
				}
			case i%151 == 150 && seq > 2:
				// Drop the newest batch (one offset per sequence).
				if err := l.TruncateTo(l.LogEndOffset() - 1); err != nil {
					fail(err)
					return
				}
				seq--
			default:
				if _, err := l.AppendAsLeader(bs[seq], 1); err != nil {
					fail(err)
					return
				}
				seq++
			}
		}
	}()
	var reads int
	for reading := true; reading; reads++ {
		select {
		case <-done:
			reading = false
		default:
		}
		if _, ok := l.ProducerState(7); !ok {
			t.Fatal("producer 7 is gone")
		}
		if len(l.Producers()) != 1 {
			t.Fatal("not one producer")
		}
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if e := psProducer(t, l, 7); e.LastSequence != int32(n) {
		t.Fatalf("last sequence %d, want %d", e.LastSequence, n)
	}
	t.Logf("%d reads", reads)
}
