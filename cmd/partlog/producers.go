package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/snapshot"
	"github.com/spf13/cobra"
)

// producersOptions are the flags of `partlog producers`.
type producersOptions struct {
	json  bool
	at    int64
	atSet bool
	// now is the clock of snapshot expiration (as a broker load uses it).
	now func() time.Time
}

func (o *producersOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print one JSON object (schemaVersion 1)")
	f.Int64Var(&o.at, "at", -1, "show the state at this offset (after the batches below it) instead of at the log end")
}

func (o *producersOptions) validate(cmd *cobra.Command) error {
	o.atSet = cmd.Flags().Changed("at")
	if o.atSet && o.at < 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--at must not be negative, got %d", o.at)}
	}
	return nil
}

func newProducersCommand(stdout, stderr io.Writer) *cobra.Command {
	o := producersOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "producers [--json] [--at OFFSET] DIR",
		Short: "Print the producer state of a partition directory",
		Long: `producers prints the producer state a broker would load from a partition
directory: the producer snapshot recovery would load (for --at OFFSET, the
newest valid one at or below both) plus a replay, with origin Replay, of
the batches after it up to the target (barriers included). The target is
the log end offset, or --at OFFSET: the state after every batch below it.
Only the data recovery would keep is read; nothing is written.

Reads: the files verify reads, of one partition directory.

Exit status: 0 printed (problems recovery would find are warned about on
stderr), 4 printed but some batch could not be applied, 8 operational
error, 16 usage error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(cmd); err != nil {
				return err
			}
			return o.run(args[0], stdout, stderr)
		},
	}
	o.addFlags(cmd)
	return cmd
}

// producerJSON is one producer entry of the JSON output.
type producerJSON struct {
	ProducerID    int64 `json:"producerId"`
	ProducerEpoch int16 `json:"producerEpoch"`
	LastSequence  int32 `json:"lastSequence"`
	LastOffset    int64 `json:"lastOffset"`
	// OffsetDelta is the last batch's (0 with none): with LastSequence
	// it gives the batch's first sequence, as a Kafka snapshot holds it.
	OffsetDelta      int32 `json:"offsetDelta"`
	CoordinatorEpoch int32 `json:"coordinatorEpoch"`
	// CurrentTxnFirstOffset is null when no transaction is open.
	CurrentTxnFirstOffset *int64 `json:"currentTxnFirstOffset"`
	LastTimestamp         int64  `json:"lastTimestamp"`
}

// producersJSON is the JSON output of `partlog producers`.
type producersJSON struct {
	SchemaVersion    int            `json:"schemaVersion"`
	Dir              string         `json:"dir"`
	LogEndOffset     int64          `json:"logEndOffset"`
	LastStableOffset int64          `json:"lastStableOffset"`
	Producers        []producerJSON `json:"producers"`
	Barriers         []int64        `json:"barriers"`
}

// producerState is the loaded state at a target offset.
type producerState struct {
	report   *recovery.Report
	target   int64
	snapshot int64 // offset of the snapshot loaded, -1 for none
	m        *producerstate.Manager
	// notes are things met while loading (corrupt snapshots, batches the
	// replay rejected, a replay stopped early).
	notes []string
	// rejected counts batches not applied and replays stopped early.
	rejected int
}

func (o *producersOptions) run(dir string, stdout, stderr io.Writer) error {
	targets, code := resolveAll([]string{dir}, stderr)
	if code&exitOperational != 0 {
		return &exitError{code: code}
	}
	if len(targets) != 1 || targets[0].dir != filepath.Clean(dir) {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s is a log directory; give one partition directory (<topic>-<n>)", dir)}
	}
	t := &targets[0]
	opts := t.recoveryOptions(-1)
	opts.DryRun = true
	opts.Now = o.now
	rep, err := recovery.Run(t.dir, opts)
	if err != nil {
		fmt.Fprintln(stderr, errLine(t.dir, err))
		return &exitError{code: code | exitOperational}
	}
	target := rep.LogEndOffset
	if o.atSet {
		if o.at < rep.LogStartOffset || o.at > rep.LogEndOffset {
			return &exitError{code: exitUsage, err: fmt.Errorf("--at %d is outside the log [%d, %d]", o.at, rep.LogStartOffset, rep.LogEndOffset)}
		}
		target = o.at
	}
	st, err := loadProducerState(t.dir, rep, target, o.now())
	if err != nil {
		fmt.Fprintln(stderr, errLine(t.dir, err))
		return &exitError{code: code | exitOperational}
	}
	for _, n := range st.notes {
		fmt.Fprintf(stderr, "partlog: %s: %s\n", t.dir, n)
	}
	if len(rep.Problems) > 0 {
		// The state loaded all the same: the one recovery would load.
		fmt.Fprintf(stderr, "partlog: %s: warning: recovery found problems (%s); the state shown is the one it would load\n", t.dir, rep.Summary())
	}
	if st.rejected > 0 {
		code |= exitProblems
	}
	if o.json {
		writeJSONLine(stdout, st.json(t.dir))
	} else {
		st.printText(stdout, t.dir)
	}
	return exitWith(code)
}

func (st *producerState) json(dir string) producersJSON {
	out := producersJSON{
		SchemaVersion:    reportSchemaVersion,
		Dir:              dir,
		LogEndOffset:     st.report.LogEndOffset,
		LastStableOffset: st.m.LastStableOffset(st.target),
		Producers:        []producerJSON{},
		Barriers:         nonNil(st.m.Barriers()),
	}
	for _, e := range st.m.Producers() {
		p := producerJSON{ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch, LastSequence: e.LastSequence,
			LastOffset: e.LastOffset, OffsetDelta: e.OffsetDelta, CoordinatorEpoch: e.CoordinatorEpoch, LastTimestamp: e.LastTimestamp}
		if e.CurrentTxnFirstOffset >= 0 {
			v := e.CurrentTxnFirstOffset
			p.CurrentTxnFirstOffset = &v
		}
		out.Producers = append(out.Producers, p)
	}
	return out
}

func (st *producerState) printText(w io.Writer, dir string) {
	from := "the log start"
	if st.snapshot >= 0 {
		from = fmt.Sprintf("snapshot %d", st.snapshot)
	}
	fmt.Fprintf(w, "%s: state at offset %d (log end offset %d, from %s), last stable offset %d, %d producers\n",
		dir, st.target, st.report.LogEndOffset, from, st.m.LastStableOffset(st.target), st.m.Len())
	for _, e := range st.m.Producers() {
		txn := "none"
		if e.CurrentTxnFirstOffset >= 0 {
			txn = fmt.Sprint(e.CurrentTxnFirstOffset)
		}
		fmt.Fprintf(w, "producerId: %d producerEpoch: %d lastSequence: %d lastOffset: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d\n",
			e.ProducerID, e.ProducerEpoch, e.LastSequence, e.LastOffset, e.CoordinatorEpoch, txn, e.LastTimestamp)
	}
	fmt.Fprintln(w, barriersText(st.m.Barriers()))
}

// barriersText says where the MIRROR_PID_RESET barriers are:
// "barriers: none" or "barriers at offsets: 6, 40".
func barriersText(offsets []int64) string {
	if len(offsets) == 0 {
		return "barriers: none"
	}
	return "barriers at offsets: " + joinInts(offsets)
}

// loadProducerState builds the producer state at target from the files of
// dir, read-only: the newest valid snapshot that recovery would keep
// (above the log start, not discarded) at or below both target and the
// snapshot recovery itself loads, then every
// batch from it up to target, replayed with origin Replay from the bytes
// recovery would keep (rep's segments and sizes).
func loadProducerState(dir string, rep *recovery.Report, target int64, now time.Time) (*producerState, error) {
	st := &producerState{report: rep, target: target, snapshot: -1,
		m: producerstate.New(producerstate.Config{})}
	nowMs := now.UnixMilli()
	discarded := map[int64]bool{}
	for _, off := range rep.SnapshotsDiscarded {
		discarded[off] = true
	}
	snaps, err := snapshot.List(dir)
	if err != nil {
		return nil, err
	}
	// Start where recovery starts its own replay (the snapshot it loads,
	// or the log start), so that the counts and barriers agree with
	// verify's; an earlier target starts from an older snapshot.
	limit := rep.LogStartOffset
	if rep.SnapshotsUsed != nil {
		limit = *rep.SnapshotsUsed
	}
	limit = min(limit, target)
	rb := &producerstate.Rebuild{LogStart: rep.LogStartOffset, End: target, NowMs: nowMs}
	for i := len(snaps) - 1; i >= 0; i-- {
		f := snaps[i]
		if f.Offset > limit || f.Offset <= rep.LogStartOffset || discarded[f.Offset] {
			continue
		}
		entries, err := snapshot.Read(f.Path)
		if err != nil {
			if !snapshot.IsCorrupt(err) {
				return nil, err
			}
			st.notes = append(st.notes, fmt.Sprintf("snapshot %d skipped: %v", f.Offset, err))
			continue
		}
		rb.Snapshot, rb.SnapshotOffset, rb.HasSnapshot = entries, f.Offset, true
		st.snapshot = f.Offset
		break
	}
	var name string // the segment being replayed
	rb.Rejected = func(v batch.View, err error) {
		if st.rejected < maxReplayNotes {
			st.notes = append(st.notes, fmt.Sprintf("%s: batch at offset %d not applied to producer state (skipped): %v", name, v.BaseOffset(), err))
		}
		st.rejected++
	}
	rb.Batches = func(from int64, yield func(batch.View, *batch.BatchHeader) bool) error {
		return readSegments(dir, rep.Segments, from, st, &name, yield)
	}
	if err := st.m.Rebuild(rb); err != nil {
		return nil, err
	}
	return st, nil
}

// maxReplayNotes bounds the rejected batches reported one by one.
const maxReplayNotes = 10

// readSegments passes the batches of the given segments (each read up to
// its SizeBytes, with buffered reads: the directory is not mapped) from
// the segment holding from on to yield, in order, until yield returns
// false. *name is the file being read. Bytes that are not a valid batch
// end the replay with a note.
func readSegments(dir string, segs []recovery.SegmentReport, from int64, st *producerState, name *string, yield func(batch.View, *batch.BatchHeader) bool) error {
	var buf []byte
	var h batch.BatchHeader
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].BaseOffset <= from {
			continue
		}
		if s.SizeBytes == 0 {
			continue
		}
		*name = filenames.Make(s.BaseOffset, filenames.Log)
		f, err := os.Open(filepath.Join(dir, *name))
		if err != nil {
			return err
		}
		r := bufio.NewReaderSize(io.LimitReader(f, s.SizeBytes), 1<<16)
		var pos int64
		more := true
		for pos < s.SizeBytes && more {
			var v batch.View
			v, buf, err = readBatch(r, buf, pos, s.SizeBytes, &h)
			if err != nil {
				if !isFormatError(err) {
					_ = f.Close()
					return fmt.Errorf("read %s: %w", *name, err)
				}
				st.notes = append(st.notes, fmt.Sprintf("%s: replay stopped at position %d: %v", *name, pos, err))
				st.rejected++
				break
			}
			pos += int64(len(v))
			more = yield(v, &h)
		}
		if err := f.Close(); err != nil {
			return err
		}
		if !more {
			break
		}
	}
	return nil
}

// errBadEntry marks bytes that are not a valid v2 batch.
var errBadEntry = errors.New("not a valid batch")

func isFormatError(err error) bool {
	var ce *batch.CorruptionError
	var te *batch.TornTailError
	return errors.Is(err, errBadEntry) || errors.As(err, &ce) || errors.As(err, &te)
}

// readBatch reads the entry at pos of a .log of size limit from r into
// buf and checks it (batch.Check rules). It never allocates more than the
// entry's length, which it first checks against the bytes left.
func readBatch(r *bufio.Reader, buf []byte, pos, limit int64, h *batch.BatchHeader) (batch.View, []byte, error) {
	var hdr [batch.LogOverhead]byte
	if limit-pos < batch.LogOverhead {
		return nil, buf, fmt.Errorf("%w: %d bytes left at position %d", errBadEntry, limit-pos, pos)
	}
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, buf, err
	}
	length := int64(batch.View(hdr[:]).BatchLength())
	size := length + batch.LogOverhead
	if length < 0 || size > limit-pos || size < batch.HeaderSize {
		return nil, buf, fmt.Errorf("%w: entry length %d at position %d (%d bytes left)", errBadEntry, length, pos, limit-pos)
	}
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	copy(buf, hdr[:])
	if _, err := io.ReadFull(r, buf[batch.LogOverhead:]); err != nil {
		return nil, buf, err
	}
	v, err := batch.CheckAt(buf, pos, h)
	if err != nil {
		return nil, buf, err
	}
	if len(v) != len(buf) {
		return nil, buf, errBadEntry
	}
	return v, buf, nil
}
