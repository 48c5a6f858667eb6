package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/segment"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// logDirState is what a log directory says about its partitions: its
// clean-shutdown marker and its recovery-point and log-start checkpoints.
type logDirState struct {
	path  string
	clean bool
	// rps and starts are nil when the checkpoint is missing or malformed;
	// so are hws (high watermarks), read for compact.
	rps, starts, hws map[partlog.TopicPartition]int64
	// hasRP and hasStart say whether the checkpoint files exist.
	hasRP, hasStart, hasHW bool
	// warnings are malformed checkpoints (treated as missing, which
	// means full recovery: the safe direction).
	warnings []string
}

// readLogDirState reads the marker and checkpoints of the log directory
// path without changing anything. A malformed checkpoint is a warning;
// an I/O error is returned.
func readLogDirState(path string) (*logDirState, error) {
	s := &logDirState{path: path}
	clean, err := checkpoint.CleanShutdownExists(filepath.Join(path, checkpoint.CleanShutdownFile))
	if err != nil {
		return nil, err
	}
	s.clean = clean
	read := func(name string, dst *map[partlog.TopicPartition]int64, present *bool) error {
		p := filepath.Join(path, name)
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		*present = true
		m, err := checkpoint.ReadOffsets(p)
		if err != nil {
			if checkpoint.IsCorrupt(err) {
				s.warnings = append(s.warnings, fmt.Sprintf("%v; treated as missing (full recovery)", err))
				return nil
			}
			return err
		}
		*dst = m
		return nil
	}
	if err := read(checkpoint.RecoveryPointFile, &s.rps, &s.hasRP); err != nil {
		return nil, err
	}
	if err := read(checkpoint.LogStartOffsetFile, &s.starts, &s.hasStart); err != nil {
		return nil, err
	}
	if err := read(checkpoint.ReplicationOffsetFile, &s.hws, &s.hasHW); err != nil {
		return nil, err
	}
	return s, nil
}

// partitionTarget is one partition directory to work on.
type partitionTarget struct {
	// dir is the partition directory as the user named it (joined with
	// the log directory for directories found inside one).
	dir string
	// name is the partition directory's base name.
	name string
	// tp is the partition the name denotes; ok is false for a directory
	// whose name is not "<topic>-<n>" (no checkpoint entry applies).
	tp   partlog.TopicPartition
	tpOK bool
	// logDir is the state of the enclosing log directory.
	logDir *logDirState
}

// recoveryOptions returns the recovery options the log directory's files
// give for this partition: RecoveryPoint -1 (full recovery) and
// LogStartOffset 0 when the checkpoints have no entry for it.
func (t *partitionTarget) recoveryOptions(indexInterval int64) recovery.Options {
	o := recovery.Options{
		Clean:         t.logDir.clean,
		RecoveryPoint: -1,
		Segment:       segment.Config{IndexIntervalBytes: indexInterval},
		// The tools read every producer snapshot, so that a corrupt one
		// is found even when no replay needs it.
		CheckSnapshots: true,
	}
	if t.tpOK {
		if rp, ok := t.logDir.rps[t.tp]; ok {
			o.RecoveryPoint = rp
		}
		if ls, ok := t.logDir.starts[t.tp]; ok {
			o.LogStartOffset = ls
		}
	}
	return o
}

// resolver turns DIR arguments into partition directories, reading each
// log directory's files once.
type resolver struct {
	logDirs map[string]*logDirState
}

func newResolver() *resolver { return &resolver{logDirs: map[string]*logDirState{}} }

func (r *resolver) logDir(path string) (*logDirState, error) {
	key, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if s, ok := r.logDirs[key]; ok {
		return s, nil
	}
	s, err := readLogDirState(path)
	if err != nil {
		return nil, err
	}
	r.logDirs[key] = s
	return s, nil
}

// isLogDirFile reports whether name is a file Kafka keeps at the top of a
// log directory.
func isLogDirFile(name string) bool {
	switch name {
	case ".lock", checkpoint.CleanShutdownFile, checkpoint.RecoveryPointFile, checkpoint.LogStartOffsetFile,
		checkpoint.ReplicationOffsetFile, "meta.properties", checkpoint.CleanerOffsetFile:
		return true
	}
	return false
}

// resolve returns the partition directories arg names: arg itself when it
// is a partition directory (its parent is its log directory), or every
// "<topic>-<n>" subdirectory of a log directory, sorted by name. Kafka's
// -delete/-future/-stray directories do not parse as partitions and are
// skipped. A log directory without partitions gives none.
func (r *resolver) resolve(arg string) ([]partitionTarget, error) {
	fi, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", arg)
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(arg)
	if err != nil {
		return nil, err
	}
	var parts []string
	segmentFiles, logDirFiles := false, false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			if _, ok := partlog.ParsePartitionDir(name); ok {
				parts = append(parts, name)
			}
			continue
		}
		if _, err := filenames.Parse(name); err == nil {
			segmentFiles = true
		}
		logDirFiles = logDirFiles || isLogDirFile(name)
	}
	base := filepath.Base(abs)
	tp, tpOK := partlog.ParsePartitionDir(base)
	if len(parts) == 0 && (tpOK || segmentFiles) {
		ld, err := r.logDir(filepath.Dir(abs))
		if err != nil {
			return nil, err
		}
		return []partitionTarget{{dir: filepath.Clean(arg), name: base, tp: tp, tpOK: tpOK, logDir: ld}}, nil
	}
	if len(parts) == 0 && !logDirFiles {
		return nil, fmt.Errorf("%s: neither a partition directory (<topic>-<n>) nor a log directory holding any", arg)
	}
	ld, err := r.logDir(arg)
	if err != nil {
		return nil, err
	}
	sort.Strings(parts)
	out := make([]partitionTarget, 0, len(parts))
	for _, name := range parts {
		tp, _ := partlog.ParsePartitionDir(name)
		out = append(out, partitionTarget{dir: filepath.Join(arg, name), name: name, tp: tp, tpOK: true, logDir: ld})
	}
	return out, nil
}

// resolveAll resolves every argument. Arguments that fail are reported on
// stderr and give exitOperational in code; a log directory with no
// partitions is reported as a note. Malformed checkpoints are reported
// once per log directory and give exitProblems.
func resolveAll(args []string, stderr io.Writer) (targets []partitionTarget, code int) {
	r := newResolver()
	warned := map[*logDirState]bool{}
	for _, arg := range args {
		ts, err := r.resolve(arg)
		if err != nil {
			fmt.Fprintln(stderr, errLine(arg, err))
			code |= exitOperational
			continue
		}
		if len(ts) == 0 {
			fmt.Fprintf(stderr, "partlog: %s: log directory holds no partition directory\n", arg)
		}
		for _, t := range ts {
			if !warned[t.logDir] {
				warned[t.logDir] = true
				for _, w := range t.logDir.warnings {
					fmt.Fprintf(stderr, "partlog: warning: %s\n", w)
					code |= exitProblems
				}
			}
		}
		targets = append(targets, ts...)
	}
	return targets, code
}

// logDirLockHolder reports whether another process holds a record lock
// of the log directory's .lock file, and who, without creating or
// changing anything (F_GETLK on a read-only descriptor). A missing .lock
// means no holder. A broker's POSIX lock names its process; partlog's
// open-file-description lock (partlog serve, a program embedding
// partlog) names none: the kernel reports pid -1.
func logDirLockHolder(logDir string) (held bool, who string) {
	f, err := os.Open(filepath.Join(logDir, ".lock"))
	if err != nil {
		return false, ""
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return false, ""
	}
	if lk.Type == unix.F_UNLCK {
		return false, ""
	}
	if lk.Pid <= 0 {
		return true, "a running partlog (partlog serve, or a program embedding partlog: an open-file-description lock, whose process the kernel does not name)"
	}
	return true, fmt.Sprintf("process %d (a running broker?)", lk.Pid)
}

// partitionLock is what recover --apply holds while it changes a
// partition: the log directory's .lock (as a broker takes it) and an
// flock on the partition directory (as partlog.Open takes it).
type partitionLock struct {
	logDir *os.File
	dir    *os.File
}

// errPartitionBusy is returned by lockPartition when another process (or,
// for the partition directory's flock, another open Log) holds a lock.
var errPartitionBusy = errors.New("in use")

// lockPartition takes both locks without waiting. It fails with an error
// wrapping errPartitionBusy when one is held elsewhere.
func lockPartition(t *partitionTarget) (*partitionLock, error) {
	lf, err := partlog.LockLogDir(t.logDir.path)
	if err != nil {
		if errors.Is(err, partlog.ErrDirLocked) {
			return nil, fmt.Errorf("%w: log directory %s is locked by another process (a running broker?)", errPartitionBusy, t.logDir.path)
		}
		return nil, err
	}
	df, err := os.Open(t.dir)
	if err != nil {
		_ = lf.Close()
		return nil, err
	}
	if err := unix.Flock(int(df.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = df.Close()
		_ = lf.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: partition directory %s is open in another partlog process", errPartitionBusy, t.dir)
		}
		return nil, fmt.Errorf("lock %s: %w", t.dir, err)
	}
	return &partitionLock{logDir: lf, dir: df}, nil
}

// release drops both locks.
func (l *partitionLock) release() error {
	return errors.Join(l.releaseDir(), l.logDir.Close())
}

// releaseDir drops the partition directory's flock only (before a
// partlog.Open of it, which takes its own); release then drops the rest.
func (l *partitionLock) releaseDir() error {
	if l.dir == nil {
		return nil
	}
	err := unix.Flock(int(l.dir.Fd()), unix.LOCK_UN)
	err = errors.Join(err, l.dir.Close())
	l.dir = nil
	return err
}

// dirCommand is the options of a command over partition or log
// directories (verify, recover, info, compact): flags, their check, the
// run over the DIR arguments.
type dirCommand interface {
	addFlags(cmd *cobra.Command)
	validate() error
	run(dirs []string, stdout, stderr io.Writer) error
}

// newDirCommand makes the cobra command of o: at least one DIR, the
// flags validated before the run.
func newDirCommand(o dirCommand, use, short, long string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(args, stdout, stderr)
		},
	}
	o.addFlags(cmd)
	return cmd
}
