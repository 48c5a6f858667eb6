package partlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/recovery"
	"golang.org/x/sys/unix"
)

// TopicPartition names a partition of a log directory.
type TopicPartition = checkpoint.TopicPartition

// DirOptions configure OpenDir.
type DirOptions struct {
	// Log is the template for every partition's Options (nil: Kafka's
	// defaults). CleanShutdown, RecoveryPoint and LogStartOffset are taken
	// from the log directory's files instead.
	Log *Options
	// Parallelism is how many partitions load, and close, at once.
	// Default: four per CPU, at least 8: both mostly wait on the file system
	// (bench/RESULTS.md, DirOptions.Parallelism).
	Parallelism int
	// BrokerEpoch is written into the clean-shutdown marker by Close.
	// Default -1 (none).
	BrokerEpoch int64
	// PartitionOptions, if set, returns a partition's own Options (a
	// topic's settings), which replace Log for that partition (nil: use
	// Log). The fields taken from the log directory's files are set as
	// for Log.
	PartitionOptions func(TopicPartition) *Options
	// Quarantine, if set, is where the recovery of a partition at open
	// places every byte it removes (cut tails, dropped segments, replaced
	// indexes; recovery.Options.Quarantine), a relative path being taken
	// inside the partition directory, which recovery and Kafka's loader
	// skip as a subdirectory. Default "": removed bytes are deleted, as
	// Kafka deletes them.
	Quarantine string
}

// ErrDirLocked is returned by OpenDir when another holder (a running
// broker, another partlog, another Dir of this process) holds the log
// directory's .lock. It satisfies errors.Is(err, ErrLocked).
var ErrDirLocked = fmt.Errorf("%w: log directory .lock is held", ErrLocked)

// DirProblem is something OpenDir found and did not load.
type DirProblem struct {
	// Name is the entry of the log directory concerned.
	Name string
	// Kind is "unrecognized" (not a partition directory name Kafka could
	// have made), "scheduled-for-deletion", "future", "stray" (Kafka's
	// suffixed directories, left alone), "metadata-log" (KRaft's
	// __cluster_metadata-0, which Kafka's log manager does not load
	// either), "bad-checkpoint", "inconsistent-topic-id"
	// (partition.metadata names another id than the partition's Options),
	// "not-a-directory" (an entry named like a partition directory that
	// is a regular file or another non-directory; left alone),
	// "flushed-damage" (a cleanly shut down partition whose repair would
	// cut data below its recovery point: ErrFlushedDamage), "read-only"
	// (Name "."; the checkpoints could not be written at open: Dir.ReadOnly)
	// or "failed".
	Kind string
	// Detail says more.
	Detail string
}

// Dir is an open Kafka log directory (one entry of log.dirs): every
// partition directory in it, its recovery-point and log-start
// checkpoints and its clean-shutdown marker (formats.md §6, recovery.md
// §1.6–1.8). Logs() may be used concurrently; Close is not concurrent
// with Checkpoint.
type Dir struct {
	path     string
	opts     DirOptions
	lockFile *os.File
	logs     map[TopicPartition]*Log
	problems []DirProblem
	// unloaded holds the checkpoint entries of the partitions that failed
	// to load: they are written back unchanged (never dropped), and while
	// there are any, Close writes no clean-shutdown marker.
	unloaded map[TopicPartition]unloadedEntry
	clean    bool
	// readOnly is why every write is refused (ReadOnly), set by OpenDir.
	readOnly error
	// cleanerFile: cleaner-offset-checkpoint exists (it is written once
	// a partition has a cleaner checkpoint, and kept from then on).
	cleanerFile bool
	mu          sync.Mutex // serializes Checkpoint, Close, Create and Delete
	closed      bool
	// lmu guards logs against Create and Delete (which also hold mu) for
	// Logs, Log and Reports.
	lmu       sync.RWMutex
	deletions pendingDeletions // deleted partition directories
}

// kafkaSuffixedDirRE matches Kafka's delete/future/stray directories.
var kafkaSuffixedDirRE = regexp.MustCompile(`^(\S+)-(\S+)\.(\S+)-(delete|future|stray)$`)

// unloadedEntry is what the checkpoints said of a partition that failed
// to load.
type unloadedEntry struct {
	recoveryPoint, logStart, highWatermark, firstDirty             int64
	hasRecoveryPoint, hasLogStart, hasHighWatermark, hasFirstDirty bool
	// unchanged: the partition was refused before anything of it changed
	// (ErrFlushedDamage), so it does not stop the clean-shutdown marker.
	unchanged bool
}

// OpenDir opens a Kafka log directory: it takes the directory's .lock
// (LockLogDir: it conflicts with a running broker and with another Dir of
// the same directory in this process, ErrDirLocked), reads
// and then deletes the clean-shutdown marker (so a crash while loading is
// seen as unclean next time, KAFKA-10471), reads the recovery-point and
// log-start checkpoints (a malformed one is reported and treated as
// missing, which means full recovery), and opens every partition
// directory in parallel, recovering those that need it. Directories whose
// names it does not recognise, and Kafka's -delete/-future/-stray
// directories, are reported and left alone (never loaded or deleted). A
// partition that fails to open is reported; the others are served.
func OpenDir(path string, opts *DirOptions) (*Dir, error) {
	var o DirOptions
	if opts != nil {
		o = *opts
	}
	if o.Parallelism <= 0 {
		// Loading is mostly waiting on the file system (opens, creates,
		// the odd fsync), so more loads than cores are in flight.
		o.Parallelism = max(4*runtime.GOMAXPROCS(0), 8)
	}
	if o.BrokerEpoch == 0 {
		o.BrokerEpoch = checkpoint.NoBrokerEpoch
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, err
	}
	lock, err := LockLogDir(path)
	if err != nil {
		return nil, err
	}
	d := &Dir{path: path, opts: o, lockFile: lock, logs: map[TopicPartition]*Log{}, unloaded: map[TopicPartition]unloadedEntry{}}
	if err := d.load(); err != nil {
		for _, l := range d.logs {
			_ = l.Close()
		}
		_ = lock.Close()
		return nil, err
	}
	return d, nil
}

// LockLogDir takes an exclusive record lock on the whole of the log
// directory's .lock file, creating it if needed, where Kafka takes its
// (FileChannel.tryLock, a POSIX record lock). The lock is an
// open-file-description lock (F_OFD_SETLK): it conflicts with a broker's
// POSIX lock on the same file, and, unlike a POSIX lock, also with a
// second LockLogDir of this process, and closing another descriptor of
// the file does not drop it. The lock lasts until the returned file is
// closed.
func LockLogDir(path string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(path, ".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	// Pid must be 0 for an OFD lock.
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w: %s", ErrDirLocked, path)
		}
		return nil, fmt.Errorf("partlog: lock %s: %w", path, err)
	}
	return f, nil
}

// metadataTopic is KRaft's metadata log, which Kafka's log manager skips.
const metadataTopic = "__cluster_metadata"

// maxTopicLen is the longest topic name Kafka accepts (Topic.validate).
const maxTopicLen = 249

// ParsePartitionDir parses a partition directory name "<topic>-<n>" the
// way Kafka does (the topic is everything before the last '-'), and
// accepts it only if Kafka could have made it: the topic is a legal Kafka
// topic name (1 to 249 of [a-zA-Z0-9._-], not "." or "..") and n is a
// partition number in canonical form (decimal, no sign, no leading zero,
// at most 2^31-1), so that no two names map to the same partition
// ("t-01" and "t-1"). Since the split is at the last '-', "t--1" is
// partition 1 of topic "t-", as in Kafka.
func ParsePartitionDir(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || !validTopic(name[:i]) {
		return TopicPartition{}, false
	}
	num := name[i+1:]
	p, err := strconv.ParseInt(num, 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != num {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// validTopic reports whether Kafka accepts topic as a topic name.
func validTopic(topic string) bool {
	if topic == "" || len(topic) > maxTopicLen || topic == "." || topic == ".." {
		return false
	}
	for i := 0; i < len(topic); i++ {
		switch c := topic[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func (d *Dir) load() error {
	marker := filepath.Join(d.path, checkpoint.CleanShutdownFile)
	clean, err := checkpoint.CleanShutdownExists(marker)
	if err != nil {
		return err
	}
	d.clean = clean
	if clean {
		if err := checkpoint.RemoveCleanShutdown(marker); err != nil {
			return err
		}
	}
	rps := d.readOffsets(checkpoint.RecoveryPointFile)
	starts := d.readOffsets(checkpoint.LogStartOffsetFile)
	hws := d.readOffsets(checkpoint.ReplicationOffsetFile)
	dirty := d.readOffsets(checkpoint.CleanerOffsetFile)
	_, err = os.Lstat(filepath.Join(d.path, checkpoint.CleanerOffsetFile))
	d.cleanerFile = err == nil
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return err
	}
	type job struct {
		tp   TopicPartition
		name string
	}
	var jobs []job
	for _, e := range entries {
		name := e.Name()
		if e.Type()&fs.ModeSymlink != 0 {
			if _, ok := ParsePartitionDir(name); ok {
				// Its target may lie outside the log directory.
				d.problems = append(d.problems, DirProblem{Name: name, Kind: "unrecognized", Detail: "symbolic link; not followed, left alone"})
			}
			continue
		}
		if !e.IsDir() {
			if _, ok := ParsePartitionDir(name); ok {
				d.problems = append(d.problems, DirProblem{Name: name, Kind: "not-a-directory",
					Detail: "named like a partition directory but not a directory; left alone"})
			}
			continue // checkpoints, the marker, .lock, foreign files
		}
		if m := kafkaSuffixedDirRE.FindStringSubmatch(name); m != nil {
			kind := map[string]string{"delete": "scheduled-for-deletion", "future": "future", "stray": "stray"}[m[4]]
			d.problems = append(d.problems, DirProblem{Name: name, Kind: kind, Detail: "Kafka's " + m[4] + " directory; left alone"})
			continue
		}
		tp, ok := ParsePartitionDir(name)
		if !ok {
			d.problems = append(d.problems, DirProblem{Name: name, Kind: "unrecognized", Detail: "not a topic-partition directory; left alone"})
			continue
		}
		if tp.Topic == metadataTopic {
			d.problems = append(d.problems, DirProblem{Name: name, Kind: "metadata-log", Detail: "KRaft metadata log (the Raft layer's); left alone"})
			continue
		}
		jobs = append(jobs, job{tp, name})
	}
	var mu sync.Mutex
	inParallel(d.opts.Parallelism, len(jobs), func(i int) {
		j := jobs[i]
		o := d.partitionOptions(j.tp)
		o.HighWatermark = hws[j.tp]
		o.CleanShutdown = clean
		o.RecoveryPoint = 0
		if rp, ok := rps[j.tp]; ok {
			o.RecoveryPoint = rp
		}
		o.LogStartOffset = starts[j.tp]
		o.FirstDirtyOffset = dirty[j.tp]
		l, err := openLog(filepath.Join(d.path, j.name), &o, d.opts.Quarantine)
		if err == nil {
			l.onTruncated = d.checkpointAfterTruncation
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			kind := "failed"
			u := unloadedEntry{}
			switch {
			case errors.Is(err, ErrInconsistentTopicID):
				kind = "inconsistent-topic-id"
			case errors.Is(err, ErrFlushedDamage):
				// Left exactly as the clean shutdown left it: the
				// next open is clean for it too, and refuses again
				// instead of cutting after an unclean open.
				kind, u.unchanged = "flushed-damage", true
			}
			d.problems = append(d.problems, DirProblem{Name: j.name, Kind: kind, Detail: err.Error()})
			u.recoveryPoint, u.hasRecoveryPoint = rps[j.tp]
			u.logStart, u.hasLogStart = starts[j.tp]
			u.highWatermark, u.hasHighWatermark = hws[j.tp]
			u.firstDirty, u.hasFirstDirty = dirty[j.tp]
			d.unloaded[j.tp] = u
			return
		}
		d.logs[j.tp] = l
	})
	// The recovery points of recovered partitions were lowered to what is
	// known durable: persist that before anything new is appended
	// (recovery.md §2.14). On a full disk nothing may be appended then,
	// but the partitions can still be read: the directory opens read-only
	// (a broker killed on a full disk could not start at all).
	if err := d.Checkpoint(); err != nil {
		if !errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.EDQUOT) {
			return err
		}
		cause := fmt.Errorf("the log directory opened read-only: its checkpoints could not be written (%w); reopen it with space to write", err)
		d.readOnly = fmt.Errorf("%w: %w", ErrFailed, cause)
		for _, l := range d.logs {
			l.refuseWrites(cause)
		}
		d.problems = append(d.problems, DirProblem{Name: ".", Kind: "read-only", Detail: d.readOnly.Error()})
	}
	sort.Slice(d.problems, func(i, k int) bool { return d.problems[i].Name < d.problems[k].Name })
	return nil
}

// inParallel calls fn(0), ..., fn(n-1), at most limit of them at once,
// and returns when every call has.
func inParallel(limit, n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(limit, 1))
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// ReadOnly returns why the directory refuses writes (its logs, Create),
// or nil: OpenDir could not write the checkpoints it must write before
// anything is appended (a full disk).
func (d *Dir) ReadOnly() error { return d.readOnly }

// readOffsets reads an offset checkpoint; a malformed one is reported and
// treated as missing (everything recovered: the safe direction).
func (d *Dir) readOffsets(name string) map[TopicPartition]int64 {
	m, err := checkpoint.ReadOffsets(filepath.Join(d.path, name))
	if err != nil {
		d.problems = append(d.problems, DirProblem{Name: name, Kind: "bad-checkpoint", Detail: err.Error() + "; treated as missing"})
		return map[TopicPartition]int64{}
	}
	return m
}

// Path returns the log directory.
func (d *Dir) Path() string { return d.path }

// CleanShutdown reports whether the directory had its clean-shutdown
// marker when it was opened.
func (d *Dir) CleanShutdown() bool { return d.clean }

// Logs returns the open partitions.
func (d *Dir) Logs() map[TopicPartition]*Log {
	d.lmu.RLock()
	defer d.lmu.RUnlock()
	out := make(map[TopicPartition]*Log, len(d.logs))
	for tp, l := range d.logs {
		out[tp] = l
	}
	return out
}

// Log returns one partition.
func (d *Dir) Log(tp TopicPartition) (*Log, bool) {
	d.lmu.RLock()
	defer d.lmu.RUnlock()
	l, ok := d.logs[tp]
	return l, ok
}

// Problems lists the entries OpenDir did not load and why.
func (d *Dir) Problems() []DirProblem { return append([]DirProblem(nil), d.problems...) }

// Reports returns the recovery report of every partition that was
// recovered at open.
func (d *Dir) Reports() map[TopicPartition]*recovery.Report {
	d.lmu.RLock()
	defer d.lmu.RUnlock()
	out := map[TopicPartition]*recovery.Report{}
	for tp, l := range d.logs {
		if r := l.RecoveryReport(); r != nil {
			out[tp] = r
		}
	}
	return out
}

// Checkpoint writes recovery-point-offset-checkpoint (every partition's
// recovery point), log-start-offset-checkpoint (the partitions whose
// log start is above their first segment's base offset, as Kafka lists
// them), replication-offset-checkpoint (every partition's high
// watermark) and, once a partition has one, cleaner-offset-checkpoint
// (each cleaned partition's first dirty offset), each atomically. Kafka
// does this every minute and at shutdown (and writes the cleaner's after
// each cleaning: a crash here only makes the next cleaning start earlier).
func (d *Dir) Checkpoint() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.checkpointLocked()
}

func (d *Dir) checkpointLocked() error {
	rps := map[TopicPartition]int64{}
	starts := map[TopicPartition]int64{}
	hws := map[TopicPartition]int64{}
	dirty := map[TopicPartition]int64{}
	for tp, l := range d.logs {
		rps[tp] = l.RecoveryPoint()
		hws[tp] = l.HighWatermark()
		if segs := l.Segments(); len(segs) > 0 && l.LogStartOffset() > segs[0] {
			starts[tp] = l.LogStartOffset()
		}
		if o, ok := l.CleanerCheckpoint(); ok {
			dirty[tp] = o
		}
	}
	for tp, u := range d.unloaded {
		if u.hasRecoveryPoint {
			rps[tp] = u.recoveryPoint
		}
		if u.hasLogStart {
			starts[tp] = u.logStart
		}
		if u.hasHighWatermark {
			hws[tp] = u.highWatermark
		}
		if u.hasFirstDirty {
			dirty[tp] = u.firstDirty
		}
	}
	errs := []error{
		checkpoint.WriteOffsets(filepath.Join(d.path, checkpoint.RecoveryPointFile), rps),
		checkpoint.WriteOffsets(filepath.Join(d.path, checkpoint.LogStartOffsetFile), starts),
		checkpoint.WriteOffsets(filepath.Join(d.path, checkpoint.ReplicationOffsetFile), hws)}
	if len(dirty) > 0 || d.cleanerFile {
		// Kafka writes it once its cleaner has cleaned something.
		errs = append(errs, checkpoint.WriteOffsets(filepath.Join(d.path, checkpoint.CleanerOffsetFile), dirty))
		d.cleanerFile = true
	}
	return errors.Join(errs...)
}

// checkpointAfterTruncation rewrites the directory's checkpoints after
// one of its logs truncated (Log.onTruncated): the recovery point
// checkpointed before was above the cut.
func (d *Dir) checkpointAfterTruncation() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	return d.checkpointLocked()
}

// Close flushes and closes every partition, writes both checkpoints (the
// entries of partitions that failed to load kept as they were) and, if
// every partition loaded and closed cleanly, the clean-shutdown marker;
// then it releases the directory's lock. It is idempotent.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	// In parallel, as they were opened: each close is a few fsyncs (the
	// flush, the snapshot, the trimmed files, the directory), and one
	// after another they kept a server of thousands of partitions from
	// stopping for tens of seconds.
	logs := make([]*Log, 0, len(d.logs))
	for _, l := range d.logs {
		logs = append(logs, l)
	}
	errs := make([]error, len(logs), len(logs)+4)
	inParallel(d.opts.Parallelism, len(logs), func(i int) { errs[i] = logs[i].Close() })
	durable := true
	for _, l := range logs {
		durable = durable && l.closedDurable
	}
	ckErr := d.checkpointLocked()
	errs = append(errs, ckErr, d.deletions.removeNow())
	// A partition that failed to load was not recovered: the next open
	// must not trust the directory as cleanly shut down (Kafka takes the
	// whole log directory offline instead), unless it was refused
	// untouched. A partition whose close failed after its data was
	// flushed (a producer snapshot it could not write: an immutable
	// directory, a full disk) does not withhold the marker from the
	// others: the next open rebuilds what it lacks. Unflushed data does.
	untouched := true
	for _, u := range d.unloaded {
		untouched = untouched && u.unchanged
	}
	if durable && ckErr == nil && untouched {
		errs = append(errs, checkpoint.WriteCleanShutdown(filepath.Join(d.path, checkpoint.CleanShutdownFile), d.opts.BrokerEpoch))
	}
	errs = append(errs, d.lockFile.Close())
	return errors.Join(errs...)
}
