package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/partlog/partlog/recovery"
	"github.com/spf13/cobra"
)

// reportSchemaVersion is the schemaVersion of the JSON objects of verify,
// recover and producers.
const reportSchemaVersion = 1

// verifyOptions are the flags of `partlog verify`.
type verifyOptions struct {
	json          bool
	full          bool
	indexInterval int64
}

func (o *verifyOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print one JSON object per partition directory (the recovery report, schemaVersion 1)")
	f.BoolVar(&o.full, "full", false, "validate every segment from byte 0, whatever the recovery point and the clean-shutdown marker say")
	addIndexIntervalFlag(cmd, &o.indexInterval)
}

// addIndexIntervalFlag adds --index-interval-bytes, which recovery needs
// to rebuild (or compare) offset indexes exactly as the log writes them.
func addIndexIntervalFlag(cmd *cobra.Command, v *int64) {
	cmd.Flags().Int64Var(v, "index-interval-bytes", 4096, "the partition's index.interval.bytes, used to compare and rebuild offset indexes (0: every batch but the first)")
}

func validateIndexInterval(v int64) error {
	if v < 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--index-interval-bytes must not be negative, got %d", v)}
	}
	return nil
}

func (o *verifyOptions) validate() error { return validateIndexInterval(o.indexInterval) }

func newVerifyCommand(stdout, stderr io.Writer) *cobra.Command {
	var o verifyOptions
	return newDirCommand(&o, "verify [--json] [--full] DIR...", "Say what recovery would do to partition directories, changing nothing", `verify runs recovery in dry-run mode on every partition directory and
reports what it finds. DIR is a partition directory (<topic>-<n>; its
parent is taken as its log directory) or a log directory (every
<topic>-<n> directory in it). The recovery point, log start offset and
clean-shutdown marker are read from the log directory when present.
Nothing is written: every file stays byte-identical.

The report separates problems (damage: the file, the byte position and
what is wrong; the cause of any cut is among them), changes (every file
recover --apply would write, rename or remove, and why: many are the
routine steps Kafka's own load takes, such as rebuilding a missing index
or writing a producer snapshot at the log end) and notes. Only segments
the broker would validate are read, unless --full. Over several
partitions (a log directory) a note they share is printed once, and the
output ends with one summary line: partitions ok, with problems, failed
(on stderr with --json).

`+recoveryReads+`

Exit status: 0 no problem (changes may be listed), 4 problems found,
8 operational error, 16 usage error; several directories OR their codes.`, stdout, stderr)
}

func (o *verifyOptions) run(dirs []string, stdout, stderr io.Writer) error {
	ps := newPrinter(stdout, stderr, o.json, "verify")
	warned := map[string]bool{}
	code := forEachPartition(dirs, stderr, "verify", func(t *partitionTarget) partitionResult {
		res := partitionResult{dryRun: true}
		if !warned[t.logDir.path] {
			warned[t.logDir.path] = true // once per log directory
			if held, who := logDirLockHolder(t.logDir.path); held {
				res.notes = append(res.notes, fmt.Sprintf("warning: log directory %s is locked by %s; files may change while they are read", t.logDir.path, who))
			}
		}
		opts := t.recoveryOptions(o.indexInterval)
		opts.DryRun = true
		opts.Full = o.full
		res.rep, res.err = recovery.Run(t.dir, opts)
		return res
	}, ps.print)
	ps.summary()
	return exitWith(code)
}

// partitionResult is the outcome of one partition directory.
type partitionResult struct {
	rep    *recovery.Report
	err    error
	dryRun bool
	// notes are printed on stderr before the report.
	notes []string
	// code is an exit code set by the command itself (a refusal).
	code int
	// refused says why the command did not process the directory.
	refused string
}

// exitCode maps a result to fsck's codes.
func (r *partitionResult) exitCode() int {
	code := r.code
	if r.err != nil {
		return code | exitOperational
	}
	if r.rep == nil {
		return code
	}
	if !r.dryRun && r.rep.Refused == "" && len(r.rep.Changes) > 0 && len(r.rep.Problems) > 0 {
		// Damage was repaired (fsck's "errors corrected"); the routine
		// steps of Kafka's own load alone (a snapshot at the log end, an
		// index of the recovery range rebuilt) are no repair: exit 0, as
		// verify's for the same directory.
		code |= exitRepaired
	}
	if r.rep.Status == recovery.StatusProblems {
		// Something found and left as it is: every problem of a dry
		// run, an ignored file, a refused cut.
		code |= exitProblems
	}
	return code
}

// forEachPartition resolves dirs, runs work on every partition directory
// with a progress bar on a terminal stderr, prints each result with show
// (the bar cleared meanwhile) and returns the OR of the exit codes.
func forEachPartition(dirs []string, stderr io.Writer, desc string,
	work func(t *partitionTarget) partitionResult, show func(t *partitionTarget, res *partitionResult)) int {
	targets, code := resolveAll(dirs, stderr)
	bar := newProgress(stderr, len(targets), desc)
	for i := range targets {
		t := &targets[i]
		res := work(t)
		bar.clear()
		show(t, &res)
		code |= res.exitCode()
		bar.tick()
	}
	bar.finish()
	return code
}

// reportJSON is the JSON form of a report: the recovery.Report's own
// fields plus the schema version.
type reportJSON struct {
	SchemaVersion int `json:"schemaVersion"`
	*recovery.Report
}

// errorJSON stands for a partition directory that could not be processed
// (status "error") or was refused (status "refused").
type errorJSON struct {
	SchemaVersion int    `json:"schemaVersion"`
	Dir           string `json:"dir"`
	Status        string `json:"status"`
	Error         string `json:"error"`
}

// jsonReport returns a copy of rep whose lists are empty rather than
// null.
func jsonReport(rep *recovery.Report) reportJSON {
	r := *rep
	r.Segments = nonNil(r.Segments)
	r.IndexesRebuilt = nonNil(r.IndexesRebuilt)
	r.Barriers = nonNil(r.Barriers)
	r.Problems = nonNil(r.Problems)
	r.Changes = nonNil(r.Changes)
	r.Notes = nonNil(r.Notes)
	r.RemovedFiles = nonNil(r.RemovedFiles)
	r.SnapshotsDiscarded = nonNil(r.SnapshotsDiscarded)
	r.Epochs = nonNil(r.Epochs)
	return reportJSON{SchemaVersion: reportSchemaVersion, Report: &r}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSONLine(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// printer prints the results of verify and recover: each partition's
// report, a report note already printed for an earlier partition only
// once (a log directory's partitions share most notes), and a summary
// line.
type printer struct {
	stdout, stderr io.Writer
	json           bool
	cmd            string
	seen           map[string]bool // report notes printed
	ok, problems   int
	failed         int
	total          int
}

func newPrinter(stdout, stderr io.Writer, asJSON bool, cmd string) *printer {
	return &printer{stdout: stdout, stderr: stderr, json: asJSON, cmd: cmd, seen: map[string]bool{}}
}

// print prints one partition's result: notes and errors on stderr, the
// report on stdout (text or one JSON object).
func (p *printer) print(t *partitionTarget, res *partitionResult) {
	p.total++
	for _, n := range res.notes {
		fmt.Fprintf(p.stderr, "partlog: %s: %s\n", t.dir, n)
	}
	switch {
	case res.err != nil:
		p.failed++
		fmt.Fprintln(p.stderr, errLine(t.dir, res.err))
		if p.json {
			writeJSONLine(p.stdout, errorJSON{SchemaVersion: reportSchemaVersion, Dir: t.dir, Status: "error", Error: res.err.Error()})
		}
		return
	case res.refused != "":
		p.problems++
		fmt.Fprintf(p.stderr, "partlog: %s: refused: %s\n", t.dir, res.refused)
		if p.json {
			writeJSONLine(p.stdout, errorJSON{SchemaVersion: reportSchemaVersion, Dir: t.dir, Status: "refused", Error: res.refused})
		}
		return
	case res.rep == nil:
		return
	}
	if res.rep.Status == recovery.StatusProblems {
		p.problems++
	} else {
		p.ok++
	}
	if p.json {
		writeJSONLine(p.stdout, jsonReport(res.rep))
		return
	}
	printReportText(p.stdout, res.rep, res.dryRun, p.seen)
}

// summary ends a run over several partitions with one line: how many
// are fine, have problems, could not be read.
func (p *printer) summary() {
	if p.total < 2 {
		return
	}
	w := p.stdout
	if p.json {
		w = p.stderr // stdout holds one JSON object per partition
	}
	fmt.Fprintf(w, "%s: %d partitions: %d ok, %d with problems, %d failed (a note is printed once, with the first partition it concerns)\n",
		p.cmd, p.total, p.ok, p.problems, p.failed)
}

// printReportText prints a short human summary of a report: the status,
// the cut, the problems, the changes and the notes.
func printReportText(w io.Writer, r *recovery.Report, dryRun bool, seen map[string]bool) {
	status := r.Status
	switch {
	case r.Refused != "":
		status = "problems (not repaired: " + r.Refused + "; --force cuts as Kafka would)"
		dryRun = true
	case dryRun && r.Status == recovery.StatusProblems:
		status = fmt.Sprintf("problems (%d found)", len(r.Problems))
	case dryRun && r.Status == recovery.StatusOK && len(r.Changes) > 0:
		status = fmt.Sprintf("ok (no problem; recover --apply would make %d routine changes)", len(r.Changes))
	case dryRun && r.Status == recovery.StatusOK:
		status = "ok (nothing to do)"
	case !dryRun && r.Status == recovery.StatusRepaired && len(r.Problems) == 0:
		status = fmt.Sprintf("ok (no problem; %d routine changes made)", len(r.Changes))
	case !dryRun && r.Status == recovery.StatusRepaired:
		status = fmt.Sprintf("repaired (%d problems)", len(r.Problems))
	}
	fmt.Fprintf(w, "%s: %s\n", r.Dir, status)
	would := func(done, planned string) string {
		if dryRun {
			return planned
		}
		return done
	}
	if t := r.Truncation; t != nil {
		fmt.Fprintf(w, "  cut: %s in segment %d at position %d, offset %d, %d bytes %s: %s\n",
			t.Class, t.SegmentBaseOffset, t.Position, t.Offset, t.BytesRemoved, would("removed", "to remove"), t.Reason)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  problem: %s %s: %s\n", p.Kind, problemPlace(p), p.Detail)
	}
	for _, c := range r.Changes {
		fmt.Fprintf(w, "  %s: %s\n", would("changed", "would change"), changeText(c))
	}
	for _, n := range r.Notes {
		if seen != nil {
			if seen[n.Detail] {
				continue // printed for an earlier partition
			}
			seen[n.Detail] = true
		}
		fmt.Fprintf(w, "  note: %s\n", n.Detail)
	}
	if r.Quarantine != nil {
		fmt.Fprintf(w, "  quarantine: %s\n", *r.Quarantine)
	}
	fmt.Fprintf(w, "  log: start %d, end %d, recovery point %d, %d segments, %d producers, last stable offset %d\n",
		r.LogStartOffset, r.LogEndOffset, r.RecoveryPoint, len(r.Segments), r.Producers, r.LastStableOffset)
}

// changeText renders one change: "<action> <file> [to <new>]: <reason>
// [(old bytes in the quarantine as <saved>)]".
func changeText(c recovery.Change) string {
	s := c.Action + " " + c.File
	if c.To != "" {
		s += " to " + c.To
	}
	s += ": " + c.Reason
	if c.Saved != "" {
		s += " (old bytes kept in the quarantine as " + c.Saved + ")"
	}
	return s
}

// problemPlace renders a problem's file and position ("-" for the
// directory itself).
func problemPlace(p recovery.Problem) string {
	f := p.File
	if f == "" {
		f = "-"
	}
	if p.Position >= 0 {
		return f + "@" + strconv.FormatInt(p.Position, 10)
	}
	return f
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ", ")
}

// recoveryReads is the "Reads:" paragraph of the help of the commands
// that run recovery (verify, info, recover).
const recoveryReads = `Reads: in each partition directory, the .log segments, .index,
.timeindex and .txnindex files, producer .snapshot files,
leader-epoch-checkpoint and partition.metadata, and the leftovers of
interrupted operations (.cleaned, .swap, .deleted); in its log directory,
recovery-point-offset-checkpoint, log-start-offset-checkpoint, the
clean-shutdown marker .kafka_cleanshutdown and the .lock of a running
broker. KRaft snapshots (.checkpoint) are left alone.`
