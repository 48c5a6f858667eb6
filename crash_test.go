package partlog

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/recovery"
)

// The crash harness (recovery.md §3.5, §7, §9): a child process appends and
// flushes in a loop and is killed with SIGKILL at a random point; the
// directory is then reopened (recovery runs) and checked:
//
//  1. every batch acknowledged by a Flush is present, unchanged (a digest
//     of offsets, leader epochs and CRCs recorded by the child after the
//     Flush returned), and reads back: every batch passes batch.Check and
//     offsets are contiguous;
//  2. the recovery report's cut, if any, is at or above the acknowledged
//     offset;
//  3. the log is consistent: every batch up to the log end is valid, the
//     leader-epoch cache is what the batch headers say, and after Close the
//     .index/.timeindex of every segment pass Sanity and point at batch
//     boundaries of their .log;
//  4. the producer state equals a replay of the whole log (origin Replay)
//     into a fresh Manager: producers, last stable offset (high watermark
//     at the log end), aborted transactions (.txnindex) and barriers.
//
// TestCrashImages checks the same properties deterministically in-process
// on "synced prefix + arbitrary tail" images.
var (
	crashIterations = flag.Int("partlog.crash", 0, "iterations of TestCrashKill (0: 4, or 2 with -short; 100 for a soak run)")
	crashSeed       = flag.Uint64("partlog.crashseed", 0, "seed of the crash tests (0: from the clock)")
)

// crashOptions are the options every process of the harness uses.
func crashOptions(cache *MappingCache) *Options {
	return &Options{SegmentBytes: 128 << 10, MaxIndexBytes: 4096, IndexIntervalBytes: 512,
		PrefaultBytes: -1, MappingCache: cache}
}

// ackRecord is one line of the ack file: everything below offset was
// acknowledged by a Flush; digest covers those batches; rp is the
// recovery point the log reported after the flush.
type ackRecord struct {
	offset int64
	digest uint32
	rp     int64
}

// appendAck appends r to the ack file with O_APPEND and fsyncs it.
func appendAck(path string, r ackRecord) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "ack %d %d %d\n", r.offset, r.digest, r.rp)
	return errors.Join(err, f.Sync(), f.Close())
}

// readLastAck returns the last complete ack line (a line torn by the kill
// is ignored) and whether there was one.
func readLastAck(path string) (ackRecord, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ackRecord{}, false, nil
	}
	if err != nil {
		return ackRecord{}, false, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var last ackRecord
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r ackRecord
		if _, err := fmt.Sscanf(sc.Text(), "ack %d %d %d", &r.offset, &r.digest, &r.rp); err != nil {
			return ackRecord{}, false, fmt.Errorf("ack file line %q: %w", sc.Text(), err)
		}
		if found && r.offset < last.offset {
			return ackRecord{}, false, fmt.Errorf("ack offsets go backwards: %d after %d", r.offset, last.offset)
		}
		last, found = r, true
	}
	return last, found, sc.Err()
}

var crashCRC = crc32.MakeTable(crc32.Castagnoli)

// digestBatch folds a batch's base offset, leader epoch, magic and CRC
// (which covers everything else) into h.
func digestBatch(h uint32, v batch.View) uint32 {
	h = crc32.Update(h, crashCRC, v[batch.OffBaseOffset:batch.OffBaseOffset+8])
	return crc32.Update(h, crashCRC, v[batch.OffPartitionLeaderEpoch:batch.OffCRC+4])
}

// crashScan calls fn for every batch with offsets in [from, to), read
// through Log.Read. Every batch must pass batch.Check and start exactly
// where the previous one ended (the workload leaves no gaps). fn must not
// keep v.
func crashScan(l *Log, from, to int64, fn func(v batch.View) error) error {
	return crashScanTo(l, from, to, math.MaxInt64, fn)
}

// crashScanTo is crashScan where, at or above tailFrom, offsets may be
// missing (a gap between segments) and the batches may end before to
// (the log end): a power cut that lost a sealed segment's unsynced data
// and kept the next segment's directory entry, or some of its unsynced
// data, leaves that, and recovery keeps it as Kafka's does (an empty
// segment in the range it scans is no damage).
func crashScanTo(l *Log, from, to, tailFrom int64, fn func(v batch.View) error) error {
	next := from
	for next < to {
		rv, err := l.Read(next, 256<<10, to)
		if err != nil {
			return fmt.Errorf("read at %d: %w", next, err)
		}
		b := rv.Records
		if len(b) == 0 {
			rv.Release()
			if next >= tailFrom && l.emptyFrom(next) {
				return nil
			}
			return fmt.Errorf("empty read at %d below %d", next, to)
		}
		for len(b) > 0 {
			v, err := batch.Check(b)
			if err == nil && v.BaseOffset() > next && next >= tailFrom {
				next = v.BaseOffset() // a gap where the cut lost a segment's data
			}
			if err == nil && v.BaseOffset() != next {
				err = fmt.Errorf("batch at offset %d, expected %d", v.BaseOffset(), next)
			}
			if err == nil {
				err = fn(v)
			}
			if err != nil {
				rv.Release()
				return fmt.Errorf("batch at %d (segment %d): %w", next, rv.SegmentBaseOffset, err)
			}
			next = v.NextOffset()
			b = b[len(v):]
		}
		rv.Release()
	}
	if next != to {
		return fmt.Errorf("scan ended at %d, expected %d", next, to)
	}
	return nil
}

// crashDigest extends h over the batches in [from, to).
func crashDigest(l *Log, from, to int64, h uint32) (uint32, error) {
	err := crashScan(l, from, to, func(v batch.View) error {
		h = digestBatch(h, v)
		return nil
	})
	return h, err
}

// crashResult is what crashCheck learned about a reopened log.
type crashResult struct {
	leo        int64
	digest     uint32 // of every batch below leo
	truncation *recovery.Truncation
	batches    int
	barriers   int
	snapshot   bool // recovery loaded a snapshot
}

// crashCheck verifies properties 1, 2 and 4 and the live part of 3 on a
// log just opened without CleanShutdown. exactLEO, when ≥ 0, is the log
// end the recovery must have found.
func crashCheck(t *testing.T, l *Log, ack ackRecord, exactLEO int64) crashResult {
	t.Helper()
	return crashCheckTo(t, l, ack, exactLEO, math.MaxInt64)
}

// emptyFrom reports whether every segment holding offsets at or above
// offset is empty.
func (l *Log) emptyFrom(offset int64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	// The segment holding offset may end its data below it (Read already
	// found nothing there: a power cut kept a roll's new segment and lost
	// the tail before it, a gap Kafka's load keeps too); every later one
	// must be empty.
	for _, s := range l.segments {
		if s.BaseOffset() > offset && !s.IsEmpty() {
			return false
		}
	}
	return true
}

// crashCheckTo is crashCheck for a power cut's image: the batches may
// end at or above tailFrom (the acknowledged offset) with empty segments
// up to the log end (crashScanTo).
func crashCheckTo(t *testing.T, l *Log, ack ackRecord, exactLEO, tailFrom int64) crashResult {
	t.Helper()
	start, leo := l.LogStartOffset(), l.LogEndOffset()
	res := crashResult{leo: leo}
	rep := l.RecoveryReport()
	if rep == nil {
		// Only a fresh directory (the child was killed before it created
		// its first segment) is opened without recovery.
		if leo != 0 || ack.offset != 0 || exactLEO > 0 {
			t.Fatalf("unclean open of a non-empty directory without a recovery report")
		}
		rep = &recovery.Report{LogEndOffset: leo, LastStableOffset: leo}
	}
	res.truncation = rep.Truncation
	res.snapshot = rep.SnapshotsUsed != nil

	// (1) and (2): the acknowledged prefix survived.
	if leo < ack.offset {
		t.Errorf("log end %d is below the acknowledged offset %d (report: %s)", leo, ack.offset, rep.Summary())
	}
	if exactLEO >= 0 && leo != exactLEO {
		t.Errorf("log end %d, expected exactly %d (report: %s)", leo, exactLEO, rep.Summary())
	}
	if tr := rep.Truncation; tr != nil {
		if tr.Offset < ack.offset {
			t.Errorf("recovery cut at offset %d, below the acknowledged offset %d: %s", tr.Offset, ack.offset, rep.Summary())
		}
		// A power cut can leave a last segment with nothing valid under a
		// base above the data before it: recovery drops it and the log
		// ends at the data, below the cut (a segment-dropped problem says
		// so).
		dropped := tailFrom != math.MaxInt64 && tr.Offset > leo && slices.ContainsFunc(rep.Problems,
			func(p recovery.Problem) bool { return p.Kind == "segment-dropped" })
		if tr.Offset != leo && !dropped {
			t.Errorf("recovery cut at offset %d but the log ends at %d", tr.Offset, leo)
		}
	}
	if rep.LogEndOffset != leo {
		t.Errorf("report log end %d, log %d", rep.LogEndOffset, leo)
	}

	// One scan of the whole log: digest, replay, barriers, epochs.
	m := producerstate.New(producerstate.Config{})
	m.Reset(start)
	var (
		a         producerstate.Append
		barriers  []int64
		epochs    []EpochEntry
		aborted   []index.AbortedTxn
		ackDigest uint32
		ackSeen   = ack.offset <= start
		tail      []EpochEntry // the batches at or above tailFrom
	)
	now := time.Now().UnixMilli()
	err := crashScanTo(l, start, leo, tailFrom, func(v batch.View) error {
		res.batches++
		res.digest = digestBatch(res.digest, v)
		if v.NextOffset() == ack.offset {
			ackDigest, ackSeen = res.digest, true
		}
		if v.BaseOffset() >= tailFrom {
			tail = append(tail, EpochEntry{Epoch: v.PartitionLeaderEpoch(), StartOffset: v.BaseOffset()})
		}
		if e := v.PartitionLeaderEpoch(); e >= 0 && (len(epochs) == 0 || e > epochs[len(epochs)-1].Epoch) {
			epochs = append(epochs, EpochEntry{Epoch: e, StartOffset: v.BaseOffset()})
		} else if len(epochs) > 0 && e < epochs[len(epochs)-1].Epoch {
			return fmt.Errorf("leader epoch %d after %d", e, epochs[len(epochs)-1].Epoch)
		}
		if v.IsBarrier() {
			barriers = append(barriers, v.BaseOffset())
		}
		m.Begin(&a, producerstate.Replay, now)
		if err := m.Validate(&a, v, v.BaseOffset()); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		m.Commit(&a)
		for _, c := range a.CompletedTxns() {
			if c.Aborted {
				aborted = append(aborted, index.AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset,
					LastOffset: c.LastOffset, LastStableOffset: c.LastStableOffset})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the log back [%d, %d): %v", start, leo, err)
	}
	m.SetMapEndOffset(leo)
	res.barriers = len(barriers)
	if !ackSeen {
		t.Errorf("acknowledged offset %d is not a batch boundary of the recovered log", ack.offset)
	} else if ack.offset > start && ackDigest != ack.digest {
		t.Errorf("batches below the acknowledged offset %d changed: digest %d, acknowledged %d", ack.offset, ackDigest, ack.digest)
	}

	// (3) leader epochs: increasing, and exactly the epochs of the batches.
	got := l.LeaderEpochs()
	for i := 1; i < len(got); i++ {
		if got[i].Epoch <= got[i-1].Epoch || got[i].StartOffset <= got[i-1].StartOffset {
			t.Errorf("leader epochs not increasing: %v", got)
			break
		}
	}
	if tailFrom == math.MaxInt64 {
		if !slices.Equal(got, epochs) {
			t.Errorf("leader epochs %v, batches say %v", got, epochs)
		}
	} else {
		// A power cut can keep the epoch checkpoint and lose the batches
		// that began an epoch above the acknowledged offset: recovery
		// keeps such an entry below the log end, as Kafka's load does.
		// Below that offset the entries are exactly the batches'; above
		// it each batch's epoch is the one the cache gives its offset.
		below := func(es []EpochEntry) []EpochEntry {
			return slices.DeleteFunc(slices.Clone(es), func(e EpochEntry) bool { return e.StartOffset >= tailFrom })
		}
		if !slices.Equal(below(got), below(epochs)) {
			t.Errorf("leader epochs %v, batches say %v (below the acknowledged offset %d)", got, epochs, tailFrom)
		}
		for _, b := range tail {
			i := len(got) - 1
			for i >= 0 && got[i].StartOffset > b.StartOffset {
				i--
			}
			if b.Epoch >= 0 && (i < 0 || got[i].Epoch != b.Epoch) {
				t.Errorf("batch at %d has leader epoch %d; the cache %v gives another", b.StartOffset, b.Epoch, got)
			}
		}
	}
	// Sealed segments' indexes pass Sanity while the log is open (the
	// active segment's are preallocated; they are checked after Close).
	segs := l.Segments()
	for _, base := range segs[:len(segs)-1] {
		if err := sanityIndexes(l.Dir(), base); err != nil {
			t.Errorf("sealed segment %d: %v", base, err)
		}
	}

	// (4) producer state equals the replay. Snapshots keep only the newest
	// batch of each producer and one timestamp (Kafka's format), so the
	// entries are compared on their scalar fields.
	want, have := m.Producers(), l.Producers()
	if d := diffProducers(have, want); d != "" {
		t.Errorf("producer state differs from a replay of the log: %s", d)
	}
	if rep.Producers != len(want) {
		t.Errorf("report says %d producers, replay %d", rep.Producers, len(want))
	}
	l.SetHighWatermark(leo)
	if lso, wantLSO := l.LastStableOffset(), m.LastStableOffset(leo); lso != wantLSO {
		t.Errorf("last stable offset %d, replay %d", lso, wantLSO)
	}
	if rep.LastStableOffset != m.LastStableOffset(leo) {
		t.Errorf("report last stable offset %d, replay %d", rep.LastStableOffset, m.LastStableOffset(leo))
	}
	if rb := m.Barriers(); !slices.Equal(rb, barriers) {
		t.Errorf("replay applied barriers %v, the log holds type-7 batches at %v", rb, barriers)
	}
	// Barriers are listed from the snapshot the replay started at
	// (SnapshotsUsed), or the log start. The Log adopts recovery's producer
	// state (one load path), so it lists the same ones.
	from := start
	if rep.SnapshotsUsed != nil {
		from = *rep.SnapshotsUsed
	}
	if wantRep := barriersFrom(barriers, from); !slices.Equal(rep.Barriers, wantRep) {
		t.Errorf("report barriers %v, expected %v (type-7 batches at or above the snapshot at %d)", rep.Barriers, wantRep, from)
	}
	if !slices.Equal(l.Barriers(), rep.Barriers) {
		t.Errorf("log barriers %v, recovery's %v: the Log must adopt recovery's producer state", l.Barriers(), rep.Barriers)
	}
	// Aborted transactions (.txnindex) are those of the replay.
	idx, err := l.AbortedTransactions(start, leo)
	if err != nil {
		t.Fatalf("aborted transactions: %v", err)
	}
	if !slices.Equal(idx, aborted) {
		t.Errorf("transaction indexes hold %v, replay aborted %v", idx, aborted)
	}
	return res
}

// barriersFrom returns the barrier offsets at or above from.
func barriersFrom(all []int64, from int64) []int64 {
	var out []int64
	for _, o := range all {
		if o >= from {
			out = append(out, o)
		}
	}
	return out
}

// newestSnapshotAtOrBelow returns the largest snapshot offset ≤ limit in
// dir, or -1.
func newestSnapshotAtOrBelow(dir string, limit int64) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return -1, err
	}
	best := int64(-1)
	for _, e := range entries {
		n, err := filenames.Parse(e.Name())
		if err == nil && n.Kind == filenames.Snapshot && n.Transient == "" && n.Offset <= limit && n.Offset > best {
			best = n.Offset
		}
	}
	return best, nil
}

// diffProducers compares producer entries on the fields a snapshot keeps.
func diffProducers(have, want []ProducerEntry) string {
	type key struct {
		pid                 int64
		epoch               int16
		lastSeq             int32
		lastOffset          int64
		offsetDelta         int32
		ts                  int64
		coordEpoch          int32
		txnFirst            int64
		hasBatch            bool
		newestSeq, newestOD int32
		newestLast          int64
	}
	conv := func(es []ProducerEntry) []key {
		out := make([]key, len(es))
		for i, e := range es {
			k := key{pid: e.ProducerID, epoch: e.ProducerEpoch, lastSeq: e.LastSequence, lastOffset: e.LastOffset,
				offsetDelta: e.OffsetDelta, ts: e.LastTimestamp, coordEpoch: e.CoordinatorEpoch,
				txnFirst: e.CurrentTxnFirstOffset, hasBatch: e.NumBatches > 0}
			if e.NumBatches > 0 {
				b := e.Batches[e.NumBatches-1]
				k.newestSeq, k.newestOD, k.newestLast = b.LastSequence, b.OffsetDelta, b.LastOffset
			}
			out[i] = k
		}
		return out
	}
	h, w := conv(have), conv(want)
	if slices.Equal(h, w) {
		return ""
	}
	return fmt.Sprintf("\n log:    %+v\n replay: %+v", h, w)
}

// sanityIndexes opens a segment's offset and time index read-only and
// runs Sanity on them.
func sanityIndexes(dir string, base int64) error {
	oi, err := index.OpenOffsetIndex(filenames.Path(dir, base, filenames.Index), base, true)
	if err != nil {
		return err
	}
	err = oi.Sanity()
	err = errors.Join(err, oi.Close())
	ti, terr := index.OpenTimeIndex(filenames.Path(dir, base, filenames.TimeIndex), base, true)
	if terr != nil {
		return errors.Join(err, terr)
	}
	return errors.Join(err, ti.Sanity(), ti.Close())
}

// segmentBatch is one batch of a .log file.
type segmentBatch struct {
	pos              int64
	base, last, maxT int64
}

// checkClosedDir checks a cleanly closed directory file by file: every
// .log holds whole valid batches and nothing else, segments follow each
// other without gaps or overlaps, and every segment's .index and
// .timeindex pass Sanity and point at batch boundaries of their .log.
func checkClosedDir(t *testing.T, dir string) {
	t.Helper()
	checkClosedDirTail(t, dir, false)
}

// checkClosedDirTail is checkClosedDir allowing, with gaps, empty
// segments and offsets missing between segments (what a power cut that
// lost a sealed segment's data leaves, see crashScanTo).
func checkClosedDirTail(t *testing.T, dir string, gaps bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, e := range entries {
		n, err := filenames.Parse(e.Name())
		if err != nil {
			continue
		}
		if n.Transient != "" || strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("leftover file %s after a clean close", e.Name())
		}
		if n.Kind == filenames.Log && n.Transient == "" {
			bases = append(bases, n.Offset)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	next := int64(-1)
	for i, base := range bases {
		data, err := os.ReadFile(filenames.Path(dir, base, filenames.Log))
		if err != nil {
			t.Fatal(err)
		}
		var bs []segmentBatch
		for p := 0; p < len(data); {
			v, err := batch.Check(data[p:])
			if err != nil {
				t.Errorf("segment %d: position %d: %v", base, p, err)
				break
			}
			bs = append(bs, segmentBatch{pos: int64(p), base: v.BaseOffset(), last: v.LastOffset(), maxT: v.MaxTimestamp()})
			p += len(v)
		}
		for j, b := range bs {
			if (j == 0 && i > 0 && b.base != next && !(gaps && b.base > next)) || (j > 0 && b.base != bs[j-1].last+1) || b.base < base {
				t.Errorf("segment %d: batch at %d has base offset %d (previous end %d)", base, b.pos, b.base, next)
			}
			next = b.last + 1
		}
		if len(bs) == 0 {
			if i != len(bases)-1 && !gaps {
				t.Errorf("empty segment %d is not the last", base)
			}
			next = max(next, base)
		}
		if err := sanityIndexes(dir, base); err != nil {
			t.Errorf("segment %d: %v", base, err)
			continue
		}
		checkIndexTargets(t, dir, base, bs)
	}
}

// checkIndexTargets checks that every offset-index entry is at a batch
// start, with an offset inside that batch's append (above the previous
// batch, within the segment), and that every time-index entry names the
// last offset of a batch whose max timestamp it holds, which is the
// largest timestamp up to there.
func checkIndexTargets(t *testing.T, dir string, base int64, bs []segmentBatch) {
	t.Helper()
	at := map[int64]int{}
	byLast := map[int64]int{}
	for j, b := range bs {
		at[b.pos] = j
		byLast[b.last] = j
	}
	segLast := base - 1
	if len(bs) > 0 {
		segLast = bs[len(bs)-1].last
	}
	oi, err := index.OpenOffsetIndex(filenames.Path(dir, base, filenames.Index), base, true)
	if err != nil {
		t.Fatal(err)
	}
	defer oi.Close()
	for _, e := range oi.All() {
		j, ok := at[int64(e.Position)]
		switch {
		case !ok:
			t.Errorf("segment %d: offset index entry %+v is not at a batch start", base, e)
		case e.Offset < bs[j].base || e.Offset > segLast || (j > 0 && e.Offset <= bs[j-1].last):
			t.Errorf("segment %d: offset index entry %+v does not match the batch at %d (%d..%d)", base, e, e.Position, bs[j].base, bs[j].last)
		}
	}
	ti, err := index.OpenTimeIndex(filenames.Path(dir, base, filenames.TimeIndex), base, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ti.Close()
	for _, e := range ti.All() {
		j, ok := byLast[e.Offset]
		if !ok || bs[j].maxT != e.Timestamp {
			t.Errorf("segment %d: time index entry %+v does not name a batch holding that timestamp", base, e)
			continue
		}
		for _, b := range bs[:j] {
			if b.maxT > e.Timestamp {
				t.Errorf("segment %d: time index entry %+v below an earlier batch's timestamp %d", base, e, b.maxT)
				break
			}
		}
	}
}

// crashBudget is the wall time TestCrashKill allows itself.
func crashBudget(t *testing.T, iterations int) time.Time {
	stop := time.Now().Add(time.Duration(iterations) * 3 * time.Second)
	if d, ok := t.Deadline(); ok && d.Add(-30*time.Second).Before(stop) {
		stop = d.Add(-30 * time.Second)
	}
	return stop
}

func crashSeedValue(t *testing.T) uint64 {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -partlog.crashseed=%d)", seed, seed)
	return seed
}

// TestCrashKill is the process-kill harness: each iteration starts a child
// on the same directory, kills it with SIGKILL 20–200 ms after the child
// process reported that it runs (before it opens the log), reopens
// the directory here (unclean: recovery runs) and checks it, then closes
// it cleanly and records its log end as acknowledged.
func TestCrashKill(t *testing.T) {
	n := *crashIterations
	if n <= 0 {
		n = 4
		if testing.Short() {
			n = 2
		}
	}
	rng := rand.New(rand.NewPCG(crashSeedValue(t), 0x6a09e667))
	base := t.TempDir()
	dir, acks := filepath.Join(base, "topic-0"), filepath.Join(base, "acks")
	stop := crashBudget(t, n)
	began := time.Now()
	var kills, truncations, snapshots, ackedFlushes, barriers, tempsRemoved int
	classes := map[string]int{}
	prevAcks := 0
	for i := range n {
		if time.Now().After(stop) {
			t.Logf("time budget spent: stopping after %d of %d iterations", i, n)
			break
		}
		childSeed := rng.Uint64()
		delay := time.Duration(20+rng.IntN(181)) * time.Millisecond
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashAcks+"="+acks,
			envCrashSeed+"="+strconv.FormatUint(childSeed, 10))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{pw}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = pw.Close()
		started := make(chan bool, 1)
		go func() {
			var b [1]byte
			n, _ := pr.Read(b[:])
			started <- n == 1
		}()
		select {
		case ok := <-started:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("iteration %d: child (seed %d) did not start:\n%s", i, childSeed, out.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("iteration %d: child (seed %d) did not start within 30s", i, childSeed)
		}
		_ = pr.Close()
		time.Sleep(delay)
		_ = cmd.Process.Kill()
		err = cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled():
			kills++
		default:
			// The child stopped on its own: a failed append or flush.
			t.Fatalf("iteration %d: child (seed %d) exited before the kill: %v\n%s", i, childSeed, err, out.String())
		}

		ack, _, err := readLastAck(acks)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := countAcks(acks)
		if err != nil {
			t.Fatal(err)
		}
		ackedFlushes += lines - prevAcks
		temps, err := removeCheckpointTemps(dir)
		if err != nil {
			t.Fatal(err)
		}
		tempsRemoved += temps
		cache, err := NewMappingCache(64 << 20)
		if err != nil {
			t.Fatal(err)
		}
		opts := crashOptions(cache)
		if rng.IntN(2) == 0 {
			opts.RecoveryPoint = ack.rp
		}
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("iteration %d (child seed %d, killed after %v): reopen: %v", i, childSeed, delay, err)
		}
		res := crashCheck(t, l, ack, -1)
		if res.truncation != nil {
			truncations++
			classes[res.truncation.Class]++
		}
		if res.snapshot {
			snapshots++
		}
		barriers = res.barriers
		if err := l.Close(); err != nil {
			t.Fatalf("iteration %d: close: %v", i, err)
		}
		checkClosedDir(t, dir)
		if t.Failed() {
			t.Fatalf("iteration %d (child seed %d, killed after %v, recovery point %d, ack %+v) failed; child output:\n%s",
				i, childSeed, delay, opts.RecoveryPoint, ack, out.String())
		}
		// A clean close made everything durable: acknowledge it all.
		if err := appendAck(acks, ackRecord{offset: res.leo, digest: res.digest, rp: res.leo}); err != nil {
			t.Fatal(err)
		}
		prevAcks = lines + 1
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	last, _, _ := readLastAck(acks)
	t.Logf("%d kills in %v, %d acknowledged flushes, %d recoveries cut (%v), %d started from a snapshot; final log end %d, %d segments, %d barriers; %d checkpoint temporaries removed (TestCheckpointTempDoesNotBlockOpen)",
		kills, time.Since(began).Round(time.Millisecond), ackedFlushes, truncations, classes, snapshots, last.offset, len(segs), barriers, tempsRemoved)
}

// countAcks counts the complete lines of the ack file.
func countAcks(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	return bytes.Count(data, []byte{'\n'}), err
}

// removeCheckpointTemps removes the checkpoint temporaries a kill can
// leave (leader-epoch-checkpoint.tmp, written by the epoch cache before
// its rename) and returns how many there were. Recovery ignores them
// (recovery.md §8 H2) but Log.load refuses any *.tmp, so without this an
// unclean Open fails for ever: see TestCheckpointTempDoesNotBlockOpen. The
// harness removes them, as the next checkpoint write would truncate them,
// so that it keeps checking everything else.
func removeCheckpointTemps(dir string) (int, error) {
	temps, err := filepath.Glob(filepath.Join(dir, "*-checkpoint.tmp"))
	if err != nil {
		return 0, err
	}
	for _, p := range temps {
		if err := os.Remove(p); err != nil {
			return 0, err
		}
	}
	return len(temps), nil
}

// TestCheckpointTempDoesNotBlockOpen: a leader-epoch-checkpoint.tmp
// left by a process killed while it rewrote the checkpoint is ignored
// by recovery (recovery.md §8 H2) and by the load, which opens the log.
func TestCheckpointTempDoesNotBlockOpen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, smallOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(makeBatch(t, 3, 10, 1000), 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The state a kill between the temp write and the rename leaves.
	if err := os.WriteFile(filepath.Join(dir, "leader-epoch-checkpoint.tmp"), []byte("0\n1\n1 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, smallOpts(t)) // unclean: recovery runs first
	if err != nil {
		t.Fatalf("unclean open after a torn checkpoint rewrite: %v", err)
	}
	if got := l.LogEndOffset(); got != 3 {
		t.Errorf("log end %d, want 3", got)
	}
	_ = l.Close()
}

// TestCoordinatorAssignsEveryBatchItsOffsets: AppendAsCoordinator
// assigns offsets as a leader does, so two control batches built at
// base offset 0 are appended at 0 and 1: the follower rule on offsets
// as received does not apply.
func TestCoordinatorAssignsEveryBatchItsOffsets(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	b := batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: batch.NoLeaderEpoch, Timestamp: 1000}, "src")
	b = batch.AppendMirrorPidResetBatch(b, batch.ControlSpec{PartitionLeaderEpoch: batch.NoLeaderEpoch, Timestamp: 1000}, "src")
	info, err := l.AppendAsCoordinator(b, 1)
	if err != nil {
		t.Fatalf("coordinator append of two barriers: %v", err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 1 {
		t.Errorf("offsets %d..%d, want 0..1", info.FirstOffset, info.LastOffset)
	}
}

// TestCrashImages builds "synced prefix + arbitrary tail" crash images
// in-process: after a Flush the directory's files are copied (the synced
// state), more is appended without flushing, and each image is the synced
// copy whose active .log gets a prefix of the bytes written after the
// flush — torn anywhere, with a zeroed hole inside, or followed by
// non-zero junk — and whose other files (indexes, .txnindex, snapshots,
// leader-epoch-checkpoint) are either the synced ones or the current ones
// (indexes and epochs ahead of the data). Each image is opened
// (unclean, recovery point at the flush or 0) and must hold exactly the
// intact batches of the tail after the synced prefix, and pass every
// check of TestCrashKill.
func TestCrashImages(t *testing.T) {
	seed := crashSeedValue(t)
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for r := range rounds {
		t.Run(fmt.Sprintf("round%d", r), func(t *testing.T) { crashImageRound(t, seed+uint64(r)) })
	}
}

// activeSegment returns the base offset and size of the active segment.
func (l *Log) activeSegment() (int64, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.active()
	return s.BaseOffset(), s.Size()
}

// readDirFiles returns the content of every regular file of dir.
func readDirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// tailBatch is one batch written after the flush: where it ends in the
// tail, the offset after it and the digest of the log up to it.
type tailBatch struct {
	end    int
	next   int64
	digest uint32
}

func crashImageRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xbb67ae85))
	base := t.TempDir()
	src := filepath.Join(base, "src")
	cache, err := NewMappingCache(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(src, crashOptions(cache))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := newCrashWorkload(l, rng)
	for range 60 + rng.IntN(120) {
		if err := w.step(true); err != nil {
			t.Fatal(err)
		}
	}
	// Keep room in the active segment so the unflushed tail cannot roll.
	if _, size := l.activeSegment(); size > 64<<10 {
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	flushed := l.LogEndOffset()
	digest, err := crashDigest(l, l.LogStartOffset(), flushed, 0)
	if err != nil {
		t.Fatal(err)
	}
	activeBase, flushedSize := l.activeSegment()
	synced := readDirFiles(t, src)

	if rng.IntN(2) == 0 {
		w.epoch++
	}
	segs := len(l.Segments())
	w.bytes = 0
	for i := 0; i < 24 && w.bytes < 12<<10; i++ {
		if err := w.step(false); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.Segments()) != segs {
		t.Fatalf("the unflushed appends rolled the segment")
	}
	current := readDirFiles(t, src)
	_, newSize := l.activeSegment()
	logName := filenames.Make(activeBase, filenames.Log)
	tail := current[logName][flushedSize:newSize]
	var tbs []tailBatch
	h := digest
	for p := 0; p < len(tail); {
		v, err := batch.Check(tail[p:])
		if err != nil {
			t.Fatalf("unflushed tail at %d: %v", p, err)
		}
		h = digestBatch(h, v)
		p += len(v)
		tbs = append(tbs, tailBatch{end: p, next: v.NextOffset(), digest: h})
	}

	// Cut points: every step-th byte, and around the first batch ends.
	cutSet := map[int]bool{0: true, len(tail): true}
	step := max(1, len(tail)/20)
	for k := 0; k < len(tail); k += step {
		cutSet[k] = true
	}
	for _, b := range tbs[:min(len(tbs), 4)] {
		for _, k := range []int{b.end - 1, b.end + 1} {
			if k >= 0 && k <= len(tail) {
				cutSet[k] = true
			}
		}
	}
	var cuts []int
	for k := range cutSet {
		cuts = append(cuts, k)
	}
	sort.Ints(cuts)
	t.Logf("flushed log end %d at position %d of segment %d; %d unflushed bytes in %d batches; %d images",
		flushed, flushedSize, activeBase, len(tail), len(tbs), len(cuts))

	modes := []string{"torn", "hole", "junk"}
	for i, k := range cuts {
		mode := modes[i%len(modes)]
		meta := "synced"
		if (i/len(modes))%2 == 1 {
			meta = "current"
		}
		rp := flushed
		if i%2 == 1 {
			rp = 0
		}
		holeLen := 1 + rng.IntN(96)
		t.Run(fmt.Sprintf("cut=%d/%s/%s/rp=%d", k, mode, meta, rp), func(t *testing.T) {
			img := bytes.Clone(synced[logName])
			at := int(flushedSize)
			copy(img[at:], tail[:k])
			switch mode {
			case "hole":
				if k > 0 {
					j := k / 3
					hi := min(k, j+holeLen)
					// A hole that zeroes only header bytes outside the CRC
					// (the leader epoch, at 12..16) leaves a CRC-valid batch
					// with another epoch, which Kafka's recovery and ours
					// keep. A torn write cannot make one: the header is
					// written in one piece before the body, and a lost page
					// boundary inside it zeroes the CRC field too. Such a
					// hole is widened to reach the CRC.
					for q := 0; q < len(tbs); q++ {
						start := 0
						if q > 0 {
							start = tbs[q-1].end
						}
						if j >= start+batch.OffPartitionLeaderEpoch && hi <= start+batch.OffCRC {
							hi = min(k, start+batch.OffCRC+4)
						}
					}
					clear(img[at+j : at+hi])
				}
			case "junk":
				for p := at + k; p < min(len(img), at+k+200); p++ {
					img[p] = 0xa5
				}
			}
			// The expected log: the synced prefix and then every tail batch
			// up to the first one whose bytes differ from what was written.
			wantLEO, wantDigest, prev := flushed, digest, 0
			for _, b := range tbs {
				if !bytes.Equal(img[at+prev:at+b.end], tail[prev:b.end]) {
					break
				}
				wantLEO, wantDigest, prev = b.next, b.digest, b.end
			}

			dir := filepath.Join(base, fmt.Sprintf("img-%d", i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			files := maps.Clone(synced)
			if meta == "current" {
				for name, b := range current {
					if !strings.HasSuffix(name, filenames.Log) {
						files[name] = b
					}
				}
			}
			files[logName] = img
			for name, b := range files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			opts := crashOptions(cache)
			opts.RecoveryPoint = rp
			il, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			res := crashCheck(t, il, ackRecord{offset: flushed, digest: digest, rp: rp}, wantLEO)
			if res.digest != wantDigest {
				t.Errorf("recovered log is not a prefix of the log written: digest %d, expected %d", res.digest, wantDigest)
			}
			if err := il.Close(); err != nil {
				t.Fatal(err)
			}
			checkClosedDir(t, dir)
			if !t.Failed() {
				_ = os.RemoveAll(dir)
			}
		})
	}
}
