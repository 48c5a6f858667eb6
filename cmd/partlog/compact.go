package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/cleaner"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/recovery"
	"github.com/spf13/cobra"
)

// compactOptions are the flags of `partlog compact`.
type compactOptions struct {
	recoverOptions
	deleteRetentionMs  int64
	minCompactionLagMs int64
	segmentBytes       int64
	maxIndexBytes      int64
	mapBytes           int64
}

func newCompactCommand(stdout, stderr io.Writer) *cobra.Command {
	o := compactOptions{recoverOptions: recoverOptions{now: time.Now}}
	cmd := newDirCommand(&o, "compact [--json] [--apply [--force]] [--quarantine PATH] DIR...", "Clean compacted partition directories offline, as Kafka's log cleaner does", `compact cleans partition directories of compacted topics (Kafka's
cleanup.policy=compact) while no broker runs on them: every segment below
the first uncleanable offset (the last stable offset, bounded by the high
watermark of the log directory's replication-offset-checkpoint, or the log
end without one; the active segment; --min-compaction-lag-ms) is rewritten
keeping the last record of each key, with Kafka's rules for tombstones and
transaction markers (removed --delete-retention-ms after a cleaning first
found them removable, through the delete horizon written into their
batch), aborted transactions, and each live producer's last batch; the
mirroring barrier is always kept. The whole log is cleaned, whatever its
dirty ratio. The topic's own settings are not known offline: pass them
with the flags (the defaults are Kafka's).

Without --apply it only plans: recovery's verdict, as verify gives it, and
the part a cleaning would rewrite. With --apply it first runs recovery as
"recover --apply" does (same quarantine, same refusal of data below the
recovery point without --force; a partition with problems left is not
cleaned), then cleans. Nothing is destroyed: every segment the cleaning
replaces keeps its old files, hard-linked into the quarantine directory
(which must be on the partition's file system). The cleaned segments are
installed as Kafka's cleaner installs them (.cleaned, .swap, .deleted), so a
crash midway leaves what Kafka's and partlog's recovery both finish.

`+recoveryReads+` With --apply it
writes only inside the partition directory and the quarantine; the log
directory's cleaner-offset-checkpoint is not written (the next cleaning by
a broker starts from its own entry, which is safe).

Exit status: 0 nothing to do, 1 cleaned (or repaired), 4 problems (left
as they are, or refused), 8 operational error, 16 usage error; several
directories OR their codes.`, stdout, stderr)
	f := cmd.Flags()
	f.Int64Var(&o.deleteRetentionMs, "delete-retention-ms", cleaner.DefaultDeleteRetentionMs, "the topic's delete.retention.ms")
	f.Int64Var(&o.minCompactionLagMs, "min-compaction-lag-ms", 0, "the topic's min.compaction.lag.ms")
	f.Int64Var(&o.segmentBytes, "segment-bytes", partlog.DefaultSegmentBytes, "the topic's segment.bytes (the most data a cleaned segment takes)")
	f.Int64Var(&o.maxIndexBytes, "segment-index-bytes", partlog.DefaultMaxIndexBytes, "the topic's segment.index.bytes")
	f.Int64Var(&o.mapBytes, "dedupe-buffer-size", partlog.DefaultCleanerMapBytes, "memory of the offset map (log.cleaner.dedupe.buffer.size); a smaller one cleans in several rounds")
	return cmd
}

func (o *compactOptions) validate() error {
	if err := o.recoverOptions.validate(); err != nil {
		return err
	}
	switch {
	case o.deleteRetentionMs < 0, o.minCompactionLagMs < 0:
		return &exitError{code: exitUsage, err: errors.New("--delete-retention-ms and --min-compaction-lag-ms must not be negative")}
	case o.segmentBytes < 14 || o.segmentBytes > 1<<31-1:
		return &exitError{code: exitUsage, err: fmt.Errorf("--segment-bytes %d outside [14, 2^31-1]", o.segmentBytes)}
	case o.maxIndexBytes < 12 || o.mapBytes <= 0:
		return &exitError{code: exitUsage, err: errors.New("--segment-index-bytes and --dedupe-buffer-size are too small")}
	}
	return nil
}

// compactReport is what compact did to one partition (--json: one object
// per partition directory, schemaVersion 1).
type compactReport struct {
	SchemaVersion int    `json:"schemaVersion"`
	Dir           string `json:"dir"`
	// Recovery is recovery's report (what --apply repaired first).
	Recovery any `json:"recovery"`
	// Plan is the cleanable part of the log.
	FirstDirtyOffset       int64   `json:"firstDirtyOffset"`
	FirstUncleanableOffset int64   `json:"firstUncleanableOffset"`
	HighWatermark          int64   `json:"highWatermark"`
	HighWatermarkFrom      string  `json:"highWatermarkFrom"`
	CleanableBytes         int64   `json:"cleanableBytes"`
	DirtyRatio             float64 `json:"dirtyRatio"`
	// Applied says whether the cleaning ran; the rest says what it did.
	Applied        bool     `json:"applied"`
	EndOffset      int64    `json:"endOffset"`
	Groups         int      `json:"groups"`
	BytesRead      int64    `json:"bytesRead"`
	BytesWritten   int64    `json:"bytesWritten"`
	RecordsRead    int64    `json:"recordsRead"`
	RecordsKept    int64    `json:"recordsKept"`
	Quarantine     string   `json:"quarantine,omitempty"`
	QuarantinedLog []string `json:"quarantined"`
	Status         string   `json:"status"`
}

func (o *compactOptions) run(dirs []string, stdout, stderr io.Writer) error {
	quarantines := newQuarantines(o.quarantine, o.now(), dirs)
	var reports = map[*partitionTarget]*compactReport{}
	ps := newPrinter(stdout, stderr, o.json, "compact")
	code := forEachPartition(dirs, stderr, "compact", func(t *partitionTarget) partitionResult {
		rep, res := o.compactOne(t, quarantines.of(t))
		reports[t] = rep
		return res
	}, func(t *partitionTarget, res *partitionResult) {
		rep := reports[t]
		if res.err != nil || res.refused != "" || rep == nil {
			ps.print(t, res)
			return
		}
		if o.json {
			rep.Recovery = jsonReport(res.rep)
			writeJSONLine(stdout, rep)
			return
		}
		if res.rep != nil && (len(res.rep.Changes) > 0 || len(res.rep.Problems) > 0) {
			printReportText(stdout, res.rep, res.dryRun, nil)
		}
		printCompactText(stdout, t.dir, rep)
	})
	return exitWith(code)
}

func printCompactText(w io.Writer, dir string, r *compactReport) {
	fmt.Fprintf(w, "%s: %s\n", dir, r.Status)
	fmt.Fprintf(w, "  cleanable: offsets [%d, %d), %d bytes, dirty ratio %.2f (high watermark %d, from %s)\n",
		r.FirstDirtyOffset, r.FirstUncleanableOffset, r.CleanableBytes, r.DirtyRatio, r.HighWatermark, r.HighWatermarkFrom)
	if !r.Applied {
		return
	}
	fmt.Fprintf(w, "  cleaned up to offset %d into %d segments: %d bytes -> %d, %d records -> %d\n",
		r.EndOffset, r.Groups, r.BytesRead, r.BytesWritten, r.RecordsRead, r.RecordsKept)
	if len(r.QuarantinedLog) > 0 {
		fmt.Fprintf(w, "  replaced files kept in %s: %d\n", r.Quarantine, len(r.QuarantinedLog))
	}
}

// compactOne plans (and with --apply runs) the cleaning of one partition.
func (o *compactOptions) compactOne(t *partitionTarget, q string) (*compactReport, partitionResult) {
	var res partitionResult
	lock, err := lockPartition(t)
	if err != nil {
		if errors.Is(err, errPartitionBusy) {
			res.refused = fmt.Sprintf("%v; not compacted", err)
			res.code = exitProblems
			return nil, res
		}
		res.err = err
		return nil, res
	}
	released := false
	defer func() {
		if !released {
			_ = lock.release()
		}
	}()
	ropts := t.recoveryOptions(o.indexInterval)
	ropts.DryRun = !o.apply
	res.dryRun = !o.apply
	if o.apply {
		ropts.Quarantine = q
		ropts.RefuseFlushedCut = !o.force
		ropts.CutFlushed = o.force
	}
	res.rep, res.err = recovery.Run(t.dir, ropts)
	if res.err != nil {
		return nil, res
	}
	rep := &compactReport{SchemaVersion: 1, Dir: t.dir, Status: "nothing to clean", QuarantinedLog: []string{}}
	hw, from := res.rep.LogEndOffset, "the log end (no replication-offset-checkpoint entry)"
	if v, ok := t.logDir.hws[t.tp]; ok && t.tpOK {
		hw, from = min(max(v, res.rep.LogStartOffset), res.rep.LogEndOffset), "replication-offset-checkpoint"
	}
	rep.HighWatermark, rep.HighWatermarkFrom = hw, from
	cfg := o.cleanerConfig()
	st := cleaner.LogStat{LogStart: res.rep.LogStartOffset, LogEnd: res.rep.LogEndOffset,
		LastStable: min(res.rep.LastStableOffset, hw), Checkpoint: -1}
	for _, s := range res.rep.Segments {
		st.Segments = append(st.Segments, cleaner.SegmentStat{Base: s.BaseOffset, Size: s.SizeBytes, LargestTimestamp: -1, FirstTimestamp: -1})
	}
	plan := cleaner.PlanClean(&st, &cfg, o.now().UnixMilli())
	rep.FirstDirtyOffset, rep.FirstUncleanableOffset = plan.FirstDirty, plan.FirstUncleanable
	rep.CleanableBytes, rep.DirtyRatio = plan.CleanableBytes, plan.Ratio()
	if res.rep.Status == recovery.StatusProblems || res.rep.Refused != "" {
		rep.Status = "not cleaned: recovery found problems"
		return rep, res
	}
	if !o.apply {
		if plan.FirstDirty < plan.FirstUncleanable {
			rep.Status = "would clean (run with --apply)"
		}
		return rep, res
	}
	// Open takes its own lock on the partition directory: release ours
	// (the log directory's .lock stays held until the end).
	if err := lock.releaseDir(); err != nil {
		res.err = err
		return rep, res
	}
	rep.Applied = true
	q = freshDir(q)
	rep.Quarantine = q
	linked, err := linkSegments(t.dir, q)
	if err != nil {
		res.err = err
		return rep, res
	}
	pool := partlog.NewCleaner(partlog.CleanerOptions{MapBytes: o.mapBytes})
	defer pool.Close()
	l, err := partlog.Open(t.dir, &partlog.Options{CleanShutdown: true, RecoveryPoint: res.rep.RecoveryPoint,
		LogStartOffset: res.rep.LogStartOffset, HighWatermark: hw, PrefaultBytes: -1,
		SegmentBytes: o.segmentBytes, MaxIndexBytes: o.maxIndexBytes, IndexIntervalBytes: indexInterval(o.indexInterval),
		DeleteRetentionMs: nonZero(o.deleteRetentionMs), MinCompactionLagMs: o.minCompactionLagMs,
		Cleaner: pool, Now: o.now})
	if err != nil {
		res.err = errors.Join(err, unlinkUnchanged(t.dir, q, linked, rep))
		return rep, res
	}
	r := partlog.CleanResult{EndOffset: -1}
	for {
		// A map too small for the dirty section ends a round early: go on
		// from where it stopped.
		var round partlog.CleanResult
		round, err = l.Compact(o.now())
		r.Groups += round.Groups
		r.BytesRead, r.BytesWritten = r.BytesRead+round.BytesRead, r.BytesWritten+round.BytesWritten
		r.RecordsRead, r.RecordsKept = r.RecordsRead+round.RecordsRead, r.RecordsKept+round.RecordsKept
		progressed := round.EndOffset > r.EndOffset
		r.EndOffset = round.EndOffset
		if err != nil || round.Groups == 0 || !progressed || round.EndOffset >= plan.FirstUncleanable {
			break
		}
	}
	err = errors.Join(err, l.Close(), unlinkUnchanged(t.dir, q, linked, rep))
	released = true
	err = errors.Join(err, lock.release())
	if err != nil {
		res.err = err
		if errors.Is(err, partlog.ErrUncleanable) {
			res.err, res.code = nil, exitProblems
			rep.Status = "not cleaned: " + err.Error()
		}
		return rep, res
	}
	rep.EndOffset, rep.Groups = r.EndOffset, r.Groups
	rep.BytesRead, rep.BytesWritten, rep.RecordsRead, rep.RecordsKept = r.BytesRead, r.BytesWritten, r.RecordsRead, r.RecordsKept
	if r.Groups > 0 {
		rep.Status = "cleaned"
		res.code |= exitRepaired
	}
	return rep, res
}

func (o *compactOptions) cleanerConfig() cleaner.Config {
	return cleaner.Config{MinCleanableRatio: 0, MinCompactionLagMs: o.minCompactionLagMs, MaxCompactionLagMs: cleaner.DefaultMaxCompactionLag,
		DeleteRetentionMs: o.deleteRetentionMs, SegmentBytes: o.segmentBytes, MaxIndexBytes: o.maxIndexBytes,
		IndexIntervalBytes: o.indexInterval}
}

// indexInterval is Kafka's index.interval.bytes as partlog's option.
func indexInterval(v int64) int64 {
	if v == 0 {
		return partlog.IndexEveryAppend
	}
	return v
}

// nonZero is a delete.retention.ms as partlog's option (Kafka's 0 is
// negative there).
func nonZero(v int64) int64 {
	if v == 0 {
		return -1
	}
	return v
}

// freshDir returns q, or q-2, q-3… when q already holds files (a second
// run within the same second).
func freshDir(q string) string {
	for i := 2; ; i++ {
		ents, err := os.ReadDir(q)
		if err != nil || len(ents) == 0 {
			return q
		}
		q = strings.TrimSuffix(q, fmt.Sprintf("-%d", i-1)) + fmt.Sprintf("-%d", i)
	}
}

// linkSegments hard-links every segment file of dir into q (created if
// needed): the cleaning renames and removes the files it replaces, whose
// bytes then stay in q. It returns the names linked.
func linkSegments(dir, q string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		n, err := filenames.Parse(e.Name())
		if err != nil || n.Transient != "" || n.Kind == filenames.Snapshot || !e.Type().IsRegular() {
			continue
		}
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(q, 0o755); err != nil {
		return nil, err
	}
	for i, name := range names {
		if err := os.Link(filepath.Join(dir, name), filepath.Join(q, name)); err != nil {
			_, _ = unlinkAll(q, names[:i])
			return nil, fmt.Errorf("keep %s in the quarantine (it must be on the partition's file system): %w", name, err)
		}
	}
	return names, nil
}

// unlinkUnchanged removes from q the links of files the cleaning left as
// they were (still the live file's inode), and records the others in rep.
func unlinkUnchanged(dir, q string, names []string, rep *compactReport) error {
	var errs []error
	for _, name := range names {
		kept, err := os.Stat(filepath.Join(q, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		live, err := os.Stat(filepath.Join(dir, name))
		if err == nil && os.SameFile(kept, live) {
			errs = append(errs, os.Remove(filepath.Join(q, name)))
			continue
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		rep.QuarantinedLog = append(rep.QuarantinedLog, name)
	}
	sort.Strings(rep.QuarantinedLog)
	// An empty default quarantine directory (nothing replaced, nothing
	// repaired) is removed; Remove fails harmlessly on a non-empty one.
	if filepath.Dir(filepath.Dir(q)) == filepath.Clean(dir) {
		_ = os.Remove(q)
		_ = os.Remove(filepath.Dir(q))
	}
	return errors.Join(errs...)
}

func unlinkAll(q string, names []string) (int, error) {
	var errs []error
	for _, n := range names {
		errs = append(errs, os.Remove(filepath.Join(q, n)))
	}
	return len(names), errors.Join(errs...)
}
