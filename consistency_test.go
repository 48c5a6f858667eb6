package partlog

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
	"github.com/partlog/partlog/snapshot"
)

// The shared consistency check runs on every Log this package's tests
// open, as it closes (closeCheck); TestMain fails the run when one failed
// and names the log's directory (t.TempDir puts the test's name in it).
var (
	consistencyMu       sync.Mutex
	consistencyFailures []string
)

// damaged holds the Logs whose tests leave damage in them on purpose
// (closeDamaged): the check skips them.
var damaged sync.Map

// closeDamaged closes a Log that a test left damaged on purpose (data
// Kafka would keep and serve as it is), without the consistency check.
func closeDamaged(l *Log) error {
	damaged.Store(l, true)
	return l.Close()
}

func TestMain(m *testing.M) {
	closeCheck = func(l *Log) {
		if _, ok := damaged.Load(l); ok {
			return
		}
		if err := checkConsistency(l); err != nil {
			consistencyMu.Lock()
			consistencyFailures = append(consistencyFailures, fmt.Sprintf("%s: %v", l.dir, err))
			consistencyMu.Unlock()
		}
	}
	code := m.Run()
	if len(consistencyFailures) > 0 {
		fmt.Fprintf(os.Stderr, "consistency check failed on %d logs at Close:\n  %s\n", len(consistencyFailures),
			strings.Join(consistencyFailures, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// checkLog runs the consistency check now (for tests that keep a log
// open at their end).
func checkLog(t testing.TB, l *Log) {
	t.Helper()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := checkConsistency(l); err != nil {
		t.Errorf("consistency check: %v", err)
	}
}

// checkConsistency checks an open log, with appendMu held:
//   - every batch from the log start to the log end is valid, lies in its
//     segment, and offsets only increase (no overlap, nothing backwards);
//   - the offset index finds each batch: a read at a batch's base offset
//     starts with that batch;
//   - the log end offset is the last batch's next offset (or the active
//     segment's base when it is empty);
//   - the producer state equals a rebuild (the one a reopen would do: the
//     newest snapshot above the log start and at or below the log end,
//     then a replay), in producers and last stable offset.
func checkConsistency(l *Log) error {
	if l.closed.Load() {
		return nil
	}
	l.mu.RLock()
	segs := append([]*segment.Segment(nil), l.segments...)
	l.mu.RUnlock()
	start, leo := l.LogStartOffset(), l.LogEndOffset()
	if start > leo {
		return fmt.Errorf("log start %d above log end %d", start, leo)
	}
	var bases []int64
	prevLast := int64(-1)
	for i, s := range segs {
		if i > 0 && s.BaseOffset() <= segs[i-1].BaseOffset() {
			return fmt.Errorf("segment %d follows segment %d", s.BaseOffset(), segs[i-1].BaseOffset())
		}
		limit := int64(1<<63 - 1)
		if i+1 < len(segs) {
			limit = segs[i+1].BaseOffset()
		}
		err := s.Scan(func(pos int64, v batch.View) error {
			if v.BaseOffset() < s.BaseOffset() || v.LastOffset() >= limit {
				return fmt.Errorf("segment %d: batch [%d, %d] at position %d lies outside [%d, %d)", s.BaseOffset(), v.BaseOffset(), v.LastOffset(), pos, s.BaseOffset(), limit)
			}
			if v.BaseOffset() <= prevLast {
				return fmt.Errorf("segment %d: batch [%d, %d] at position %d overlaps or goes back (previous last offset %d)", s.BaseOffset(), v.BaseOffset(), v.LastOffset(), pos, prevLast)
			}
			if v.LastOffset() >= leo {
				return fmt.Errorf("segment %d: batch [%d, %d] at or past the log end %d", s.BaseOffset(), v.BaseOffset(), v.LastOffset(), leo)
			}
			prevLast = v.LastOffset()
			if v.LastOffset() >= start {
				bases = append(bases, v.BaseOffset())
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if prevLast >= 0 && prevLast+1 != leo {
		if active := segs[len(segs)-1]; !(active.IsEmpty() && active.BaseOffset() == leo) {
			return fmt.Errorf("log end %d, last batch ends at %d", leo, prevLast)
		}
	}
	for _, b := range bases {
		from := max(b, start)
		v, err := l.Read(from, 1, leo)
		if err != nil {
			return fmt.Errorf("read at %d: %w", from, err)
		}
		ok := len(v.Records) >= batch.HeaderSize && batch.View(v.Records).BaseOffset() == b
		v.Release()
		if !ok {
			return fmt.Errorf("read at the batch base %d does not start with that batch (offset index)", b)
		}
	}
	return checkProducerState(l, start, leo)
}

// checkProducerState compares the live producer state with a rebuild.
func checkProducerState(l *Log, start, leo int64) error {
	snaps, err := snapshot.List(l.dir)
	if err != nil {
		return err
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Offset < snaps[j].Offset })
	// NowMs 0: nothing in the snapshot counts as expired (the live state
	// expires only when asked to).
	rb := &producerstate.Rebuild{LogStart: start, End: leo, NowMs: 0, Batches: l.scanBatches}
	for i := len(snaps) - 1; i >= 0; i-- {
		f := snaps[i]
		if f.Offset > leo || f.Offset <= start {
			continue
		}
		entries, err := snapshot.Read(f.Path)
		if err != nil {
			return fmt.Errorf("snapshot %d: %w", f.Offset, err)
		}
		rb.Snapshot, rb.SnapshotOffset, rb.HasSnapshot = entries, f.Offset, true
		break
	}
	var rejected []error
	rb.Rejected = func(v batch.View, err error) { rejected = append(rejected, err) }
	m := producerstate.New(producerstate.Config{ProducerIDExpirationMs: l.opts.ProducerIDExpirationMs})
	if err := m.Rebuild(rb); err != nil {
		return err
	}
	if len(rejected) > 0 {
		return fmt.Errorf("the rebuild refused %d batches: %w", len(rejected), errors.Join(rejected...))
	}
	m.OnHighWatermarkUpdated(l.HighWatermark())
	// Expiration removes idle producers from the live state only: a
	// producer only the rebuild holds must have no open transaction.
	live, rebuilt := byPID(l.psm.ProducersAppendLocked()), byPID(m.Producers()) // Close holds appendMu
	belowStart := false
	for pid, e := range live {
		if _, ok := rebuilt[pid]; !ok && e.LastOffset < start {
			// Its batches lie below the log start: only a snapshot
			// taken before the start was raised still holds it.
			belowStart = true
			continue
		}
		if r, ok := rebuilt[pid]; !ok || snapshotFields(e) != snapshotFields(r) {
			return fmt.Errorf("producer %d: live %+v, rebuilt %+v (present %v)", pid, e, r, ok)
		}
	}
	for pid, r := range rebuilt {
		if _, ok := live[pid]; !ok && r.CurrentTxnFirstOffset >= 0 {
			return fmt.Errorf("producer %d in the rebuild %+v but not in the live state", pid, r)
		}
	}
	if a, b := l.psm.LastStableOffset(l.HighWatermark()), m.LastStableOffset(l.HighWatermark()); a != b && !belowStart {
		return fmt.Errorf("last stable offset %d, rebuild %d", a, b)
	}
	return nil
}

// snapshotFields is the part of an entry a snapshot keeps (the newest
// cached batch only).
func snapshotFields(e ProducerEntry) ProducerEntry {
	e.Batches, e.NumBatches = [producerstate.MaxCachedBatches]producerstate.BatchMetadata{}, 0
	return e
}

func byPID(es []ProducerEntry) map[int64]ProducerEntry {
	m := make(map[int64]ProducerEntry, len(es))
	for _, e := range es {
		m[e.ProducerID] = e
	}
	return m
}

// TestConsistencyCheckSeesBadOffsets: the shared check fails on a batch
// that overlaps its predecessor and on one that goes backwards, written
// under the Log's rules (straight into the active segment).
func TestConsistencyCheckSeesBadOffsets(t *testing.T) {
	for name, base := range map[string]int64{"overlap": 8, "backwards": 2} {
		t.Run(name, func(t *testing.T) {
			l, err := Open(t.TempDir(), smallOpts(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				// Closed without the hook: the damage is deliberate.
				l.closed.Store(true)
				_ = l.Close()
			}()
			if _, err := l.AppendAsFollower(makeFollowerBatch(t, 0, 0, 10, 10, 1)); err != nil {
				t.Fatal(err)
			}
			if err := checkConsistency(l); err != nil {
				t.Fatalf("healthy log: %v", err)
			}
			var out segment.Appended
			if err := l.active().Append(makeFollowerBatch(t, base, 0, 2, 10, 1), segment.Stamp{}, &out); err != nil {
				t.Fatal(err)
			}
			l.logEndOffset.Store(12)
			err = checkConsistency(l)
			if err == nil || !strings.Contains(err.Error(), "overlaps or goes back") {
				t.Fatalf("check: %v, want an overlap error", err)
			}
		})
	}
}

// verifyLog runs the consistency check now and returns its error.
func verifyLog(l *Log) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return checkConsistency(l)
}
