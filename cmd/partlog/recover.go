package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/partlog/partlog/recovery"
	"github.com/spf13/cobra"
)

// quarantineDir is the default quarantine directory inside a partition
// directory; recovery (like Kafka's loader) skips subdirectories.
const quarantineDir = "partlog-quarantine"

// quarantineStamp is the layout of the default quarantine directory's
// name: UTC, basic ISO 8601 (20261129T113000Z).
const quarantineStamp = "20060102T150405Z"

// quarantines chooses the quarantine directory of each partition of one
// run of recover --apply or compact --apply: without --quarantine (flag),
// a directory named for the run's time inside the partition; with it and
// several partitions, one subdirectory per partition, so that files of
// the same name do not mix.
type quarantines struct {
	flag, stamp string
	several     bool
}

func newQuarantines(flag string, now time.Time, dirs []string) quarantines {
	q := quarantines{flag: flag, stamp: now.UTC().Format(quarantineStamp), several: len(dirs) > 1}
	if !q.several {
		if ts, err := newResolver().resolve(dirs[0]); err == nil && len(ts) > 1 {
			q.several = true
		}
	}
	return q
}

func (q quarantines) of(t *partitionTarget) string {
	switch {
	case q.flag == "":
		return filepath.Join(t.dir, quarantineDir, q.stamp)
	case q.several:
		return filepath.Join(q.flag, t.name)
	}
	return q.flag
}

// recoverOptions are the flags of `partlog recover`.
type recoverOptions struct {
	json          bool
	apply         bool
	force         bool
	full          bool
	quarantine    string
	indexInterval int64
	// now is the clock naming the default quarantine directory.
	now func() time.Time
}

func (o *recoverOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print one JSON object per partition directory (the recovery report, schemaVersion 1)")
	f.BoolVar(&o.apply, "apply", false, "repair the directories in place (without it, only say what would be done, as verify does)")
	f.BoolVar(&o.force, "force", false, "with --apply, also cut data below the recovery point (corrupt-flushed), as Kafka would; without it such a partition is left as it is")
	f.BoolVar(&o.full, "full", false, "validate every segment from byte 0, whatever the recovery point and the clean-shutdown marker say (as verify --full)")
	f.StringVar(&o.quarantine, "quarantine", "", "directory receiving every removed byte (default <partition dir>/"+quarantineDir+"/<UTC time>; with several partitions, one subdirectory per partition)")
	addIndexIntervalFlag(cmd, &o.indexInterval)
}

func (o *recoverOptions) validate() error {
	if o.quarantine != "" && !o.apply {
		return &exitError{code: exitUsage, err: errors.New("--quarantine needs --apply")}
	}
	if o.force && !o.apply {
		return &exitError{code: exitUsage, err: errors.New("--force needs --apply")}
	}
	return validateIndexInterval(o.indexInterval)
}

func newRecoverCommand(stdout, stderr io.Writer) *cobra.Command {
	o := recoverOptions{now: time.Now}
	return newDirCommand(&o, "recover [--json] [--full] [--apply [--force]] [--quarantine PATH] DIR...", "Repair partition directories as the broker's log recovery would", `recover runs log recovery on every partition directory. Without --apply
it only plans, exactly as verify. With --apply it repairs in place: torn or
corrupt tails are cut, indexes rebuilt, bad snapshots discarded, leftovers
of interrupted operations resolved. Nothing is destroyed: the old bytes of
every file written, renamed or removed are first placed in the quarantine
directory, and the report lists each change with its reason. A partition
whose log directory is locked by another process (a running broker) is
refused. Data below the recovery point (durable data: class
corrupt-flushed) is never cut without --force: such a partition is left as
it is and reported. The log directory's checkpoints and clean-shutdown
marker are read, never written. A second --apply changes nothing.

--full reads every segment, as verify --full does, so that what verify
--full says it would change is what recover --apply --full changes (the
damage it finds below the recovery point with --force only). Without it,
only the segments a broker's load would check are read.

`+recoveryReads+` With --apply it
writes only inside the partition directory and the quarantine.

Exit status: 0 no problem (with --apply, the routine changes of Kafka's
own load may have been made: a producer snapshot written at the log end,
an index of the recovery range rebuilt), 1 damage repaired (the report
names it), 4 problems (without --apply: found; with it: left as they
are, or refused), 8 operational error, 16 usage error; several
directories OR their codes.`, stdout, stderr)
}

func (o *recoverOptions) run(dirs []string, stdout, stderr io.Writer) error {
	if !o.apply {
		v := verifyOptions{json: o.json, indexInterval: o.indexInterval, full: o.full}
		return v.run(dirs, stdout, stderr)
	}
	ps := newPrinter(stdout, stderr, o.json, "recover")
	quarantines := newQuarantines(o.quarantine, o.now(), dirs)
	code := forEachPartition(dirs, stderr, "recover", func(t *partitionTarget) partitionResult {
		var res partitionResult
		lock, err := lockPartition(t)
		if err != nil {
			if errors.Is(err, errPartitionBusy) {
				res.refused = fmt.Sprintf("%v; not recovered", err)
				res.code = exitProblems
				return res
			}
			res.err = err
			return res
		}
		opts := t.recoveryOptions(o.indexInterval)
		opts.Quarantine = quarantines.of(t)
		opts.RefuseFlushedCut = !o.force
		opts.CutFlushed = o.force
		opts.Full = o.full
		res.rep, res.err = recovery.Run(t.dir, opts)
		if err := lock.release(); err != nil && res.err == nil {
			res.err = err
		}
		return res
	}, ps.print)
	ps.summary()
	return exitWith(code)
}
