package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
)

// logBounds applies recovery.md §2.5 steps 4–5: the segments that remain,
// the LEO, the log start, and whether the log was wiped because the LEO
// lies below the log start (E9). Missing segments are planned as created.
func (x *run) logBounds(segs []*seg) (kept []*seg, leo, logStart int64, wiped bool) {
	x.all = segs
	for _, s := range segs {
		if !s.drop {
			kept = append(kept, s)
		}
	}
	if x.createAt >= 0 {
		kept = append(kept, x.newEmpty(x.createAt))
	}
	kept = x.dropUnusableTail(kept)
	logStart = max(x.o.LogStartOffset, 0)
	if len(kept) > 0 {
		logStart = max(logStart, kept[0].base)
		leo = kept[len(kept)-1].next()
		for _, s := range kept {
			leo = max(leo, s.next())
		}
	}
	if len(kept) > 0 && leo < logStart {
		x.r.problem("", -1, kindLogStart, "log end offset %d is below the log start offset %d: every segment is removed and the log restarts empty at %d",
			leo, logStart, logStart)
		for _, s := range kept {
			s.drop = true
			s.dropWhy = fmt.Sprintf("the log end offset %d is below the log start offset %d", leo, logStart)
		}
		kept = nil
		wiped = true
	}
	if len(kept) == 0 {
		kept = []*seg{x.newEmpty(logStart)}
		leo = logStart
	}
	return kept, leo, logStart, wiped
}

// dropUnusableTail drops a last segment that holds no batch when its name
// would move the log end offset past the data for nothing: a base offset
// that can take no append (09223372036854775807.log), or bytes that are no
// batch at all under a base beyond the previous segment's end; the log end
// then stays at the data (an empty segment at the log start replaces it
// when nothing else is left). One whose bytes were all cut under a base
// below the previous segment's end is replaced by an empty segment there.
func (x *run) dropUnusableTail(kept []*seg) []*seg {
	n := len(kept)
	if n == 0 {
		return kept
	}
	s := kept[n-1]
	if s.created || s.lastOffset >= 0 {
		return kept
	}
	var why string
	switch {
	case s.base == math.MaxInt64:
		why = "its base offset leaves no room for any batch"
	case n > 1 && s.size > 0 && s.base > kept[n-2].next():
		why = fmt.Sprintf("it holds no valid batch and its base offset lies beyond the end %d of segment %d", kept[n-2].next(), kept[n-2].base)
	case n > 1 && s.base < kept[n-2].next():
		// Its bytes were cut (none valid) and its name lies below the
		// previous segment's end (E5): an empty segment at that end
		// replaces it, as for an empty one found there.
		why = fmt.Sprintf("it holds no valid batch and its base offset lies below the end %d of segment %d", kept[n-2].next(), kept[n-2].base)
		x.r.problem(s.logName, -1, kindSegmentDropped, "segment %d (%d bytes) removed: %s; replaced by an empty one at %d", s.base, s.size, why, kept[n-2].next())
		s.drop, s.dropWhy = true, why
		return append(kept[:n-1], x.newEmpty(kept[n-2].next()))
	default:
		return kept
	}
	x.r.problem(s.logName, -1, kindSegmentDropped, "segment %d (%d bytes) removed: %s; the log end stays at the data", s.base, s.size, why)
	s.drop, s.dropWhy = true, why
	return kept[:n-1]
}

func (x *run) newEmpty(base int64) *seg {
	s := &seg{base: base, created: true, firstBase: -1, lastOffset: -1, lastPos: -1,
		lastEpoch: -1, prevEpoch: -1, firstEpoch: -1, recover: true}
	s.logName = s.name(filenames.Log)
	s.logPath = x.path(s.logName)
	return s
}

// applyData removes the dropped segments (newest first, so that a crash
// in the middle leaves the same cut to be found again), then cuts the kept
// segments to their data and creates the planned empty segments.
func (x *run) applyData(kept []*seg) error {
	for i := len(x.all) - 1; i >= 0; i-- {
		s := x.all[i]
		if !s.drop {
			continue
		}
		for _, kind := range segmentKinds {
			if err := x.remove(s.name(kind), kindSegmentDropped, fmt.Sprintf("segment %d removed from the log: %s", s.base, s.dropWhy)); err != nil {
				return err
			}
		}
	}
	if err := x.syncDir(); err != nil {
		return err
	}
	if err := x.step("remove"); err != nil {
		return err
	}
	for _, s := range kept {
		switch {
		case s.created:
			// A name held by an entry recovery ignores (a symbolic link,
			// a directory) is left alone: the segment cannot be made.
			if fi, err := os.Lstat(filepath.Join(x.dir, s.logName)); err == nil && !fi.Mode().IsRegular() {
				return fmt.Errorf("partlog/recovery: cannot create the empty segment %s: the name is held by a %s, which is left alone",
					filepath.Join(x.dir, s.logName), fileKind(fi.Mode()))
			}
			if err := x.replace(s.logName, nil, kindSegmentCreated, fmt.Sprintf("empty segment created at %d (the log's active segment)", s.base)); err != nil {
				return err
			}
			s.logPath = x.path(s.logName)
		case s.keepEnd < s.size:
			if err := x.truncate(s.logName, s.keepEnd, kindCut, s.cutWhy); err != nil {
				return err
			}
		}
	}
	return x.syncDir()
}

// buildIndexes returns the offset and time index of a segment's kept data,
// rebuilt with Kafka's per-batch rule (index.Builder).
func buildIndexes(data []byte, base, interval int64) (offsets, times []byte) {
	b := index.NewBuilder(base, interval)
	walk(data, func(pos int64, v batch.View) bool {
		b.Add(pos, v.LastOffset(), v.MaxTimestamp())
		return true
	})
	return b.Finish()
}

// rebuildIndexes rewrites the offset and time index of every recovered
// segment whose rebuilt content differs from the file (or whose file is
// missing). Files are written beside and renamed over (recovery.md §7.3).
func (x *run) rebuildIndexes(kept []*seg) error {
	for _, s := range kept {
		if !s.recover && !s.flushedDamage {
			continue
		}
		var offsets, times []byte
		switch {
		case s.flushedDamage:
			// Left as it is: only a missing index is made, over the
			// valid prefix (a read past it meets the damage, as it would
			// on Kafka).
			if s.scan.idx != nil && s.scan.idx.end == s.scan.validEnd {
				offsets, times = s.scan.idx.offsets, s.scan.idx.times
				break
			}
			m, done, err := x.mapSeg(s)
			if err != nil {
				return err
			}
			ferr := guard(s.logPath, func() {
				offsets, times = buildIndexes(m.data[:s.scan.validEnd], s.base, x.o.Segment.IndexIntervalBytes)
			})
			done()
			if ferr != nil {
				return ferr
			}
		case s.keepEnd == 0:
			offsets, times = []byte{}, []byte{}
		case s.scan != nil && s.scan.idx != nil && s.scan.idx.end == s.keepEnd:
			// Computed by the validating scan over exactly these bytes.
			offsets, times = s.scan.idx.offsets, s.scan.idx.times
		default:
			m, done, err := x.mapSeg(s)
			if err != nil {
				return err
			}
			ferr := guard(s.logPath, func() {
				offsets, times = buildIndexes(m.data[:s.keepEnd], s.base, x.o.Segment.IndexIntervalBytes)
			})
			done()
			if ferr != nil {
				return ferr
			}
		}
		rebuilt := false
		for _, f := range []struct {
			kind, what string
			data       []byte
			entrySize  int64
		}{{filenames.Index, "offset index", offsets, index.OffsetEntrySize}, {filenames.TimeIndex, "time index", times, index.TimeEntrySize}} {
			name := s.name(f.kind)
			if s.flushedDamage && x.exists(name) {
				continue
			}
			if err := x.checkIndexLength(s, name, f.what, f.entrySize); err != nil {
				return err
			}
			same, err := x.sameContent(name, f.data)
			if err != nil {
				return err
			}
			if same {
				continue
			}
			if err := x.replace(name, f.data, kindIndex, x.rebuildReason(s, name, f.what)); err != nil {
				return err
			}
			rebuilt = true
		}
		if rebuilt {
			x.markRebuilt(s.base)
		}
	}
	return x.syncDir()
}

// checkIndexLength reports an index of a recovered segment whose length
// is not a multiple of its entry size as a problem before it is rebuilt:
// Kafka's sanity check calls such an index corrupt, where a rebuild of a
// recovered segment's index is routine. An index whose failed sanity
// check made the segment recovered is reported already.
func (x *run) checkIndexLength(s *seg, name, what string, entrySize int64) error {
	if s.whyFile == name || !x.exists(name) {
		return nil
	}
	fi, err := os.Lstat(x.path(name))
	if err != nil {
		return fmt.Errorf("partlog/recovery: %w", err)
	}
	if n := fi.Size(); n%entrySize != 0 {
		x.r.problem(name, -1, kindIndex, "%s of segment %d: length %d is not a multiple of %d (Kafka's sanity check calls it corrupt); rebuilt from the data",
			what, s.base, n, entrySize)
	}
	return nil
}

// rebuildReason says why the index name (what) of the recovered segment s
// is rewritten.
func (x *run) rebuildReason(s *seg, name, what string) string {
	state := "differs from the one rebuilt from the data"
	if !x.exists(name) {
		state = "missing"
	}
	var cause string
	switch {
	case s.created:
		return fmt.Sprintf("%s of the new empty segment %d", what, s.base)
	case s.cutWhy != "":
		cause = "its segment is cut (" + s.cutWhy + ")"
	case s.why != "":
		cause = "segment recovered: " + s.why
	case x.o.Full:
		cause = "every segment is validated (full verification)"
	default:
		cause = "segment in the recovery range: Kafka rebuilds its indexes on load"
	}
	return fmt.Sprintf("%s rebuilt: %s; %s", what, state, cause)
}

func (x *run) markRebuilt(base int64) {
	for _, b := range x.r.IndexesRebuilt {
		if b == base {
			return
		}
	}
	x.r.IndexesRebuilt = append(x.r.IndexesRebuilt, base)
}

// sameContent reports whether the live file name exists and holds exactly
// data.
func (x *run) sameContent(name string, data []byte) (bool, error) {
	if !x.exists(name) {
		return false, nil
	}
	b, fits, err := x.readFile(name, int64(len(data)))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fits && bytes.Equal(b, data), nil
}

// fileKind names the type of a non-regular file for messages.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	}
	return "non-regular file"
}
