package dump

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
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
// failure, ErrUnknownKind for a file it does not read.
func (t *Text) File(path string) (failed bool, err error) {
	fmt.Fprintf(t.w, "Dumping %s\n", path)
	if _, ok := kinds[filepath.Ext(path)]; !ok {
		return false, ErrUnknownKind
	}
	shown := 0 // problems already reported
	header := false
	each := func(f *File, b *Batch) {
		t.header(f, &header, &shown)
		t.batch(b)
		t.problems(f, &shown)
	}
	f, err := Read(path, t.o, each)
	if err != nil {
		return false, err
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
		if len(f.Pairs.NonConsecutive) > 0 {
			t.trailer.nonConsecutive = append(t.trailer.nonConsecutive, fileOffsetPairs{absPath(path), reversed(f.Pairs.NonConsecutive)})
		}
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
		if len(f.Pairs.IndexMismatch) > 0 {
			t.trailer.indexMismatches = append(t.trailer.indexMismatches, fileOffsetPairs{absPath(path), reversed(f.Pairs.IndexMismatch)})
		}
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
		if p := f.Pairs.TimeMismatch; len(p) > 0 {
			t.trailer.timeMismatches = append(t.trailer.timeMismatches, fileOffsetPairs{abs, p})
		}
		if p := f.Pairs.TimeOrder; len(p) > 0 {
			t.trailer.timeOutOfOrder = append(t.trailer.timeOutOfOrder, fileOffsetPairs{abs, p})
		}
		if p := f.Pairs.TimeNotFound; len(p) > 0 {
			t.trailer.timeNotFound = append(t.trailer.timeNotFound, fileOffsetPairs{abs, p})
		}
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
func (t *Text) batch(b *Batch) {
	if b.V2Header == nil {
		t.legacy(b)
		return
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
		if t.o.PrintData && !b.IsControl {
			t.writeKeyValue(&line, r)
		}
		t.w.WriteString(line.String())
		t.w.WriteByte('\n')
	}
}

// controlSuffix renders a control record as the dump tool does (the
// mirroring fork's tool unless ReferenceFormat).
func (t *Text) controlSuffix(c *Control) string {
	switch {
	case c.Type < 0:
		return " controlType: INVALID"
	case c.Error != "":
		return fmt.Sprintf(" controlType: %s(%d) (invalid value: %s)", c.TypeName, c.Type, c.Error)
	case c.CoordinatorEpoch != nil:
		return fmt.Sprintf(" endTxnMarker: %s coordinatorEpoch: %d", c.TypeName, *c.CoordinatorEpoch)
	case c.MirrorPidReset != nil:
		if t.o.ReferenceFormat {
			return " controlType: UNKNOWN(7)"
		}
		return " MirrorPidReset " + c.MirrorPidReset.JSON()
	case c.JSON != nil && c.TypeName == "LEADER_CHANGE":
		if t.o.ReferenceFormat {
			return " controlType: LEADER_CHANGE(2)"
		}
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

// legacy prints a magic 0/1 entry, with its message(s) when deep.
func (t *Text) legacy(b *Batch) {
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
			t.writeKeyValue(&line, r)
			t.w.WriteString(line.String())
		}
		t.w.WriteByte('\n')
	}
}

// writeKeyValue appends " key: K payload: V" as kafka-dump-log prints a
// record's data (after "| " instead of the metadata when
// SkipRecordMetadata), through the chosen decoder or StringDecoder.
func (t *Text) writeKeyValue(line *strings.Builder, r *Record) {
	k, v := r.DecodedKey, r.DecodedValue
	if t.o.Decoder == nil {
		k, v = stringDecoder.Decode(r.Offset, r.key, r.value)
	}
	if k != nil {
		if t.o.SkipRecordMetadata {
			line.WriteString("| ")
		} else {
			line.WriteByte(' ')
		}
		line.WriteString("key: ")
		line.WriteString(*k)
	}
	if v != nil {
		line.WriteString(" payload: ")
		line.WriteString(*v)
	}
}

// producers prints a .snapshot file, one line per producer in file
// order. A producer without batch metadata gets a line that ends in
// "lastTimestamp: <ts> " with the trailing space, as Kafka prints it.
func (t *Text) producers(f *File) {
	for _, p := range f.Producers {
		fmt.Fprintf(t.w, "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d ",
			p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, optionalLong(p.CurrentTxnFirstOffset), p.Timestamp)
		if p.FirstSequence != nil {
			fmt.Fprintf(t.w, "firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d",
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

// trailer collects the reports kafka-dump-log prints on stderr after
// all files, in its order: offset index mismatches, time index errors,
// non-consecutive offsets of .log files. Files appear in command-line order.
type trailer struct {
	indexMismatches []fileOffsetPairs // "Mismatches in :<abs path>"
	timeMismatches  []fileOffsetPairs // "Found timestamp mismatch in :<abs path>"
	timeOutOfOrder  []fileOffsetPairs // "Found out of order timestamp in :<abs path>"
	timeNotFound    []fileOffsetPairs // "The following indexed offsets are not found in the log."
	nonConsecutive  []fileOffsetPairs // "Non-consecutive offsets in <abs path>"
}

// fileOffsetPairs is a list of (a, b) pairs reported for one file, in the
// order they are to be printed.
type fileOffsetPairs struct {
	abs   string
	pairs [][2]int64
}

// reversed returns pairs last first: Kafka's tool prepends to its lists.
func reversed(pairs [][2]int64) [][2]int64 {
	out := make([][2]int64, len(pairs))
	for i, p := range pairs {
		out[len(out)-1-i] = p
	}
	return out
}

// print writes the trailer to w in kafka-dump-log's format: for each
// report, its heading per file and one line per pair. Kafka's heading for
// indexed offsets not found names no file, hence its %.0s.
func (t *trailer) print(w io.Writer) {
	for _, r := range []struct {
		files         []fileOffsetPairs
		heading, pair string
	}{
		{t.indexMismatches, "Mismatches in :%s\n", "  Index offset: %d, log offset: %d\n"},
		{t.timeMismatches, "Found timestamp mismatch in :%s\n", "  Index timestamp: %d, log timestamp: %d\n"},
		{t.timeOutOfOrder, "Found out of order timestamp in :%s\n", "  Index timestamp: %d, Previously indexed timestamp: %d\n"},
		{t.timeNotFound, "The following indexed offsets are not found in the log.\n%.0s", "Indexed offset: %d, found log offset: %d\n"},
		{t.nonConsecutive, "Non-consecutive offsets in %s\n", "  %d is followed by %d\n"},
	} {
		for _, f := range r.files {
			fmt.Fprintf(w, r.heading, f.abs)
			for _, p := range f.pairs {
				fmt.Fprintf(w, r.pair, p[0], p[1])
			}
		}
	}
}

// absPath is the path kafka-dump-log prints in its reports.
func absPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	return abs
}
