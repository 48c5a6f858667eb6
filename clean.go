package partlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/cleaner"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/segment"
)

// Cleaner runs the cleanings of compacted logs (package cleaner) on a few
// workers shared by the logs that use it: no goroutine while no log is
// due, an offset map of CleanerOptions.MapBytes at most, I/O bounded by
// CleanerOptions.IOBytesPerSecond.
type Cleaner = cleaner.Pool

// CleanerOptions configure a Cleaner (Kafka's log.cleaner.* broker
// settings; zero fields: Kafka's defaults).
type CleanerOptions = cleaner.PoolConfig

// CleanResult says what a cleaning did.
type CleanResult = cleaner.Result

// Defaults of CleanerOptions (Kafka's log.cleaner.threads,
// log.cleaner.dedupe.buffer.size and log.cleaner.backoff.ms).
const (
	DefaultCleanerThreads  = cleaner.DefaultThreads
	DefaultCleanerMapBytes = cleaner.DefaultMapBytes
	DefaultCleanerBackoff  = cleaner.DefaultBackoff
)

// NewCleaner returns a cleaner; Close it once no log uses it.
func NewCleaner(o CleanerOptions) *Cleaner { return cleaner.NewPool(o) }

var (
	defaultCleanerOnce sync.Once
	defaultCleaner     *Cleaner
)

// DefaultCleaner returns the process-wide cleaner used by logs opened
// without Options.Cleaner (one thread, a 128 MiB offset map reserved on
// its first cleaning and touched only as far as a cleaning needs).
func DefaultCleaner() *Cleaner {
	defaultCleanerOnce.Do(func() { defaultCleaner = NewCleaner(CleanerOptions{}) })
	return defaultCleaner
}

// ErrCleaningStopped is returned by Compact when the log closed, was
// truncated or lost segments to retention while it cleaned (what was
// installed before stays; nothing is lost).
var ErrCleaningStopped = cleaner.ErrStopped

// ErrUncleanable is returned by Compact (and CleanerError) for a log
// holding what the cleaner cannot clean: a corrupt batch, a legacy
// message (the error says which and where).
var ErrUncleanable = cleaner.ErrUncleanable

// cleanState is a log's part in cleaning.
type cleanState struct {
	// run is held for a whole round (pool or Compact): one round at a
	// time per log, and Close waits for the running one. Lock order: run
	// before appendMu.
	run sync.Mutex
	// removals counts the operations that took segments out of the list
	// other than an installation (truncation, retention, log start):
	// a round started before one stops and installs nothing more.
	removals atomic.Uint64
	// firstDirty is the cleaner checkpoint: where the next round's dirty
	// section starts (-1: none, the log start). Written under appendMu.
	firstDirty atomic.Int64
	task       *cleanTask
	closed     bool // under run
}

// cleanTask is the Log as the pool sees it.
type cleanTask struct{ l *Log }

func (t *cleanTask) Evaluate(now time.Time) (cleaner.Evaluation, error) {
	return t.l.evaluateClean(now)
}

func (t *cleanTask) Clean(w *cleaner.Worker, now time.Time) error {
	l := t.l
	_, err := l.cleanRound(w, now, false)
	if err == nil {
		// Kafka's cleaner threads apply retention to compacted logs right
		// after cleaning them (a compact-only log: below its log start).
		_, err = l.DeleteOldSegments(now)
	}
	return err
}

// cleanerConfig is what the cleaner reads of the options.
func (o *Options) cleanerConfig() cleaner.Config {
	return cleaner.Config{
		MinCleanableRatio:  o.MinCleanableDirtyRatio,
		MinCompactionLagMs: o.MinCompactionLagMs,
		MaxCompactionLagMs: o.MaxCompactionLagMs,
		DeleteRetentionMs:  o.DeleteRetentionMs,
		SegmentBytes:       o.SegmentBytes,
		MaxIndexBytes:      o.MaxIndexBytes,
		IndexIntervalBytes: o.IndexIntervalBytes,
		MaxBatchBytes:      o.MaxBatchBytes,
	}
}

// compacted reports whether the log's policy includes compaction.
func (l *Log) compacted() bool { return l.opts.CleanupPolicy&Compact != 0 }

// startCleaning registers a compacted log with its cleaner at open.
func (l *Log) startCleaning() {
	l.clean.firstDirty.Store(-1)
	if l.opts.FirstDirtyOffset > 0 {
		l.clean.firstDirty.Store(l.opts.FirstDirtyOffset)
	}
	if !l.compacted() {
		return
	}
	if l.opts.Cleaner == nil {
		l.opts.Cleaner = DefaultCleaner()
	}
	l.clean.task = &cleanTask{l: l}
	l.opts.Cleaner.Notify(l.clean.task)
}

// reconfigureCleaning follows a change of the cleaner's settings (caller
// holds appendMu): a log that became compacted gets a task, and any
// compacted log is looked at again with its new settings; it returns the
// task of a log that stopped being compacted, for the caller to take out
// of its cleaner once appendMu is released.
func (l *Log) reconfigureCleaning() *cleanTask {
	if !l.compacted() {
		t := l.clean.task
		l.clean.task = nil
		return t
	}
	if l.clean.task == nil {
		if l.opts.Cleaner == nil {
			l.opts.Cleaner = DefaultCleaner()
		}
		l.clean.task = &cleanTask{l: l}
	}
	l.opts.Cleaner.Notify(l.clean.task)
	return nil
}

// notifyCleaner tells the cleaner a compacted log has new sealed data (a
// roll). Caller holds appendMu.
func (l *Log) notifyCleaner() {
	if t := l.clean.task; t != nil {
		l.opts.Cleaner.Notify(t)
	}
}

// stopCleaning makes a running round stop, waits for it, and takes the
// log out of its cleaner (Close). Called without appendMu.
func (l *Log) stopCleaning() {
	l.clean.removals.Add(1)
	l.clean.run.Lock()
	l.clean.closed = true
	l.clean.run.Unlock()
	l.appendMu.Lock()
	t := l.clean.task
	l.appendMu.Unlock()
	if t != nil {
		l.opts.Cleaner.Forget(t)
	}
}

// CleanerCheckpoint returns the log's cleaner-offset-checkpoint entry (the
// first dirty offset of its next cleaning), and false when it has none.
func (l *Log) CleanerCheckpoint() (int64, bool) {
	o := l.clean.firstDirty.Load()
	return o, o >= 0
}

// CleanerError returns the error of the log's last failed cleaning when
// its cleaner leaves it alone because of it (Kafka's uncleanable
// partitions), else nil.
func (l *Log) CleanerError() error {
	l.appendMu.Lock()
	t := l.clean.task
	l.appendMu.Unlock()
	if t != nil {
		return l.opts.Cleaner.Err(t)
	}
	return nil
}

// Compact cleans the log now, once, whatever its dirty ratio (a
// compacted log is otherwise cleaned by its Cleaner when due): every
// segment below the first uncleanable offset (the last stable offset, the
// active segment, min.compaction.lag.ms) is rewritten keeping the last
// record of each key, as package cleaner describes, with an offset map of
// the Cleaner's size. A log whose policy is not compact is cleaned as if
// it were (partlog compact uses this on Kafka's compacted topics). It
// returns what the round did; ErrCleaningStopped when the log closed or
// lost segments meanwhile.
func (l *Log) Compact(now time.Time) (CleanResult, error) {
	l.appendMu.Lock()
	pool := l.opts.Cleaner
	l.appendMu.Unlock()
	if pool == nil {
		pool = DefaultCleaner()
	}
	w, err := cleaner.NewWorker(pool.Config().MapBytes/int64(pool.Config().Threads), cleaner.NewThrottle(pool.Config().IOBytesPerSecond))
	if err != nil {
		return CleanResult{}, err
	}
	defer w.Close()
	return l.cleanRound(w, now, true)
}

// cleanStat is the planning view of the log. Caller holds appendMu.
func (l *Log) cleanStatLocked(cfg *cleaner.Config, nowMs int64) (cleaner.LogStat, []*segment.Segment, error) {
	l.mu.RLock()
	segs := slices.Clone(l.segments)
	l.mu.RUnlock()
	st := cleaner.LogStat{LogStart: l.logStartOffset.Load(), LogEnd: l.logEndOffset.Load(),
		LastStable: l.LastStableOffset(), Checkpoint: l.clean.firstDirty.Load()}
	firstDirty := st.LogStart
	if c := st.Checkpoint; c >= st.LogStart && c <= st.LogEnd {
		firstDirty = c
	}
	st.Segments = make([]cleaner.SegmentStat, len(segs))
	for i, s := range segs {
		ss := cleaner.SegmentStat{Base: s.BaseOffset(), Size: s.Size(), LargestTimestamp: -1, FirstTimestamp: -1}
		dirty := i+1 < len(segs) && segs[i+1].BaseOffset() > firstDirty
		if dirty && cfg.MinCompactionLagMs > 0 {
			ts, _, err := s.MaxTimestampSoFar()
			if err != nil {
				return st, nil, err
			}
			ss.LargestTimestamp = ts
		}
		if dirty && cfg.MaxCompactionLagMs < cleaner.DefaultMaxCompactionLag {
			ts, err := firstBatchTimestamp(s)
			if err != nil {
				return st, nil, err
			}
			ss.FirstTimestamp = ts
		}
		st.Segments[i] = ss
	}
	return st, segs, nil
}

// firstBatchTimestamp is the max timestamp of the segment's first batch
// (Kafka's getFirstBatchTimestamp), -1 when it has none.
func firstBatchTimestamp(s *segment.Segment) (int64, error) {
	r, err := s.Read(s.BaseOffset(), 1, 1<<62)
	if err != nil {
		return -1, err
	}
	defer r.Release()
	if len(r.Bytes) < batch.HeaderSize {
		return -1, nil
	}
	return batch.View(r.Bytes).MaxTimestamp(), nil
}

// evaluateClean plans a cleaning at now for the pool.
func (l *Log) evaluateClean(now time.Time) (cleaner.Evaluation, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Load() || l.failed != nil {
		return cleaner.Evaluation{}, nil
	}
	cfg := l.opts.cleanerConfig()
	st, segs, err := l.cleanStatLocked(&cfg, now.UnixMilli())
	if err != nil {
		return cleaner.Evaluation{}, err
	}
	p := cleaner.PlanClean(&st, &cfg, now.UnixMilli())
	if p.ResetCheckpoint {
		l.clean.firstDirty.Store(p.FirstDirty)
	}
	e := cleaner.Evaluation{Due: p.Due(&cfg) && p.FirstDirty < p.FirstUncleanable, Ratio: p.Ratio()}
	if !e.Due {
		// Time alone may make it due: a lag, or an open transaction (or
		// the high watermark) holding back what can be cleaned.
		active := segs[len(segs)-1].BaseOffset()
		e.Recheck = p.FirstUncleanable < active || (cfg.MaxCompactionLagMs < cleaner.DefaultMaxCompactionLag && p.CleanableBytes > 0)
	}
	return e, nil
}

// cleanRound runs one round with w; with force it runs whatever the dirty
// ratio. Called without appendMu.
func (l *Log) cleanRound(w *cleaner.Worker, now time.Time, force bool) (CleanResult, error) {
	l.clean.run.Lock()
	defer l.clean.run.Unlock()
	if l.clean.closed {
		return CleanResult{}, ErrCleaningStopped
	}
	nowMs := now.UnixMilli()
	l.appendMu.Lock()
	if err := l.checkWritable(); err != nil {
		l.appendMu.Unlock()
		return CleanResult{}, err
	}
	cfg := l.opts.cleanerConfig()
	st, segs, err := l.cleanStatLocked(&cfg, nowMs)
	if err != nil {
		l.appendMu.Unlock()
		return CleanResult{}, err
	}
	p := cleaner.PlanClean(&st, &cfg, nowMs)
	if p.ResetCheckpoint {
		l.clean.firstDirty.Store(p.FirstDirty)
	}
	if p.FirstDirty >= p.FirstUncleanable || (!force && !p.Due(&cfg)) {
		l.appendMu.Unlock()
		return CleanResult{EndOffset: p.FirstDirty}, nil
	}
	n := 0
	for n < len(segs)-1 && segs[n].BaseOffset() < p.FirstUncleanable {
		n++
	}
	r := &cleaner.Round{Dir: l.dir, Segments: segs[:n], Stats: st.Segments[:n], Next: make([]int64, n),
		FirstDirty: p.FirstDirty, FirstUncleanable: p.FirstUncleanable, NowMs: nowMs, Config: &cfg,
		Producers: map[int64]cleaner.LastRecord{}, AbortedTxns: l.AbortedTransactions}
	for i := 0; i < n; i++ {
		r.Next[i] = segs[i+1].BaseOffset()
		r.Stats[i].IndexBytes, r.Stats[i].TimeIndexBytes = fileSize(segs[i].Path(filenames.Index)), fileSize(segs[i].Path(filenames.TimeIndex))
	}
	for _, e := range l.psm.ProducersAppendLocked() {
		r.Producers[e.ProducerID] = cleaner.LastRecord{LastDataOffset: e.LastOffset, Epoch: e.ProducerEpoch}
	}
	gen := l.clean.removals.Load()
	l.appendMu.Unlock()

	r.Stop = func() bool { return l.clean.removals.Load() != gen }
	r.Install = func(group []*segment.Segment, out *cleaner.Output) error { return l.installCleaned(gen, group, out) }
	res, err := w.Clean(r)
	if err != nil && r.Stop() {
		err = ErrCleaningStopped
	}
	if err != nil {
		return res, err
	}
	l.appendMu.Lock()
	if l.clean.removals.Load() == gen {
		l.clean.firstDirty.Store(res.EndOffset)
	}
	l.appendMu.Unlock()
	return res, nil
}

func fileSize(p string) int64 {
	if st, err := os.Stat(p); err == nil {
		return st.Size()
	}
	return 0
}

// installCleaned puts the cleaned segment out in place of group, with the
// swap protocol of package cleaner: out's files to .swap, the originals to
// .deleted (dropped from the list at the same time, under mu, so no reader
// sees the range missing), out's files to the live names, each step made
// durable before the next. Before the first rename it checks that nothing
// removed segments since the round began and that group is still in the
// list; after it, a failure poisons the log (the next open finishes or
// rolls back the replacement).
func (l *Log) installCleaned(gen uint64, group []*segment.Segment, out *cleaner.Output) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.clean.removals.Load() != gen || l.checkWritable() != nil {
		return ErrCleaningStopped
	}
	at := slices.Index(l.segments, group[0])
	if at < 0 || at+len(group) >= len(l.segments) || !slices.Equal(l.segments[at:at+len(group)], group) {
		return ErrCleaningStopped
	}
	next := l.segments[at+len(group)].BaseOffset()
	fail := func(err error) error {
		l.failed = fmt.Errorf("partlog: installing a cleaned segment: %w", err)
		return l.failed
	}
	if err := out.RenameSwap(); err != nil {
		return fail(err)
	}
	l.mu.Lock()
	paths, errs := l.renameDeleted(group)
	errs = append(errs, fsutil.SyncDir(l.dir))
	if err := errors.Join(errs...); err != nil {
		l.setSegments(slices.Delete(slices.Clone(l.segments), at, at+len(group)))
		l.mu.Unlock()
		return fail(err)
	}
	err := cleaner.Step(l.dir, cleaner.StepOriginalsGone)
	if err == nil {
		err = out.RenameLive()
	}
	var ns *segment.Segment
	if err == nil {
		ns, err = segment.OpenSealed(l.dir, out.Base(), l.segConfig(), l.opts.Now())
	}
	if err != nil {
		l.setSegments(slices.Delete(slices.Clone(l.segments), at, at+len(group)))
		l.mu.Unlock()
		return fail(err)
	}
	ns.SetNextOffset(next)
	l.keys[ns] = l.cache.register(ns)
	segs := slices.Concat(l.segments[:at], []*segment.Segment{ns}, l.segments[at+len(group):])
	l.setSegments(segs)
	l.mu.Unlock()
	// The producer snapshots named after the replaced segments go with
	// them, as Kafka's replaceSegments deletes them (a later load would
	// remove them as strays).
	errs = errs[:0]
	for _, s := range group[1:] {
		if err := os.Remove(filenames.Path(l.dir, s.BaseOffset(), filenames.Snapshot)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, l.deletions.add(paths, l.opts.FileDeleteDelayMs))...)
}
