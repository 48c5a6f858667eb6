package partlog

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/testutil"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/recovery"
)

// compactOpts are options of a compacted log for tests: small segments,
// a clock the test moves (clock), a cleaner of its own whose automatic
// cleanings never fall due (a ratio of 1 is never exceeded): the tests
// clean with Compact.
func compactOpts(t testing.TB, clock *int64) *Options {
	o := smallOpts(t)
	o.SegmentBytes = 4 << 10
	o.CleanupPolicy = Compact
	o.MinCleanableDirtyRatio = 1
	o.DeleteRetentionMs = 1000
	o.Now = func() time.Time { return time.UnixMilli(*clock) }
	c := NewCleaner(CleanerOptions{MapBytes: 4 << 20})
	t.Cleanup(func() { _ = c.Close() })
	o.Cleaner = c
	return o
}

// kvBatch is a plain batch of key=value records ("key=" with no value:
// a tombstone).
func kvBatch(t testing.TB, ts int64, pairs ...string) []byte {
	t.Helper()
	var recs []batch.RecordSpec
	for i, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		r := batch.RecordSpec{Timestamp: ts + int64(i), Key: []byte(k), Value: []byte(v)}
		if v == "" {
			r.Value = nil
		}
		recs = append(recs, r)
	}
	spec := batch.NewBatchSpec(0)
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// logRecord is a record as a consumer reads it.
type logRecord struct {
	offset     int64
	key, value string
	tombstone  bool
}

// readRecords reads every data record of the log.
func readRecords(t testing.TB, l *Log) []logRecord {
	t.Helper()
	var out []logRecord
	for _, b := range ltBatches(t, l) {
		v := batch.View(b.Bytes)
		if v.IsControl() {
			continue
		}
		data, err := v.RecordData(nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		it := v.Records(data)
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			out = append(out, logRecord{r.Offset, string(r.Key), string(r.Value), r.Value == nil})
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// latest is the last record of each key.
func latest(recs []logRecord) map[string]logRecord {
	m := map[string]logRecord{}
	for _, r := range recs {
		m[r.key] = r
	}
	return m
}

// TestCompactKeepsLatestValue: a compacted log keeps the last record of
// each key at its offset (tombstones included, until delete.retention.ms
// after the cleaning that first saw them), nothing else, across a reopen.
func TestCompactKeepsLatestValue(t *testing.T) {
	clock := int64(1_700_000_000_000)
	opts := compactOpts(t, &clock)
	l, dir := openTestLog(t, opts)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		var pairs []string
		for j := 0; j < 1+rng.IntN(4); j++ {
			k := fmt.Sprintf("key-%02d", rng.IntN(40))
			v := fmt.Sprintf("v%d.%d", i, j)
			if rng.IntN(10) == 0 {
				v = ""
			}
			pairs = append(pairs, k+"="+v)
		}
		if _, err := l.AppendAsLeader(kvBatch(t, clock, pairs...), 1); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	before := readRecords(t, l)
	want := latest(before)
	sizeBefore := l.Size()
	res, err := l.Compact(time.UnixMilli(clock))
	if err != nil {
		t.Fatal(err)
	}
	if res.EndOffset != l.LogEndOffset() || res.Groups == 0 {
		t.Fatalf("round %+v, log end %d", res, l.LogEndOffset())
	}
	check := func(what string, tombstones bool) {
		t.Helper()
		got := readRecords(t, l)
		seen := map[string]bool{}
		for _, r := range got {
			w, ok := want[r.key]
			if !ok || w != r {
				t.Fatalf("%s: record %+v is not its key's last (%+v)", what, r, w)
			}
			seen[r.key] = true
		}
		for k, w := range want {
			if !seen[k] && (tombstones || !w.tombstone) {
				t.Fatalf("%s: key %s lost its last record %+v", what, k, w)
			}
			if seen[k] && w.tombstone && !tombstones {
				t.Fatalf("%s: tombstone of %s kept past its horizon", what, k)
			}
		}
	}
	check("first cleaning", true)
	if l.Size() >= sizeBefore {
		t.Fatalf("size %d, %d before cleaning", l.Size(), sizeBefore)
	}
	if cp, ok := l.CleanerCheckpoint(); !ok || cp != l.LogEndOffset() {
		t.Fatalf("cleaner checkpoint %d %v", cp, ok)
	}
	l.Close()
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetHighWatermark(l.LogEndOffset())
	check("reopened", true)
	clock += 1001
	if _, err := l.Compact(time.UnixMilli(clock)); err != nil {
		t.Fatal(err)
	}
	check("past the delete horizon", false)
}

// TestCompactDoesNotReachUncleanable: the active segment and everything
// from the segment holding the last stable offset on are left as they
// are.
func TestCompactDoesNotReachUncleanable(t *testing.T) {
	clock := int64(1_700_000_000_000)
	l, _ := openTestLog(t, compactOpts(t, &clock))
	for i := 0; i < 3; i++ {
		psLeader(t, l, kvBatch(t, clock, "a=1", "b=1"))
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	// An open transaction from here pins the last stable offset.
	open := psLeader(t, l, psData(t, 9, 0, 0, 1, true))
	psLeader(t, l, kvBatch(t, clock, "a=2"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	psLeader(t, l, kvBatch(t, clock, "b=2"))
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.Compact(time.UnixMilli(clock)); err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, l)
	var below, above []string
	for _, r := range got {
		s := fmt.Sprintf("%d:%s=%s", r.offset, r.key, r.value)
		if r.offset < open.FirstOffset {
			below = append(below, s)
		} else {
			above = append(above, s)
		}
	}
	if strings.Join(below, " ") != "4:a=1 5:b=1" {
		t.Fatalf("cleaned part: %v", below)
	}
	if len(above) != 3 {
		t.Fatalf("part at and past the last stable offset changed: %v", above)
	}
	if cp, _ := l.CleanerCheckpoint(); cp != open.FirstOffset {
		t.Fatalf("checkpoint %d, want the segment of the last stable offset %d", cp, open.FirstOffset)
	}
}

// TestCleanKeepsProducerState: for logs with idempotent and transactional
// producers, committed, aborted and open transactions, mirroring barriers
// and producers that expire, the producer state rebuilt from the cleaned
// log (no snapshot, every batch replayed from the log start, expired
// producers removed) equals the one rebuilt from the log before cleaning,
// in every field a snapshot keeps, and so does the last stable offset;
// over several cleanings as the delete horizons pass.
func TestCleanKeepsProducerState(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			clock := int64(1_700_000_000_000)
			opts := compactOpts(t, &clock)
			// Odd seeds: producers idle for a minute expire; even seeds:
			// none does (the barrier alone removes old producers).
			opts.ProducerIDExpirationMs = 60_000
			if seed%2 == 0 {
				opts.ProducerIDExpirationMs = 1 << 50
			}
			l, _ := openTestLog(t, opts)
			producerScript(t, l, seed, &clock)
			want := rebuiltProducers(t, l, clock)
			for round := 0; round < 4; round++ {
				// Every round cleans the whole log again, as after a lost
				// cleaner checkpoint (new dirty data would do the same,
				// but the open transaction pins the last stable offset).
				l.clean.firstDirty.Store(-1)
				res, err := l.Compact(time.UnixMilli(clock))
				if err != nil {
					t.Fatalf("seed %d round %d: %v", seed, round, err)
				}
				got := rebuiltProducers(t, l, clock)
				if err := sameProducers(got, want); err != nil {
					t.Fatalf("seed %d round %d (%+v): %v", seed, round, res, err)
				}
				clock += 700 // delete.retention.ms is 1000
			}
			if len(l.Barriers()) == 0 {
				t.Fatalf("seed %d: the script wrote no barrier", seed)
			}
		})
	}
}

// producerScript appends a random mix to l: keyed records of idempotent,
// transactional and plain producers (few keys, so most records are
// superseded), commits, aborts, barriers (only while no transaction is
// open), producers left idle past producer.id.expiration.ms, rolls, and
// one transaction left open at the end.
func producerScript(t testing.TB, l *Log, seed uint64, clock *int64) {
	rng := rand.New(rand.NewPCG(seed, seed*7))
	type prod struct {
		epoch int16
		seq   int32
		inTxn bool
	}
	prods := map[int64]*prod{}
	var b batch.Builder
	data := func(pid int64, p *prod, txn bool) []byte {
		spec := batch.NewBatchSpec(0)
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = pid, p.epoch, p.seq, txn
		if pid < 0 {
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = -1, -1, -1
		}
		n := 1 + rng.IntN(3)
		var recs []batch.RecordSpec
		for i := 0; i < n; i++ {
			key := fmt.Appendf(nil, "k%d", rng.IntN(12))
			if rng.IntN(4) == 0 {
				key = fmt.Appendf(nil, "u%d.%d", *clock, i) // never superseded
			}
			r := batch.RecordSpec{Timestamp: *clock + int64(i), Key: key, Value: []byte("v")}
			if rng.IntN(8) == 0 {
				r.Value = nil
			}
			recs = append(recs, r)
		}
		out, err := b.AppendBatch(nil, &spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		if pid >= 0 {
			p.seq += int32(n)
		}
		return out
	}
	anyOpen := func() bool {
		for _, p := range prods {
			if p.inTxn {
				return true
			}
		}
		return false
	}
	pidBase := int64(0) // producers after a barrier are new ones
	for step := 0; step < 300; step++ {
		*clock += int64(rng.IntN(400))
		pid := pidBase + int64(1+rng.IntN(6))
		p := prods[pid]
		if p == nil {
			p = &prod{}
			prods[pid] = p
		}
		switch x := rng.IntN(100); {
		case x < 25: // idempotent
			if p.inTxn {
				continue
			}
			psLeader(t, l, data(pid, p, false))
		case x < 55: // transactional data
			p.inTxn = true
			psLeader(t, l, data(pid, p, true))
		case x < 70: // end a transaction
			if !p.inTxn {
				continue
			}
			commit := rng.IntN(3) > 0
			psCoord(t, l, batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{Timestamp: *clock, ProducerID: pid, ProducerEpoch: p.epoch},
				commit, int32(3+step/100)))
			p.inTxn = false
			if rng.IntN(3) == 0 {
				p.epoch++ // a new incarnation of the producer
				p.seq = 0
			}
		case x < 80:
			psLeader(t, l, data(-1, p, false))
		case x < 85: // a mirroring barrier, once every transaction is decided
			for _, opid := range slices.Sorted(maps.Keys(prods)) {
				if op := prods[opid]; op.inTxn {
					psCoord(t, l, batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{Timestamp: *clock, ProducerID: opid, ProducerEpoch: op.epoch},
						true, int32(3+step/100)))
					op.inTxn = false
				}
			}
			psCoord(t, l, batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{Timestamp: *clock, ProducerID: -1, ProducerEpoch: -1}, "src"))
			prods = map[int64]*prod{} // every producer starts afresh
			pidBase += 10
		case x < 88: // time passes: idle producers expire
			*clock += 70_000
			l.ExpireProducers()
		default:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !anyOpen() {
		p := prods[pidBase+1]
		if p == nil {
			p = &prod{}
			prods[pidBase+1] = p
		}
		p.inTxn = true
		psLeader(t, l, data(pidBase+1, p, true))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
}

// rebuiltProducers replays every batch of l from its log start into a
// fresh producer state (no snapshot), removes the producers expired at
// nowMs, and returns the entries as a snapshot keeps them and the last
// stable offset.
func rebuiltProducers(t testing.TB, l *Log, nowMs int64) rebuilt {
	t.Helper()
	m := producerstate.New(producerstate.Config{ProducerIDExpirationMs: l.opts.ProducerIDExpirationMs})
	err := m.Rebuild(&producerstate.Rebuild{LogStart: l.LogStartOffset(), End: l.LogEndOffset(), NowMs: nowMs,
		Batches: func(from int64, yield func(batch.View, *batch.BatchHeader) bool) error {
			var h batch.BatchHeader
			for _, b := range ltBatches(t, l) {
				v := batch.View(b.Bytes)
				v.DecodeHeader(&h)
				if !yield(v, &h) {
					break
				}
			}
			return nil
		},
		Rejected: func(v batch.View, err error) { t.Fatalf("replay refused the batch at %d: %v", v.BaseOffset(), err) }})
	if err != nil {
		t.Fatal(err)
	}
	m.RemoveExpired(nowMs)
	var r rebuilt
	for _, e := range m.Producers() {
		r.entries = append(r.entries, snapshotFields(e))
	}
	r.lso = m.LastStableOffset(l.LogEndOffset())
	return r
}

type rebuilt struct {
	entries []ProducerEntry
	lso     int64
}

func sameProducers(got, want rebuilt) error {
	if got.lso != want.lso {
		return fmt.Errorf("last stable offset %d, %d before cleaning", got.lso, want.lso)
	}
	if !slices.Equal(got.entries, want.entries) {
		var b strings.Builder
		for _, e := range want.entries {
			fmt.Fprintf(&b, "\n  before %+v", e)
		}
		for _, e := range got.entries {
			fmt.Fprintf(&b, "\n  after  %+v", e)
		}
		return fmt.Errorf("producers differ:%s", b.String())
	}
	return nil
}

// TestCompactBarrierKeepsResetProducersOut: the producers a barrier reset
// are not live, so the cleaner may keep some of their records; the
// barrier stays after them, so a rebuild from the cleaned log does not
// bring them back. Without the barrier (stock Kafka's cleaner on a log it
// never saw one in) they would come back: the case the rule exists for.
func TestCompactBarrierKeepsResetProducersOut(t *testing.T) {
	clock := int64(1_700_000_000_000)
	l, _ := openTestLog(t, compactOpts(t, &clock))
	psLeader(t, l, psData(t, 5, 0, 0, 1, false)) // p5-e0-s0: its key stays
	psLeader(t, l, kvBatch(t, clock, "x=1"))     // superseded below
	psCoord(t, l, psBarrier("src"))              // resets producer 5
	psLeader(t, l, kvBatch(t, clock, "x=2"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	psLeader(t, l, kvBatch(t, clock, "y=1"))
	l.SetHighWatermark(l.LogEndOffset())
	if _, ok := l.ProducerState(5); ok {
		t.Fatal("the barrier did not reset producer 5")
	}
	for _, at := range []int64{clock, clock + 1<<40} { // the second past every horizon
		l.clean.firstDirty.Store(-1) // clean it all again
		if _, err := l.Compact(time.UnixMilli(at)); err != nil {
			t.Fatal(err)
		}
	}
	var kinds []string
	for _, b := range ltBatches(t, l) {
		v := batch.View(b.Bytes)
		switch {
		case v.IsControl():
			kinds = append(kinds, "barrier")
		case v.ProducerID() == 5:
			kinds = append(kinds, "p5")
		default:
			kinds = append(kinds, "data")
		}
	}
	if strings.Join(kinds, ",") != "p5,barrier,data,data" {
		t.Fatalf("cleaned log: %v", kinds)
	}
	if got := rebuiltProducers(t, l, clock); len(got.entries) != 0 {
		t.Fatalf("the rebuild brought back %+v", got.entries)
	}
}

// TestCompactKeepsLastMarker: a live producer's last marker stays after
// its transaction's batches are gone and its delete horizon passed
// (partlog; Kafka drops it), so a rebuild keeps the coordinator epoch it
// carries, which fences a zombie coordinator's markers.
func TestCompactKeepsLastMarker(t *testing.T) {
	clock := int64(1_700_000_000_000)
	l, _ := openTestLog(t, compactOpts(t, &clock))
	txn := func(key string, seq int32) []byte {
		spec := batch.NewBatchSpec(0)
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = 7, 0, seq, true
		var b batch.Builder
		out, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Timestamp: clock, Key: []byte(key), Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	psLeader(t, l, txn("a", 0))
	psCoord(t, l, psMarker(7, 0, true, 5))
	psLeader(t, l, kvBatch(t, clock, "a=2")) // supersedes the transaction's record
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	psLeader(t, l, txn("b", 1)) // open: pins the last stable offset here
	l.SetHighWatermark(l.LogEndOffset())
	want := rebuiltProducers(t, l, clock)
	if e := want.entries; len(e) != 1 || e[0].CoordinatorEpoch != 5 {
		t.Fatalf("before cleaning: %+v", e)
	}
	for _, at := range []int64{clock, clock, clock + 10_000} { // data gone, horizon set, horizon passed
		l.clean.firstDirty.Store(-1)
		if _, err := l.Compact(time.UnixMilli(at)); err != nil {
			t.Fatal(err)
		}
		if err := sameProducers(rebuiltProducers(t, l, clock), want); err != nil {
			t.Fatalf("at %d: %v", at, err)
		}
	}
}

// TestCleanerRunsWhenDue: the pool cleans a compacted log by itself once
// its dirty ratio passes min.cleanable.dirty.ratio (a roll tells it), and
// then runs no goroutine.
func TestCleanerRunsWhenDue(t *testing.T) {
	clock := int64(1_700_000_000_000)
	opts := compactOpts(t, &clock)
	opts.MinCleanableDirtyRatio = 0.5
	l, _ := openTestLog(t, opts)
	opts.Cleaner.Idle()
	before := runtime.NumGoroutine()
	for i := 0; i < 200; i++ {
		psLeader(t, l, kvBatch(t, clock, fmt.Sprintf("k%d=v%d", i%5, i)))
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if cp, ok := l.CleanerCheckpoint(); ok && cp == l.LogEndOffset() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not cleaned; cleaner error %v", l.CleanerError())
		}
		time.Sleep(5 * time.Millisecond)
	}
	opts.Cleaner.Idle()
	if n := len(readRecords(t, l)); n != 5 {
		t.Fatalf("%d records left, want one per key", n)
	}
	waitGoroutinesAtMost(t, before)
}

func waitGoroutinesAtMost(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDirCleanerCheckpoint: OpenDir reads cleaner-offset-checkpoint into
// each partition's first dirty offset, and Checkpoint writes it back in
// Kafka's format.
func TestDirCleanerCheckpoint(t *testing.T) {
	path := t.TempDir()
	clock := int64(1_700_000_000_000)
	tmpl := compactOpts(t, &clock)
	d, err := OpenDir(path, &DirOptions{Log: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "changelog", Partition: 0}
	l, err := d.Create(tp.Topic, tp.Partition, TopicID{1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		psLeader(t, l, kvBatch(t, clock, fmt.Sprintf("k%d=v", i%3)))
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Compact(time.UnixMilli(clock)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := checkpoint.ReadOffsets(filepath.Join(path, checkpoint.CleanerOffsetFile))
	if err != nil || m[tp] != 50 {
		t.Fatalf("cleaner-offset-checkpoint %v %v", m, err)
	}
	d, err = OpenDir(path, &DirOptions{Log: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, _ = d.Log(tp)
	if cp, ok := l.CleanerCheckpoint(); !ok || cp != 50 {
		t.Fatalf("reopened checkpoint %d %v", cp, ok)
	}
	// A directory without compacted partitions gets no file.
	plain := t.TempDir()
	d2, err := OpenDir(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(plain, checkpoint.CleanerOffsetFile)); !os.IsNotExist(err) {
		t.Fatalf("cleaner-offset-checkpoint in a directory without compacted partitions: %v", err)
	}
}

// TestCompactedTxnIndexVerifies: after a cleaning removes an aborted
// transaction's batches, its ABORT marker keeps its .txnindex entry for a
// round (Kafka's rule); a full verification then lists the entry as a
// change a recovery makes (the replay completes no transaction for it),
// not as damage.
func TestCompactedTxnIndexVerifies(t *testing.T) {
	clock := int64(1_700_000_000_000)
	l, dir := openTestLog(t, compactOpts(t, &clock))
	txn := psData(t, 4, 0, 0, 1, true)
	psLeader(t, l, txn)
	psCoord(t, l, psMarker(4, 0, false, 1))
	psLeader(t, l, psData(t, 4, 0, 1, 1, false)) // producer 4's last batch
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	psLeader(t, l, kvBatch(t, clock, "z=1"))
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.Compact(time.UnixMilli(clock)); err != nil {
		t.Fatal(err)
	}
	txns, err := l.AbortedTransactions(0, l.LogEndOffset())
	if err != nil || len(txns) != 1 {
		t.Fatalf("aborted transactions after cleaning: %v %v", txns, err)
	}
	if b := ltBatches(t, l); batch.View(b[0].Bytes).IsControl() == false {
		t.Fatalf("the aborted batch is still there: %d batches", len(b))
	}
	rep, err := recovery.Run(dir, recovery.Options{DryRun: true, Full: true, RecoveryPoint: -1,
		Segment: l.segConfig(), Now: l.opts.Now})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status == recovery.StatusProblems {
		t.Fatalf("verification found problems: %s", rep.Summary())
	}
}

// TestCompactedLogRefusesKeylessRecords: a compacted log's leader
// refuses a record without a key, as Kafka's does (INVALID_RECORD), in
// plain and compressed batches; keyed records, and followers' batches,
// go in; an append of keyed records allocates nothing.
func TestCompactedLogRefusesKeylessRecords(t *testing.T) {
	clock := int64(1_700_000_000_000)
	l, _ := openTestLog(t, compactOpts(t, &clock))
	var b batch.Builder
	for _, comp := range []batch.Compression{batch.CompressionNone, batch.CompressionZstd} {
		spec := batch.NewBatchSpec(0)
		spec.Compression = comp
		keyless, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte("no key")}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.AppendAsLeader(keyless, 1)
		if !errors.Is(err, ErrPolicy) || KafkaErrorCode(err) != 87 {
			t.Fatalf("%v: keyless record: %v", comp, err)
		}
		keyed, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte{}, Value: nil}})
		if err != nil {
			t.Fatal(err)
		}
		psLeader(t, l, keyed)
	}
	if _, err := l.AppendAsFollower(psAt(l.LogEndOffset(), 1, kvBatch(t, clock, "a=1"))); err != nil {
		t.Fatal(err)
	}
	if testutil.Race {
		return
	}
	big := compactOpts(t, &clock)
	big.SegmentBytes = 1 << 20 // no roll within the runs
	lb, _ := openTestLog(t, big)
	keyed := kvBatch(t, clock, "a=1", "b=2")
	psLeader(t, lb, keyed)
	if n := testing.AllocsPerRun(50, func() {
		if _, err := lb.AppendAsLeader(keyed, 1); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("a keyed append to a compacted log allocates %v times", n)
	}
}

// TestReconfigureCompaction: a delete log reconfigured as compacted is
// cleaned by its Cleaner when due; reconfigured back, it is left alone
// and its retention deletes by time again.
func TestReconfigureCompaction(t *testing.T) {
	clock := int64(1_700_000_000_000)
	opts := compactOpts(t, &clock)
	opts.CleanupPolicy = Delete
	opts.MinCleanableDirtyRatio = 0.5
	l, _ := openTestLog(t, opts)
	for i := 0; i < 100; i++ {
		psLeader(t, l, kvBatch(t, clock, fmt.Sprintf("k%d=v%d", i%4, i)))
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	opts.Cleaner.Idle()
	if _, ok := l.CleanerCheckpoint(); ok {
		t.Fatal("a delete log was cleaned")
	}
	c := *opts
	c.CleanupPolicy = Compact
	if err := l.Reconfigure(&c); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if cp, ok := l.CleanerCheckpoint(); ok && cp == l.LogEndOffset() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reconfigured log was not cleaned (%v)", l.CleanerError())
		}
		time.Sleep(5 * time.Millisecond)
	}
	opts.Cleaner.Idle()
	if n := len(readRecords(t, l)); n != 4 {
		t.Fatalf("%d records after cleaning, want 4", n)
	}
	d := *opts
	d.CleanupPolicy = Delete
	d.RetentionBytes = 1
	if err := l.Reconfigure(&d); err != nil {
		t.Fatal(err)
	}
	cp, _ := l.CleanerCheckpoint()
	for i := 0; i < 100; i++ {
		psLeader(t, l, kvBatch(t, clock, fmt.Sprintf("k%d=v%d", i%4, i)))
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	opts.Cleaner.Idle()
	if now, _ := l.CleanerCheckpoint(); now != cp {
		t.Fatalf("a log no longer compacted was cleaned (checkpoint %d -> %d)", cp, now)
	}
	if n, err := l.DeleteOldSegments(time.UnixMilli(clock)); err != nil || n == 0 {
		t.Fatalf("retention.bytes after the policy went back to delete: %d %v", n, err)
	}
}
