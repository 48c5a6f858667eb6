package partlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/segment"
	"github.com/partlog/partlog/snapshot"
)

// partlog's consistency checker, what every test that opens logs runs at
// its end (the tests of this package as each Log closes; server, mirror,
// cmd and interop on their data directories), so that a test whose own
// assertions pass still fails when it leaves a log inconsistent.

// Check reports the first inconsistency of an open log (ErrClosed once it
// is closed):
//   - every batch from the log start to the log end is valid, lies in its
//     segment, and offsets only increase (no overlap, nothing backwards);
//   - the offset index finds each batch: a read at a batch's base offset
//     starts with that batch;
//   - the log end offset is the last batch's next offset (or the active
//     segment's base when it is empty);
//   - the producer state equals a rebuild (the one a reopen would do: the
//     newest snapshot above the log start and at or below the log end,
//     then a replay), in producers and last stable offset.
//
// It holds the append lock while it reads the whole log.
func (l *Log) Check() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	return l.checkLocked()
}

// Check checks the closed partition directory, or every partition
// directory of the closed log directory, at path: recovery's full dry run
// must find no problem in it (Report.Problems), and once it is opened
// with opts, Log.Check must hold. The open may write what a clean reopen
// writes (a producer snapshot at the log end, a recovery that only
// rebuilds indexes); nothing else is changed.
func Check(path string, opts *Options) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	if _, ok := ParsePartitionDir(filepath.Base(path)); ok || holdsSegments(entries) {
		return checkPartition(path, opts)
	}
	var errs []error
	for _, e := range entries {
		if _, ok := ParsePartitionDir(e.Name()); !ok || !e.IsDir() {
			continue
		}
		if err := checkPartition(filepath.Join(path, e.Name()), opts); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// holdsSegments reports whether a directory listing has a .log file.
func holdsSegments(entries []os.DirEntry) bool {
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), filenames.Log) {
			return true
		}
	}
	return false
}

// checkPartition is Check of one partition directory.
func checkPartition(dir string, opts *Options) error {
	o := opts.withDefaults()
	rep, err := recovery.Run(dir, recovery.Options{Full: true, DryRun: true, Segment: (&Log{opts: o}).segConfig()})
	if err != nil {
		return fmt.Errorf("recovery's dry run: %w", err)
	}
	if len(rep.Problems) > 0 {
		return fmt.Errorf("recovery's dry run found %d problems: %+v", len(rep.Problems), rep.Problems)
	}
	l, err := Open(dir, opts)
	if err != nil {
		return err
	}
	return errors.Join(l.Check(), l.Close())
}

// checkLocked is Check with appendMu held:
//   - every batch from the log start to the log end is valid, lies in its
//     segment, and offsets only increase (no overlap, nothing backwards);
//   - the offset index finds each batch: a read at a batch's base offset
//     starts with that batch;
//   - the log end offset is the last batch's next offset (or the active
//     segment's base when it is empty);
//   - the producer state equals a rebuild (the one a reopen would do: the
//     newest snapshot above the log start and at or below the log end,
//     then a replay), in producers and last stable offset.
func (l *Log) checkLocked() error {
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
		err := s.Scan(func(pos int64, v batch.View, _ *batch.BatchHeader) error {
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
	return l.checkProducerState(start, leo)
}

// checkProducerState compares the live producer state with a rebuild.
func (l *Log) checkProducerState(start, leo int64) error {
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
