package recovery

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
)

// seg is one segment of the directory while Run decides about it.
type seg struct {
	base    int64
	logName string
	logPath string
	size    int64 // file length of the .log

	recover bool   // validated from byte 0 and indexes rebuilt
	why     string // why a trusted segment is recovered after all
	// whyFile is the index that failed its sanity check, when that is
	// why (the problem names it).
	whyFile string
	scan    *scanResult
	m       *mapped // the .log mapped by the scan, kept until the replay

	// Known after the decisions: the bytes kept, the batches in them.
	keepEnd    int64
	batches    int
	firstBase  int64 // -1 when empty
	lastOffset int64 // -1 when empty
	lastEpoch  int32
	prevEpoch  int32
	lastPos    int64
	firstEpoch int32
	drop       bool   // removed from the log
	dropWhy    string // why it is removed
	// flushedDamage: damage was found in this segment, which lies wholly
	// below the recovery point, and it is left as it is (no cut; only
	// missing indexes are made, from the valid prefix).
	flushedDamage bool
	cutWhy        string // why its .log is cut (keepEnd < size)
	created       bool   // made by Run (empty)
	trimmed       bool   // a lost trim was cut

	// With Options.OpenActive, the last segment's files opened for
	// appending (checked through them), and what its trusted check found.
	pending *segment.Pending
	tail    segment.Tail
}

func (s *seg) next() int64 {
	if s.lastOffset >= 0 {
		return s.lastOffset + 1
	}
	return s.base
}

func (s *seg) name(kind string) string { return filenames.Make(s.base, kind) }

// Run opens, checks and (unless opts.DryRun) repairs the partition
// directory dir, following the steps listed in the package documentation.
// It returns an error, and changes no segment data, when a file cannot be
// read or written (I/O errors are never treated as damaged data).
func Run(dir string, opts Options) (*Report, error) {
	l, err := Load(dir, opts)
	if err != nil {
		return nil, err
	}
	return l.Report, nil
}

// Loaded is the outcome of Load: the report, and the state it rebuilt,
// which a log opening the directory adopts as it is. It is the one place
// that decides what a partition directory holds: a log opens exactly the
// segments of Report.Segments (with their sizes and last offsets) and
// lists, checks and replays nothing itself.
type Loaded struct {
	// Report says what was found and done.
	Report *Report
	// Producers is the producer state at the log end offset, rebuilt from
	// the snapshot and the replay (its map end offset is the LEO); nil
	// when the repair was refused (Report.Refused).
	Producers *producerstate.Manager
	// Epochs is the leader-epoch cache after recovery (what
	// leader-epoch-checkpoint holds unless DryRun).
	Epochs []checkpoint.EpochEntry
	// Active, with Options.OpenActive, is the last segment of
	// Report.Segments opened for appending from the files recovery
	// checked, when it was trusted and kept as it is (else nil: the
	// caller opens it). The caller owns it.
	Active *segment.Segment
}

// Load is Run, returning also the state a log adopts.
func Load(dir string, opts Options) (*Loaded, error) {
	x := &run{o: opts.withDefaults(), dir: dir, swapped: map[int64]bool{}, createAt: -1}
	x.r = &Report{Dir: dir, CleanShutdown: opts.Clean, Segments: []SegmentReport{}, IndexesRebuilt: []int64{},
		Barriers: []int64{}, Problems: []Problem{}, Changes: []Change{}, Notes: []Problem{}, RemovedFiles: []string{},
		SnapshotsDiscarded: []int64{}, Epochs: []EpochReport{}}
	if IsMetadataLog(dir) && (x.o.Clean || x.o.RecoveryPoint != 0) {
		// Kafka opens its metadata log with recovery point 0 and no
		// clean shutdown, whatever the log directory says.
		x.o.Clean, x.o.RecoveryPoint = false, 0
		x.r.note("", kindMetadataLog, "the cluster metadata log is always recovered in full (recovery point 0, clean-shutdown marker ignored), as Kafka does")
	}
	if opts.RefuseFlushedCut && !opts.DryRun {
		// Plan first: a cut below the recovery point is refused before
		// anything is changed.
		plan := opts
		plan.DryRun, plan.RefuseFlushedCut, plan.KeepFlushed = true, false, false
		pr, err := Run(dir, plan)
		if err != nil {
			return nil, err
		}
		var flushed *Problem
		for i := range pr.Problems {
			if pr.Problems[i].Kind == kindFlushedDamage {
				flushed = &pr.Problems[i]
				break
			}
		}
		if t := pr.Truncation; t != nil && t.Class == ClassCorruptFlushed {
			pr.Refused = fmt.Sprintf("the repair would cut data below the recovery point (%s in segment %d at position %d); nothing was changed",
				t.Class, t.SegmentBaseOffset, t.Position)
			pr.problem(filenames.Make(t.SegmentBaseOffset, filenames.Log), t.Position, kindRefused, "%s", pr.Refused)
			pr.Changes = []Change{}
			pr.finish(true)
			return &Loaded{Report: pr}, nil
		}
		if flushed != nil {
			pr.Refused = fmt.Sprintf("%s holds damage below the recovery point (position %d), which only a forced repair cuts; nothing was changed",
				flushed.File, flushed.Position)
			pr.problem(flushed.File, flushed.Position, kindRefused, "%s", pr.Refused)
			pr.Changes = []Change{}
			pr.finish(true)
			return &Loaded{Report: pr}, nil
		}
	}
	if err := x.runSteps(); err != nil {
		if x.active != nil {
			_ = x.active.Close()
		}
		if errors.Is(err, errKeepFlushed) {
			t := x.r.Truncation
			file := filenames.Make(t.SegmentBaseOffset, filenames.Log)
			x.r.Refused = fmt.Sprintf("the repair would cut %s at position %d (offset %d on, %d bytes), below the recovery point: %s; no segment was changed",
				file, t.Position, t.Offset, t.BytesRemoved, t.Reason)
			x.r.problem(file, t.Position, kindRefused, "%s", x.r.Refused)
			x.r.finish(true)
			return &Loaded{Report: x.r}, nil
		}
		return nil, err
	}
	x.r.finish(x.o.DryRun)
	return &Loaded{Report: x.r, Producers: x.state, Epochs: x.epochList, Active: x.active}, nil
}

// errKeepFlushed stops a Run with Options.KeepFlushed before its cut.
var errKeepFlushed = errors.New("partlog/recovery: cut below the recovery point refused")

// metadataLogDir is the partition directory of KRaft's metadata log.
const metadataLogDir = "__cluster_metadata-0"

// IsMetadataLog reports whether dir is the partition directory of KRaft's
// cluster metadata log, which Run always recovers in full.
func IsMetadataLog(dir string) bool { return filepath.Base(filepath.Clean(dir)) == metadataLogDir }

func (x *run) runSteps() error {
	// 1. Leftovers.
	if err := x.leftovers(); err != nil {
		return err
	}
	if err := x.step("leftovers"); err != nil {
		return err
	}
	// 2. Segments and the recovery range.
	segs, err := x.loadSegments()
	if err != nil {
		return err
	}
	// 3. Validation in parallel.
	var todo []int
	for i, s := range segs {
		if s.recover {
			todo = append(todo, i)
		}
	}
	x.o.scanAll(segs, todo)
	scanned := segs
	defer func() {
		for _, s := range scanned {
			s.releaseMap()
			if s.pending != nil {
				_ = s.pending.Close()
				s.pending = nil
			}
		}
	}()
	for _, i := range todo {
		if err := segs[i].scan.err; err != nil {
			return err
		}
	}
	// 3–4. Sequential decisions in offset order: the cut and its class.
	if err := x.decide(segs); err != nil {
		return err
	}
	if t := x.r.Truncation; x.o.KeepFlushed && !x.o.DryRun && t != nil && t.Class == ClassCorruptFlushed {
		return errKeepFlushed // nothing of the segments changed yet
	}
	// 8 (first half). Log start, log end, empty logs.
	segs, leo, logStart, wiped := x.logBounds(segs)
	// 5. Apply the data changes.
	if err := x.applyData(segs); err != nil {
		return err
	}
	if err := x.step("data"); err != nil {
		return err
	}
	if err := x.rebuildIndexes(segs); err != nil {
		return err
	}
	if err := x.step("indexes"); err != nil {
		return err
	}
	// 6. Producer state.
	if err := x.producers(segs, leo, logStart, wiped); err != nil {
		return err
	}
	if err := x.step("producers"); err != nil {
		return err
	}
	// 7. Leader epochs.
	if err := x.epochs(segs, leo, logStart, wiped); err != nil {
		return err
	}
	if err := x.syncDir(); err != nil {
		return err
	}
	if err := x.step("epochs"); err != nil {
		return err
	}
	// 8 (second half). Offsets for the log.
	x.r.LogStartOffset = logStart
	x.r.LogEndOffset = leo
	rp := max(x.o.RecoveryPoint, 0)
	if x.o.Clean && x.r.Truncation == nil {
		rp = leo
	}
	x.r.RecoveryPoint = max(min(rp, leo), logStart)
	if err := x.activate(segs); err != nil {
		return err
	}
	for _, s := range segs {
		if s.created && !x.o.DryRun {
			s.keepEnd = 0
		}
		sr := SegmentReport{BaseOffset: s.base, SizeBytes: s.keepEnd, Batches: s.batches, LastOffset: s.lastOffset}
		x.r.Segments = append(x.r.Segments, sr)
	}
	return nil
}

// activate turns the last segment's pending files (Options.OpenActive)
// into the active segment when the segment was trusted and is kept as it
// is: not recovered, cut, dropped or replaced. Otherwise they are closed
// (by runSteps) and the caller opens the segment from what recovery left.
func (x *run) activate(kept []*seg) error {
	s := kept[len(kept)-1]
	if s.pending == nil || s.recover || s.drop || s.created || s.trimmed || s.flushedDamage || s.keepEnd != s.size {
		return nil
	}
	p := s.pending
	s.pending = nil
	a, err := p.Activate(s.tail)
	if err != nil {
		return err
	}
	x.active = a
	return nil
}

// loadSegments lists the live .log files, sorted, and decides which are
// recovered (recovery.md §2.5, with the engine's checks of trusted
// segments, §2.14 and §7.3).
func (x *run) loadSegments() ([]*seg, error) {
	var segs []*seg
	for name, p := range x.files {
		n, err := filenames.Parse(name)
		if err != nil || n.Transient != "" || n.Kind != filenames.Log {
			continue
		}
		segs = append(segs, &seg{base: n.Offset, logName: name, logPath: p, size: -1,
			firstBase: -1, lastOffset: -1, lastPos: -1, lastEpoch: -1, prevEpoch: -1, firstEpoch: -1})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].base < segs[j].base })
	if len(segs) == 0 {
		return nil, nil
	}
	for i, s := range segs {
		if i == len(segs)-1 && x.pendingLast(s) {
			continue // its length comes from the open of its files (checkPending)
		}
		st, err := os.Stat(s.logPath)
		if err != nil {
			return nil, fmt.Errorf("partlog/recovery: stat %s: %w", s.logPath, err)
		}
		s.size = st.Size()
	}
	if x.o.Full {
		x.r.note("", kindFullRecovery, "full verification: every segment is validated, whatever the recovery point and the clean-shutdown marker")
		for _, s := range segs {
			s.recover = true
		}
	} else if !x.o.Clean {
		rp := x.o.RecoveryPoint
		if rp < 0 {
			x.r.note("", kindFullRecovery, "no recovery point: every segment is validated")
			rp = 0
		}
		first := 0
		for i, s := range segs {
			if s.base <= rp {
				first = i
			}
		}
		for _, s := range segs[first:] {
			s.recover = true
		}
	}
	for i, s := range segs {
		if s.recover {
			continue
		}
		if x.swapped[s.base] {
			s.recover, s.why = true, "completed swap"
			continue
		}
		nextBase := int64(math.MaxInt64)
		if i+1 < len(segs) {
			nextBase = segs[i+1].base
		}
		why, missing, err := x.checkTrusted(s, nextBase, i == len(segs)-1)
		if err != nil {
			return nil, err
		}
		if why != "" {
			s.recover, s.why = true, why
			if missing {
				// Kafka too rebuilds a missing index on load (D4, D5,
				// D16): a change, not damage.
				continue
			}
			kind, file := kindIndex, s.logName
			if s.whyFile != "" {
				file = s.whyFile
			} else if x.o.Clean && i == len(segs)-1 {
				kind = kindCleanMarker
			}
			x.r.problem(file, -1, kind, "segment %d recovered: %s", s.base, why)
		}
	}
	return segs, nil
}

// checkTrusted checks a segment that is not in the recovery range: its
// indexes must pass their sanity checks and point into the data, its first
// batch must belong to it, and its batches from the last offset-index entry
// on must end exactly at the end of the file. It returns why the segment
// must be recovered, or "" (and then sets the segment's offsets from the
// tail it read); missing is true when the only reason is a missing index.
//
// With Options.OpenActive (and Clean, without DryRun) the last segment's
// files are opened for appending and checked through those descriptors and
// mappings (s.pending), which the log then adopts as its active segment.
func (x *run) checkTrusted(s *seg, nextBase int64, last bool) (why string, missing bool, err error) {
	idxName, timeName := s.name(filenames.Index), s.name(filenames.TimeIndex)
	if !x.exists(idxName) {
		return "offset index missing", true, nil
	}
	if !x.exists(timeName) {
		return "time index missing", true, nil
	}
	if last && x.pendingLast(s) {
		why, err = x.checkPending(s)
		if (why != "" || err != nil) && s.pending != nil { // nil when the open failed
			_ = s.pending.Close()
			s.pending = nil
		}
		if !errors.Is(err, index.ErrPastCapacity) {
			return why, false, err
		}
		// An index longer than the capacity (segment.index.bytes lowered,
		// or a torn file): checked read-only, as it is, below; the log's
		// open cuts it only if it passes.
	}
	why, err = x.checkIndexesAndTail(s, nextBase)
	return why, false, err
}

// pendingLast reports whether s, the last segment, is checked through its
// files opened for appending (checkPending): Options.OpenActive, Clean,
// not DryRun or Full, not a completed swap, and both indexes listed.
func (x *run) pendingLast(s *seg) bool {
	return x.o.OpenActive && x.o.Clean && !x.o.DryRun && !x.o.Full && !x.swapped[s.base] &&
		x.exists(s.name(filenames.Index)) && x.exists(s.name(filenames.TimeIndex))
}

// checkPending is checkIndexesAndTail of the last segment through its files
// opened for appending (s.pending, set unless the open fails); it sets
// s.size from the open .log.
func (x *run) checkPending(s *seg) (string, error) {
	txnName := s.name(filenames.TxnIndex)
	names := []string{s.logName, s.name(filenames.Index), s.name(filenames.TimeIndex), txnName}
	if x.o.hooks != nil && x.o.hooks.open != nil {
		for _, name := range names {
			if p := x.path(name); x.exists(name) {
				if err := x.o.hooks.open(p); err != nil {
					return "", fmt.Errorf("partlog/recovery: open %s: %w", p, err)
				}
			}
		}
	}
	p, err := segment.OpenPending(x.dir, s.base, x.o.Segment, x.o.Now(), x.exists(txnName))
	if err != nil {
		return "", fmt.Errorf("partlog/recovery: open segment %d: %w", s.base, err)
	}
	s.pending = p
	f, size := p.Log()
	s.size = size
	ox, tx, xx := p.OffsetIndex(), p.TimeIndex(), p.TxnIndex()
	for _, c := range []struct {
		name  string
		check func() error
	}{{names[1], ox.Sanity}, {names[2], tx.Sanity}, {txnName, xx.Sanity}} {
		var sanity error
		if ferr := guard(x.path(c.name), func() { sanity = c.check() }); ferr != nil {
			return "", ferr
		}
		if sanity != nil {
			if !index.IsCorrupt(sanity) {
				return "", fmt.Errorf("partlog/recovery: check %s: %w", x.path(c.name), sanity)
			}
			s.whyFile = c.name
			return fmt.Sprintf("%s fails its sanity check: %v", c.name, sanity), nil
		}
	}
	return x.checkData(s, math.MaxInt64, ox.LastEntry(), ox.Entries(), tx.LastEntry(), tx.Entries(), func() (*mapped, error) {
		return readOrMap(f, s.logPath, size, false)
	})
}

// checkIndexesAndTail is checkTrusted once both indexes exist.
func (x *run) checkIndexesAndTail(s *seg, nextBase int64) (string, error) {
	idxName, timeName, txnName := s.name(filenames.Index), s.name(filenames.TimeIndex), s.name(filenames.TxnIndex)
	var last index.OffsetEntry
	var entries int64
	var lastTime index.TimeEntry
	var timeEntries int64
	for _, name := range []string{idxName, timeName, txnName} {
		if !x.exists(name) {
			continue
		}
		p := x.path(name)
		if x.o.hooks != nil && x.o.hooks.open != nil {
			if err := x.o.hooks.open(p); err != nil {
				return "", fmt.Errorf("partlog/recovery: open %s: %w", p, err)
			}
		}
		var sanity error
		switch name {
		case idxName:
			ix, err := index.OpenOffsetIndex(p, s.base, true)
			if err != nil {
				return "", fmt.Errorf("partlog/recovery: open %s: %w", p, err)
			}
			sanity = ix.Sanity()
			last, entries = ix.LastEntry(), ix.Entries()
			_ = ix.Close()
		case timeName:
			ix, err := index.OpenTimeIndex(p, s.base, true)
			if err != nil {
				return "", fmt.Errorf("partlog/recovery: open %s: %w", p, err)
			}
			sanity = ix.Sanity()
			lastTime, timeEntries = ix.LastEntry(), ix.Entries()
			_ = ix.Close()
		case txnName:
			ix, err := index.OpenTxnIndex(p, s.base, true)
			if err != nil {
				return "", fmt.Errorf("partlog/recovery: open %s: %w", p, err)
			}
			sanity = ix.Sanity()
			_ = ix.Close()
		}
		if sanity != nil {
			if !index.IsCorrupt(sanity) {
				return "", fmt.Errorf("partlog/recovery: check %s: %w", p, sanity)
			}
			s.whyFile = name
			return fmt.Sprintf("%s fails its sanity check: %v", name, sanity), nil
		}
	}
	return x.checkData(s, nextBase, last, entries, lastTime, timeEntries, func() (*mapped, error) { return x.o.openMapped(s.logPath, false) })
}

// checkData is the .log part of checkIndexesAndTail, given what the
// indexes hold; open gives the .log's bytes.
func (x *run) checkData(s *seg, nextBase int64, last index.OffsetEntry, entries int64, lastTime index.TimeEntry, timeEntries int64,
	open func() (*mapped, error)) (string, error) {
	if s.size == 0 {
		if entries > 0 || timeEntries > 0 {
			return "indexes of an empty segment hold entries", nil
		}
		s.tail = segment.Tail{NextOffset: s.base, MaxTimestamp: batch.NoTimestamp, OffsetOfMaxTimestamp: s.base, RollingTimestamp: batch.NoTimestamp}
		return "", nil
	}
	m, err := open()
	if err != nil {
		return "", err
	}
	defer m.close()
	why := ""
	ferr := guard(s.logPath, func() { why = x.checkTail(s, m.data, last, entries, lastTime, timeEntries, nextBase) })
	return why, ferr
}

func (x *run) checkTail(s *seg, data []byte, last index.OffsetEntry, entries int64, lastTime index.TimeEntry, timeEntries, nextBase int64) string {
	first, err := batch.Check(data)
	if err != nil {
		return fmt.Sprintf("first batch invalid: %v", err)
	}
	if first.BaseOffset() < s.base {
		return fmt.Sprintf("first batch base offset %d below the segment base offset %d", first.BaseOffset(), s.base)
	}
	start := int64(0)
	if entries > 0 {
		start = int64(last.Position)
		if start >= int64(len(data)) {
			return fmt.Sprintf("last offset-index entry points to position %d, past the data (%d bytes)", start, len(data))
		}
		v, err := batch.Check(data[start:])
		if err != nil {
			return fmt.Sprintf("last offset-index entry does not point to a batch: %v", err)
		}
		if v.BaseOffset() > last.Offset {
			return fmt.Sprintf("last offset-index entry %d points to a batch starting at %d", last.Offset, v.BaseOffset())
		}
	}
	r := scanSegment(data[start:], s.base, nil)
	if r.fail != failNone {
		if r.fail == failZero {
			return "zero padding after the data (a lost trim)"
		}
		return fmt.Sprintf("tail invalid at position %d: %s", start+r.validEnd, r.reason)
	}
	if entries > 0 && r.lastOffset < last.Offset {
		return fmt.Sprintf("last offset-index entry %d beyond the data", last.Offset)
	}
	if timeEntries > 0 && (lastTime.Offset > r.lastOffset || lastTime.Offset >= nextBase) {
		return fmt.Sprintf("last time-index entry offset %d beyond the data", lastTime.Offset)
	}
	// What an active segment's open would read again (segment.Tail):
	// the time index's last entry, then the tail's batches.
	t := segment.Tail{NextOffset: r.lastOffset + 1, MaxTimestamp: batch.NoTimestamp, OffsetOfMaxTimestamp: s.base, RollingTimestamp: first.MaxTimestamp()}
	if timeEntries > 0 {
		t.MaxTimestamp, t.OffsetOfMaxTimestamp = lastTime.Timestamp, lastTime.Offset
	}
	if r.maxTimestamp > t.MaxTimestamp {
		t.MaxTimestamp, t.OffsetOfMaxTimestamp = r.maxTimestamp, r.offsetOfMax
	}
	s.tail = t
	s.keepEnd = s.size
	s.firstBase, s.firstEpoch = first.BaseOffset(), first.PartitionLeaderEpoch()
	s.lastOffset, s.lastEpoch, s.prevEpoch = r.lastOffset, r.lastEpoch, r.prevEpoch
	s.lastPos = -1
	if r.lastPos >= 0 {
		s.lastPos = start + r.lastPos
	}
	s.batches = -1
	return ""
}

// errStop ends the decision loop once the cut is placed.
var errStop = errors.New("stop")
