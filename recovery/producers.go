package recovery

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"syscall"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/snapshot"
)

// maxReplayProblems bounds the producer-replay problems reported.
const maxReplayProblems = 10

// snapshotFile is a live snapshot file of the directory.
type snapshotFile struct {
	offset int64
	name   string
}

func (x *run) listSnapshots() []snapshotFile {
	var out []snapshotFile
	for name := range x.files {
		if off, ok := filenames.ParseSnapshot(name); ok {
			out = append(out, snapshotFile{offset: off, name: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].offset < out[j].offset })
	return out
}

// discardSnapshot removes a snapshot. A corrupt one is a problem; the
// others (stray, beyond the log end, at or below the log start) are
// removed by Kafka's own load, and are only a change.
func (x *run) discardSnapshot(f snapshotFile, why string, corrupt bool) error {
	x.r.SnapshotsDiscarded = append(x.r.SnapshotsDiscarded, f.offset)
	if corrupt {
		x.r.problem(f.name, -1, kindSnapshot, "snapshot %d is corrupt: %s", f.offset, why)
		why = "corrupt: " + why
	}
	return x.remove(f.name, kindSnapshot, fmt.Sprintf("snapshot %d discarded: %s", f.offset, why))
}

// readSnapshot reads the snapshot f; a corrupt one is discarded (ok
// false).
func (x *run) readSnapshot(f snapshotFile) (entries []snapshot.Entry, ok bool, err error) {
	p := x.path(f.name)
	if x.o.hooks != nil && x.o.hooks.open != nil {
		if err := x.o.hooks.open(p); err != nil {
			return nil, false, fmt.Errorf("partlog/recovery: read %s: %w", p, err)
		}
	}
	entries, err = snapshot.Read(p)
	if err != nil {
		if !snapshot.IsCorrupt(err) {
			return nil, false, fmt.Errorf("partlog/recovery: %w", err)
		}
		return nil, false, x.discardSnapshot(f, err.Error(), true)
	}
	return entries, true, nil
}

// checkSnapshots reads every snapshot of snaps (recovery.md §2.11 reads
// only the one a replay starts from) and discards the corrupt ones; it
// returns the remaining ones and stores the entries read in read.
func (x *run) checkSnapshots(snaps []snapshotFile, read map[int64][]snapshot.Entry) ([]snapshotFile, error) {
	var out []snapshotFile
	for _, f := range snaps {
		entries, ok, err := x.readSnapshot(f)
		if err != nil {
			return nil, err
		}
		if ok {
			read[f.offset] = entries
			out = append(out, f)
		}
	}
	return out, nil
}

// producers is step 6 (recovery.md §2.11 with the engine rules): pick the
// newest valid snapshot at or below the replay start, replay every batch
// from it to the LEO with origin Replay (barriers included), rebuild the
// transaction index of every recovered segment from the aborted
// transactions completed in the replay, and write a snapshot at the LEO.
func (x *run) producers(kept []*seg, leo, logStart int64, wiped bool) error {
	snaps := x.listSnapshots()
	read := map[int64][]snapshot.Entry{} // the snapshots read, by offset
	if x.o.CheckSnapshots {
		var err error
		if snaps, err = x.checkSnapshots(snaps, read); err != nil {
			return err
		}
	}
	bases := map[int64]bool{}
	maxBase := int64(-1)
	for _, s := range kept {
		bases[s.base] = true
		maxBase = max(maxBase, s.base)
	}
	// Discard snapshots beyond the LEO (G4), at or below the log start, and
	// stray ones (§2.11 step 4: keep segment bases and the single largest
	// other one if it is at or above the last segment base).
	largestStray := int64(-1)
	if leo > logStart {
		largestStray = leo // the snapshot this run leaves at the LEO
	}
	for _, f := range snaps {
		if !bases[f.offset] && f.offset <= leo && f.offset > logStart && f.offset >= maxBase {
			largestStray = max(largestStray, f.offset)
		}
	}
	var remaining []snapshotFile
	for _, f := range snaps {
		var why string
		switch {
		case wiped:
			why = "the log was emptied"
		case f.offset > leo:
			why = fmt.Sprintf("beyond the log end offset %d", leo)
		case f.offset <= logStart:
			why = fmt.Sprintf("at or below the log start offset %d", logStart)
		case !bases[f.offset] && f.offset != largestStray:
			why = "stray (not at a segment base offset)"
		}
		if why != "" {
			if err := x.discardSnapshot(f, why, false); err != nil {
				return err
			}
			continue
		}
		remaining = append(remaining, f)
	}

	m := producerstate.New(producerstate.Config{ProducerIDExpirationMs: x.o.ProducerIDExpirationMs})
	x.state = m
	nowMs := x.o.Now().UnixMilli()
	// The replay must start at or below every recovered segment, whose
	// transaction index it rebuilds, and at or below the recovery point.
	target := leo
	if !x.o.Clean {
		target = min(target, max(x.o.RecoveryPoint, 0))
	}
	for _, s := range kept {
		if s.recover && !s.created {
			target = min(target, s.base)
		}
	}
	rb := &producerstate.Rebuild{LogStart: logStart, End: leo, NowMs: nowMs}
	loadedAt := int64(-1)
	for i := len(remaining) - 1; i >= 0 && !wiped; i-- {
		f := remaining[i]
		if f.offset > target {
			continue
		}
		entries, ok := read[f.offset]
		if !ok {
			var err error
			if entries, ok, err = x.readSnapshot(f); err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		rb.Snapshot, rb.SnapshotOffset, rb.HasSnapshot = entries, f.offset, true
		loadedAt = f.offset
		off := f.offset
		x.r.SnapshotsUsed = &off
		break
	}
	if wiped {
		rb.End = logStart
	}

	// Replay (producerstate.Rebuild), with the batches of the kept
	// segments as its source.
	aborted := make(map[int64][]index.AbortedTxn) // by segment base
	replayProblems := 0
	var cur *seg
	rb.Rejected = func(v batch.View, err error) {
		if replayProblems < maxReplayProblems {
			x.r.problem(cur.logName, -1, kindProducerReplay, "batch at offset %d not applied to producer state (skipped): %v", v.BaseOffset(), err)
		}
		replayProblems++
	}
	// ABORT markers the replay met, by offset: an aborted transaction the
	// log cleaner removed the batches of keeps its marker (and, for a
	// round, its .txnindex entry), which the replay completes nothing for.
	abortMarkers := map[int64]int64{}
	rb.Applied = func(v batch.View, a *producerstate.Append) {
		if t, ok := a.ControlType(); v.IsControl() && ok && t == batch.ControlAbort && v.ProducerID() >= 0 {
			abortMarkers[v.BaseOffset()] = v.ProducerID()
		}
		for _, t := range a.CompletedTxns() {
			if t.Aborted {
				aborted[cur.base] = append(aborted[cur.base], index.AbortedTxn{ProducerID: t.ProducerID,
					FirstOffset: t.FirstOffset, LastOffset: t.LastOffset, LastStableOffset: t.LastStableOffset})
			}
		}
	}
	rb.Batches = func(start int64, yield func(batch.View, *batch.BatchHeader) bool) error {
		for _, s := range kept {
			if wiped || s.created || s.keepEnd == 0 || s.next() <= start {
				s.releaseMap()
				continue
			}
			cur = s
			more, err := x.replaySegment(s, yield)
			if err != nil || !more {
				return err
			}
		}
		return nil
	}
	if err := m.Rebuild(rb); err != nil {
		return err
	}

	// Transaction indexes of the recovered segments.
	for _, s := range kept {
		if !s.recover {
			continue
		}
		name := s.name(filenames.TxnIndex)
		var want []byte
		for _, e := range aborted[s.base] {
			want = index.AppendAbortedTxn(want, e)
		}
		if len(want) == 0 {
			if x.exists(name) {
				_, empty, err := x.readFile(name, 0)
				if err != nil {
					return err
				}
				if empty {
					continue
				}
				reason := "transaction index lists aborted transactions the log does not hold"
				if cleaned, err := x.onlyCleanedTxns(name, abortMarkers); err != nil {
					return err
				} else if cleaned {
					reason = "transaction index lists only aborted transactions whose batches the log cleaner removed (their markers remain)"
				} else {
					x.r.problem(name, -1, kindIndex, "transaction index of segment %d lists aborted transactions the log does not hold", s.base)
				}
				if err := x.remove(name, kindIndex, reason); err != nil {
					return err
				}
				x.markRebuilt(s.base)
			}
			continue
		}
		same, err := x.sameContent(name, want)
		if err != nil {
			return err
		}
		if !same {
			state := "differs from the aborted transactions the replay completed"
			if !x.exists(name) {
				state = "missing"
			}
			if err := x.replace(name, want, kindIndex, "transaction index rebuilt: "+state); err != nil {
				return err
			}
			x.markRebuilt(s.base)
		}
	}
	if err := x.syncDir(); err != nil {
		return err
	}

	// The snapshot at the LEO.
	entries := m.SnapshotEntries()
	sortEntries(entries)
	x.r.Producers = m.Len()
	x.r.LastStableOffset = m.LastStableOffset(leo)
	x.r.Barriers = append(x.r.Barriers, m.Barriers()...)
	if leo <= logStart || loadedAt == leo {
		return nil
	}
	name := filenames.Make(leo, filenames.Snapshot)
	if x.exists(name) {
		old, ok := read[leo]
		if !ok {
			var err error
			old, err = snapshot.Read(x.path(name))
			ok = err == nil
		}
		if ok {
			sortEntries(old)
			if slices.Equal(old, entries) {
				return nil
			}
		}
	}
	reason := fmt.Sprintf("producer snapshot written at the log end offset %d (as Kafka's load writes it)", leo)
	if x.exists(name) {
		reason = fmt.Sprintf("producer snapshot at the log end offset %d rewritten: its entries differ from the replay", leo)
	}
	err := x.rewrite(name, kindProducerSnapshot, reason, func(string) error {
		// The snapshot at the map end offset (the LEO), written by the
		// producer state that owns the files' content.
		if err := m.TakeSnapshot(x.dir); err != nil {
			return fmt.Errorf("partlog/recovery: %w", err)
		}
		return nil
	})
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		// The snapshot is a shortcut, not data: on a full disk the log
		// opens without it (it can still be read), and the next open
		// replays from an earlier one.
		x.r.note(name, kindProducerSnapshot, "producer snapshot at the log end offset %d not written: %v; the next open replays from an earlier one", leo, err)
		return nil
	}
	if err != nil {
		return err
	}
	x.files[name] = x.path(name)
	return nil
}

// replaySegment passes the batches of s that may change producer state
// to yield, in order. It reports whether yield asked for more.
func (x *run) replaySegment(s *seg, yield func(batch.View, *batch.BatchHeader) bool) (bool, error) {
	defer s.releaseMap()
	// A segment validated from byte 0 lists the positions of the batches
	// with a producer id or the control flag: the only ones that change
	// producer state (the others only move the map end offset, which the
	// rebuild sets to the LEO).
	var positions []uint32
	listed := s.recover && s.scan != nil && !s.scan.replayAll && s.keepEnd <= s.scan.validEnd
	if listed {
		positions = s.scan.replay
		n := len(positions)
		if s.keepEnd <= math.MaxUint32 {
			n, _ = slices.BinarySearch(positions, uint32(s.keepEnd))
		}
		positions = positions[:n]
		if len(positions) == 0 {
			return true, nil
		}
	}
	mp, done, err := x.mapSeg(s)
	if err != nil {
		return false, err
	}
	defer done()
	data := mp.data[:s.keepEnd]
	more := true
	var h batch.BatchHeader
	ferr := guard(s.logPath, func() {
		switch {
		case listed:
			// Validated by the scan, which kept only their positions:
			// each header is decoded here once, for the replay.
			for _, p := range positions {
				w := batch.NewWalker(data[p:])
				v, _ := w.Next()
				v.DecodeHeader(&h)
				if more = yield(v, &h); !more {
					return
				}
			}
		case s.recover:
			w := batch.NewWalker(data)
			for v, ok := w.Next(); ok; v, ok = w.Next() {
				v.DecodeHeader(&h)
				if more = yield(v, &h); !more {
					return
				}
			}
		default:
			it := batch.NewIterator(data, 0)
			for v, ok := it.Next(); ok; v, ok = it.Next() {
				if more = yield(v, it.Header()); !more {
					return
				}
			}
			if err := it.Err(); err != nil {
				x.r.problem(s.logName, it.Position(), kindReplayIncomplete, "producer replay stopped in a trusted segment: %v", err)
			}
		}
	})
	return more, ferr
}

func sortEntries(e []snapshot.Entry) {
	sort.Slice(e, func(i, j int) bool { return e[i].ProducerID < e[j].ProducerID })
}

// onlyCleanedTxns reports whether every entry of the transaction index
// name ends at an ABORT marker of its producer that the replay met: the
// trace of a cleaning, which removed the transaction's batches and kept
// its marker (package cleaner), not damage.
func (x *run) onlyCleanedTxns(name string, markers map[int64]int64) (bool, error) {
	b, fits, err := x.readFile(name, 1<<20)
	if err != nil || !fits {
		return false, err
	}
	entries, err := index.DecodeTxnIndex(b)
	if err != nil || len(entries) == 0 {
		return false, nil
	}
	for _, e := range entries {
		if pid, ok := markers[e.LastOffset]; !ok || pid != e.ProducerID {
			return false, nil
		}
	}
	return true, nil
}
