package dump

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Text prints files as kafka-dump-log does: its lines on stdout, what
// partlog finds beyond them on stderr (see the package documentation), and
// the reports kafka-dump-log prints after all files (Finish).
type Text struct {
	w       *bufio.Writer
	stderr  io.Writer
	o       *Options
	trailer trailer
}

// NewText returns a renderer writing to stdout and stderr.
func NewText(stdout, stderr io.Writer, o *Options) *Text {
	return &Text{w: bufio.NewWriter(stdout), stderr: stderr, o: o}
}

// Flush writes out the buffered stdout lines; a caller writing to stderr
// between files flushes first, so the two streams keep their order.
func (t *Text) Flush() error { return t.w.Flush() }

// File reads the file at path and prints it (batches as they are read).
// failed says it holds damage (File.Failed); err is an operational
// failure, ErrUnknownKind for a file it does not read, or the *Exception
// on which Kafka's tool dies: the text stops there, and the caller prints
// its Line and dumps no further file.
func (t *Text) File(path string) (failed bool, err error) {
	fmt.Fprintf(t.w, "Dumping %s\n", path)
	if _, ok := kinds[filepath.Ext(path)]; !ok {
		return false, ErrUnknownKind
	}
	shown := 0 // problems already reported
	header := false
	dead := false // Kafka's tool has died on a record
	each := func(f *File, b *Batch) {
		if dead {
			return
		}
		t.header(f, &header, &shown)
		if dead = !t.batch(b); dead {
			return
		}
		t.problems(f, &shown)
	}
	f, err := Read(path, t.o, each)
	if err != nil {
		return false, err
	}
	if f.Exception != nil {
		return true, f.Exception
	}
	switch f.Kind {
	case "log", "kraftSnapshot":
		t.header(f, &header, &shown)
		if b := f.InvalidBytes; b != nil {
			fmt.Fprintf(t.w, "Found %d invalid bytes at the end of %s\n", b.Count, filepath.Base(path))
			if b.Zero {
				// Kafka's line, as kafka-dump-log prints it, but not a
				// problem: the unwritten, preallocated tail of an active
				// segment.
				t.w.Flush()
				fmt.Fprintf(t.stderr, "partlog: %s: the %d bytes after position %d are zeros: the unwritten tail of an active segment, not damage\n",
					path, b.Count, b.Position)
			}
		}
		t.trailer.nonConsecutive.add(absPath(path), f.Pairs.NonConsecutive...)
	case "index":
		switch {
		case f.Empty:
			fmt.Fprintf(t.w, "%s is empty.\n", path)
		case f.SanityCheck != nil:
			if f.SanityCheck.Passed {
				fmt.Fprintf(t.w, "%s passed sanity check.\n", path)
			}
		default:
			entries, _ := f.Entries.([]OffsetEntry)
			for _, e := range entries {
				fmt.Fprintf(t.w, "offset: %d position: %d\n", e.Offset, e.Position)
			}
		}
		t.trailer.indexMismatches.add(absPath(path), f.Pairs.IndexMismatch...)
	case "timeindex":
		if f.SanityCheck != nil {
			if f.SanityCheck.Passed {
				fmt.Fprintf(t.w, "%s passed sanity check.\n", path)
			}
		} else {
			entries, _ := f.Entries.([]TimeEntry)
			for _, e := range entries {
				fmt.Fprintf(t.w, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
			}
		}
		abs := absPath(path)
		t.trailer.timeMismatches.add(abs, f.Pairs.TimeMismatch...)
		t.trailer.timeOutOfOrder.add(abs, f.Pairs.TimeOrder...)
		t.trailer.timeNotFound.add(abs, f.Pairs.TimeNotFound...)
	case "txnindex":
		entries, _ := f.Entries.([]TxnEntry)
		for _, e := range entries {
			fmt.Fprintf(t.w, "version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
				e.Version, e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
		}
	case "snapshot":
		t.producers(f)
	}
	t.problems(f, &shown)
	return f.Failed(), nil
}

// Finish flushes stdout and prints kafka-dump-log's trailer on stderr.
func (t *Text) Finish() error {
	err := t.w.Flush()
	t.trailer.print(t.stderr)
	return err
}

// header prints the line a .log or KRaft snapshot starts with, once,
// before its first batch.
func (t *Text) header(f *File, done *bool, shown *int) {
	if *done {
		return
	}
	*done = true
	switch {
	case f.Kind == "log":
		base := int64(0)
		if f.BaseOffset != nil {
			base = *f.BaseOffset
		}
		fmt.Fprintf(t.w, "Log starting offset: %d\n", base)
	case f.Bootstrap:
		fmt.Fprintln(t.w, "KRaft bootstrap snapshot")
	case f.SnapshotEndOffset != nil:
		fmt.Fprintf(t.w, "Snapshot end offset: %d, epoch: %d\n", *f.SnapshotEndOffset, *f.SnapshotEpoch)
	default:
		// A name that is not a KRaft snapshot's: its problem, now.
		t.problems(f, shown)
	}
}

// batch prints one entry of a .log: its line, then its records when deep.
// It returns false where Kafka's tool dies on a record its decoder cannot
// read: that record's line is printed up to there, without its line break.
func (t *Text) batch(b *Batch) bool {
	if b.V2Header == nil {
		return t.legacy(b)
	}
	horizon := "OptionalLong.empty"
	if h := b.DeleteHorizonMs; h != nil {
		horizon = "OptionalLong[" + strconv.FormatInt(*h, 10) + "]"
	}
	fmt.Fprintf(t.w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		b.BaseOffset, b.LastOffset, b.RecordsCount, b.BaseSequence, b.LastSequence,
		b.ProducerID, b.ProducerEpoch, b.PartitionLeaderEpoch, b.IsTransactional, b.IsControl,
		horizon, b.Position, b.TimestampType, b.MaxTimestamp, b.Size, b.Magic, b.Compression, b.CRC, b.CRCValid)
	for i := range b.Records {
		r := &b.Records[i]
		var line strings.Builder
		if !t.o.SkipRecordMetadata {
			fmt.Fprintf(&line, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]",
				r.Offset, b.TimestampType, r.Timestamp, r.KeySize, r.ValueSize, *r.Sequence, strings.Join(r.HeaderKeys, ","))
			if r.Control != nil {
				line.WriteString(t.controlSuffix(r.Control))
			}
		}
		if t.o.PrintData && !b.IsControl && !t.writeKeyValue(&line, r) {
			t.w.WriteString(line.String())
			return false
		}
		t.w.WriteString(line.String())
		t.w.WriteByte('\n')
	}
	return true
}

// controlSuffix renders a control record as Apache Kafka 4.4's dump tool
// does, which knows types 0-6 and prints any other as
// "controlType: UNKNOWN(<type>)": a mirroring barrier (type 7) too,
// unless MirrorFormat asks for the mirroring fork's spelling.
func (t *Text) controlSuffix(c *Control) string {
	switch {
	case c.Type < 0:
		return " controlType: INVALID"
	case c.Error != "":
		return fmt.Sprintf(" controlType: %s(%d) (invalid value: %s)", c.TypeName, c.Type, c.Error)
	case c.CoordinatorEpoch != nil:
		return fmt.Sprintf(" endTxnMarker: %s coordinatorEpoch: %d", c.TypeName, *c.CoordinatorEpoch)
	case c.MirrorPidReset != nil:
		if !t.o.MirrorFormat {
			return " controlType: UNKNOWN(7)"
		}
		return " MirrorPidReset " + c.MirrorPidReset.JSON()
	case c.JSON != nil && c.TypeName == "LEADER_CHANGE":
		return " LeaderChange: " + string(c.JSON)
	case c.JSON != nil:
		return " " + kraftControlNames[c.TypeName] + " " + string(c.JSON)
	}
	return fmt.Sprintf(" controlType: UNKNOWN(%d)", c.Type)
}

// kraftControlNames are the names the text gives the KRaft control values.
var kraftControlNames = map[string]string{
	"SNAPSHOT_HEADER": "SnapshotHeader",
	"SNAPSHOT_FOOTER": "SnapshotFooter",
	"KRAFT_VERSION":   "KRaftVersion",
	"KRAFT_VOTERS":    "KRaftVoters",
}

// legacy prints a magic 0/1 entry, with its message(s) when deep; false
// as batch.
func (t *Text) legacy(b *Batch) bool {
	fmt.Fprintf(t.w, "offset: %d position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		b.LastOffset, b.Position, b.TimestampType, b.Timestamp, b.Size, b.Magic, b.Compression, b.CRC, b.CRCValid)
	for i := range b.Records {
		r := &b.Records[i]
		if !t.o.SkipRecordMetadata {
			fmt.Fprintf(t.w, "| offset: %d %s: %d keySize: %d valueSize: %d isValid: %t crc: %d}",
				r.Offset, b.TimestampType, r.Timestamp, r.KeySize, r.ValueSize, *r.CRCValid, *r.CRC)
		}
		if t.o.PrintData {
			var line strings.Builder
			ok := t.writeKeyValue(&line, r)
			t.w.WriteString(line.String())
			if !ok {
				return false
			}
		}
		t.w.WriteByte('\n')
	}
	return true
}

// writeKeyValue appends " key: K payload: V" as kafka-dump-log prints a
// record's data (after "| " instead of the metadata when
// SkipRecordMetadata), through the chosen decoder or StringDecoder. It
// returns false for a record the decoder failed on (Kafka's tool dies).
func (t *Text) writeKeyValue(line *strings.Builder, r *Record) bool {
	if r.DecodeFailed {
		return false
	}
	k, v := r.DecodedKey, r.DecodedValue
	if t.o.Decoder == nil {
		// StringDecoder never fails.
		k, v, _ = stringDecoder.Decode(r.Offset, r.key, r.value)
	}
	prefix := " "
	if t.o.SkipRecordMetadata {
		prefix = "| "
	}
	if k != nil {
		line.WriteString(prefix)
		line.WriteString("key: ")
		line.WriteString(*k)
		prefix = " "
	}
	if v != nil {
		line.WriteString(prefix)
		line.WriteString("payload: ")
		line.WriteString(*v)
	}
	return true
}

// producers prints a .snapshot file, one line per producer in file
// order; the batch metadata part only for a producer that has a batch
// (Kafka 4.4 joins the parts with a space, so a line without one has no
// trailing space).
func (t *Text) producers(f *File) {
	for _, p := range f.Producers {
		fmt.Fprintf(t.w, "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d",
			p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, optionalLong(p.CurrentTxnFirstOffset), p.Timestamp)
		if p.FirstSequence != nil {
			fmt.Fprintf(t.w, " firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d",
				*p.FirstSequence, p.LastSequence, p.LastOffset, p.OffsetDelta, p.Timestamp)
		}
		t.w.WriteByte('\n')
	}
}

// shownOnStdout are the problem kinds the text shows in kafka-dump-log's
// own lines or trailer rather than as "partlog:" lines.
var shownOnStdout = map[string]bool{
	"crc":                   true, // isvalid: false
	"invalidBytes":          true, // Found N invalid bytes
	"nonConsecutiveOffsets": true,
	"indexMismatch":         true,
	"timestampMismatch":     true,
	"timestampOrder":        true,
	"offsetNotFound":        true,
}

// problems reports on stderr the problems of f found since the last call
// (*shown of them were reported before).
func (t *Text) problems(f *File, shown *int) {
	if *shown >= len(f.Problems) {
		return
	}
	t.w.Flush()
	path := f.File
	for _, p := range f.Problems[*shown:] {
		switch {
		case shownOnStdout[p.Kind]:
		case p.Kind == "records" && strings.HasPrefix(p.Detail, "invalid wrapper: "):
			// A legacy wrapper that cannot be opened: a line of the dump.
			t.w.WriteString("| " + p.Detail + "\n")
			t.w.Flush()
		case p.Kind == "records":
			fmt.Fprintf(t.stderr, "partlog: %s: batch at position %d: %s\n", path, p.Position, p.Detail)
		case p.Kind == "framing" || p.Kind == "control":
			fmt.Fprintf(t.stderr, "partlog: %s: position %d: %s\n", path, p.Position, p.Detail)
		case p.Kind == "sanity":
			fmt.Fprintf(t.stderr, "partlog: %s failed sanity check: %v\n", path, f.SanityErr)
		case p.Kind == "corrupt":
			fmt.Fprintln(t.stderr, f.SnapshotError)
		case p.Position >= 0:
			fmt.Fprintf(t.stderr, "partlog: %s: byte %d: %s\n", path, p.Position, p.Detail)
		default:
			fmt.Fprintf(t.stderr, "partlog: %s: %s\n", path, p.Detail)
		}
	}
	*shown = len(f.Problems)
}

// trailer collects the reports kafka-dump-log prints on stderr after the
// last file, each keyed by the file's absolute path (a file given twice
// adds to its report).
type trailer struct {
	indexMismatches trailerReport // "Mismatches in :<abs path>"
	timeMismatches  trailerReport // "Found timestamp mismatch in :<abs path>"
	timeOutOfOrder  trailerReport // "Found out of order timestamp in :<abs path>"
	timeNotFound    trailerReport // "The following indexed offsets are not found in :<abs path>"
	nonConsecutive  trailerReport // "Non-consecutive offsets in <abs path>"
}

// trailerReport is one of the trailer's reports: (a, b) pairs per file.
type trailerReport struct {
	calls []string // the file of every pair, in the order reported
	pairs map[string][][2]int64
}

func (r *trailerReport) add(abs string, pairs ...[2]int64) {
	if len(pairs) == 0 {
		return
	}
	if r.pairs == nil {
		r.pairs = make(map[string][][2]int64)
	}
	for range pairs {
		r.calls = append(r.calls, abs)
	}
	r.pairs[abs] = append(r.pairs[abs], pairs...)
}

// pairOrder says how Kafka keeps a file's pairs: in a list (as
// reported), or in a map from the first number, ascending or descending,
// where a later pair replaces an earlier one with the same first number.
type pairOrder int

const (
	asReported pairOrder = iota
	byFirstAscending
	byFirstDescending
)

// print writes the report: files in the order of Kafka's HashMap of
// them, each with its head line and its pairs.
func (r *trailerReport) print(w io.Writer, order pairOrder, head func(abs string) string, line func(p [2]int64) string) {
	for _, abs := range javaComputeIfAbsentOrder(r.calls) {
		fmt.Fprintln(w, head(abs))
		for _, p := range orderPairs(r.pairs[abs], order) {
			fmt.Fprintln(w, line(p))
		}
	}
}

// orderPairs applies order to pairs (see pairOrder).
func orderPairs(pairs [][2]int64, order pairOrder) [][2]int64 {
	if order == asReported {
		return pairs
	}
	last := make(map[int64]int64, len(pairs))
	keys := make([]int64, 0, len(pairs))
	for _, p := range pairs {
		if _, ok := last[p[0]]; !ok {
			keys = append(keys, p[0])
		}
		last[p[0]] = p[1]
	}
	sort.Slice(keys, func(i, j int) bool {
		if order == byFirstDescending {
			return keys[i] > keys[j]
		}
		return keys[i] < keys[j]
	})
	out := make([][2]int64, len(keys))
	for i, k := range keys {
		out[i] = [2]int64{k, last[k]}
	}
	return out
}

// print writes the trailer to w in kafka-dump-log's format and order.
func (t *trailer) print(w io.Writer) {
	t.indexMismatches.print(w, byFirstDescending,
		func(abs string) string { return "Mismatches in :" + abs },
		func(p [2]int64) string { return fmt.Sprintf("  Index offset: %d, log offset: %d", p[0], p[1]) })
	t.timeMismatches.print(w, asReported,
		func(abs string) string { return "Found timestamp mismatch in :" + abs },
		func(p [2]int64) string { return fmt.Sprintf("  Index timestamp: %d, log timestamp: %d", p[0], p[1]) })
	t.timeOutOfOrder.print(w, asReported,
		func(abs string) string { return "Found out of order timestamp in :" + abs },
		func(p [2]int64) string {
			return fmt.Sprintf("  Index timestamp: %d, Previously indexed timestamp: %d", p[0], p[1])
		})
	t.timeNotFound.print(w, asReported,
		func(abs string) string { return "The following indexed offsets are not found in :" + abs },
		func(p [2]int64) string { return fmt.Sprintf("Indexed offset: %d, found log offset: %d", p[0], p[1]) })
	t.nonConsecutive.print(w, byFirstAscending,
		func(abs string) string { return "Non-consecutive offsets in " + abs },
		func(p [2]int64) string { return fmt.Sprintf("  %d is followed by %d", p[0], p[1]) })
}

// absPath is the path kafka-dump-log prints in its reports.
func absPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	return abs
}
