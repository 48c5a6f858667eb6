package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
)

// This file dumps the three index files of a segment as kafka-dump-log
// does (formats.md §7.3, §7.4, §7.6), checks offset and time index entries
// against the segment's .log file, and holds the --offsets filter shared by
// every file kind.
//
// Output policy: stdout carries exactly kafka-dump-log's lines; anything
// partlog finds beyond them goes to stderr as "partlog: <path>: …" lines, and
// the exit code says whether problems (4) or operational errors (8) occurred.

// offsetRange is the value of --offsets FROM:TO: an inclusive range of
// offsets. Either bound may be left out ("100:", ":200"); an unset range
// matches everything.
type offsetRange struct {
	from, to int64
	set      bool
}

// Set parses FROM:TO. It implements pflag.Value.
func (r *offsetRange) Set(s string) error {
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("offset range %q is not FROM:TO", s)
	}
	from, to := int64(0), int64(1<<63-1)
	var err error
	if lo != "" {
		if from, err = strconv.ParseInt(lo, 10, 64); err != nil {
			return fmt.Errorf("offset range %q: bad FROM: %w", s, err)
		}
	}
	if hi != "" {
		if to, err = strconv.ParseInt(hi, 10, 64); err != nil {
			return fmt.Errorf("offset range %q: bad TO: %w", s, err)
		}
	}
	if from < 0 || to < from {
		return fmt.Errorf("offset range %q: need 0 <= FROM <= TO", s)
	}
	r.from, r.to, r.set = from, to, true
	return nil
}

// String implements pflag.Value.
func (r *offsetRange) String() string {
	if !r.set {
		return ""
	}
	return strconv.FormatInt(r.from, 10) + ":" + strconv.FormatInt(r.to, 10)
}

// Type implements pflag.Value.
func (r *offsetRange) Type() string { return "FROM:TO" }

// overlaps reports whether [first, last] shares an offset with the range.
func (r *offsetRange) overlaps(first, last int64) bool {
	return !r.set || (last >= r.from && first <= r.to)
}

// contains reports whether offset is in the range.
func (r *offsetRange) contains(offset int64) bool { return r.overlaps(offset, offset) }

// dumpProblem is one finding about a dumped file that kafka-dump-log does
// not print on stdout. Kind is a short camel-case word (see ProblemJSON).
// It is also the element of the "problems" array of --json (ProblemJSON).
type dumpProblem struct {
	// Position is the byte position in the dumped file of the batch or
	// entry concerned, or -1 for the file as a whole.
	Position int64 `json:"position"`
	// Kind classifies the problem; the kinds are listed in dump_json.go.
	Kind string `json:"kind"`
	// Detail describes it in words.
	Detail string `json:"detail"`
}

// trailerKinds are the problem kinds that the text output reports in
// kafka-dump-log's end-of-run trailer rather than as "partlog:" lines.
var trailerKinds = map[string]bool{
	"indexMismatch":     true,
	"timestampMismatch": true,
	"timestampOrder":    true,
	"offsetNotFound":    true,
}

// dumpTrailer collects the reports kafka-dump-log prints on stderr after
// the last file, each keyed by the file's absolute path (a file given
// twice adds to its report).
type dumpTrailer struct {
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
func (t *dumpTrailer) print(w io.Writer) {
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

// segmentFiles names the files a dumped index belongs with. As in
// kafka-dump-log, the base offset is the text before the first '.' of the
// file name and the siblings live in the same directory.
type segmentFiles struct {
	base  int64
	log   string // sibling .log
	index string // sibling .index
}

func siblingsOf(path string) (segmentFiles, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return segmentFiles{}, err
	}
	stem, _, _ := strings.Cut(filepath.Base(abs), ".")
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil {
		return segmentFiles{}, fmt.Errorf("cannot take a base offset from the file name: %w", err)
	}
	dir := filepath.Dir(abs)
	return segmentFiles{
		base:  base,
		log:   filepath.Join(dir, stem+".log"),
		index: filepath.Join(dir, stem+".index"),
	}, nil
}

// missingSibling turns the failure to open an index's .log into what
// Kafka's tool does: it dies with java.nio.file.NoSuchFileException
// naming the file (exit 8: a file could not be read).
func missingSibling(err error) error {
	var pe *fs.PathError
	if errors.Is(err, fs.ErrNotExist) && errors.As(err, &pe) {
		return &kafkaException{class: "java.nio.file.NoSuchFileException", message: pe.Path, code: exitOperational}
	}
	return err
}

// segmentLog reads entries of a segment's .log file on demand, to check
// index entries against it. It never writes.
type segmentLog struct {
	f    *os.File
	size int64
	hdr  [batch.HeaderSize]byte
}

// errNoEntry says that no complete entry starts at a position: Kafka's file
// reader stops there (formats.md §1.4 steps 1 and 4).
var errNoEntry = errors.New("no complete batch at this position")

func openSegmentLog(path string) (*segmentLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &segmentLog{f: f, size: st.Size()}, nil
}

func (l *segmentLog) Close() error { return l.f.Close() }

// header reads the start of the entry at pos (its whole header, or less
// if the entry is shorter) and returns it with the entry's size, applying
// the framing rules of formats.md §1.4.
func (l *segmentLog) header(pos int64) (hdr []byte, size int64, err error) {
	if pos < 0 || pos+batch.OffMagic >= l.size {
		return nil, 0, errNoEntry
	}
	n := min(int64(batch.HeaderSize), l.size-pos)
	hdr = l.hdr[:n]
	if _, err := l.f.ReadAt(hdr, pos); err != nil {
		return nil, 0, err
	}
	length := int32(binary.BigEndian.Uint32(hdr[batch.OffBatchLength:]))
	if length < 14 {
		return nil, 0, fmt.Errorf("entry length %d is smaller than 14", length)
	}
	size = batch.LogOverhead + int64(length)
	if pos+size > l.size {
		return nil, 0, errNoEntry
	}
	if magic := int8(hdr[batch.OffMagic]); magic >= batch.MagicV2 && size < batch.HeaderSize {
		return nil, 0, fmt.Errorf("v2 batch of %d bytes is shorter than its header", size)
	}
	return hdr[:min(n, size)], size, nil
}

// entry reads the whole entry of size bytes at pos.
func (l *segmentLog) entry(pos, size int64) ([]byte, error) {
	b := make([]byte, size)
	if _, err := l.f.ReadAt(b, pos); err != nil {
		return nil, err
	}
	return b, nil
}

// entryLastOffset returns the last offset of the entry whose header is hdr:
// the offset field for magic 0/1, baseOffset+lastOffsetDelta for v2.
func entryLastOffset(hdr []byte) int64 {
	if int8(hdr[batch.OffMagic]) < batch.MagicV2 {
		return int64(binary.BigEndian.Uint64(hdr))
	}
	return batch.View(hdr).LastOffset()
}

// maxRecordTimestamp returns the largest record timestamp of a whole
// entry, -1 if it has no records (what Kafka compares time index entries
// with).
func maxRecordTimestamp(entry []byte, limit int) (int64, error) {
	maxTS := int64(-1)
	if int8(entry[batch.OffMagic]) < batch.MagicV2 {
		m, err := batch.ParseLegacy(entry)
		if err != nil {
			return 0, err
		}
		if m.Compression() == batch.CompressionNone {
			return max(maxTS, m.Timestamp()), nil
		}
		inner, err := m.AppendInner(nil, limit)
		if err != nil {
			return 0, err
		}
		for _, in := range inner {
			maxTS = max(maxTS, in.Timestamp)
		}
		return maxTS, nil
	}
	v := batch.View(entry)
	if v.RecordsCount() == 0 {
		return maxTS, nil
	}
	data, err := v.RecordData(nil, limit)
	if err != nil {
		return 0, err
	}
	it := batch.NewRecordIterator(v, data)
	var r batch.Record
	for it.Next(&r) {
		maxTS = max(maxTS, r.Timestamp)
	}
	return maxTS, it.Err()
}

// indexDump is what reading one .index or .timeindex file against its
// segment found. The text and JSON outputs are both rendered from it.
type indexDump struct {
	empty      bool  // offset index with no entry: "<path> is empty."
	sanityRan  bool  // --index-sanity-check: only the check ran
	sanityErr  error // its result
	offsets    []index.OffsetEntry
	times      []index.TimeEntry
	mismatches [][2]int64    // offset index: (index offset, log offset), in file order
	tsMismatch [][2]int64    // time index: (index timestamp, log timestamp)
	tsOrder    [][2]int64    // time index: (index timestamp, previous timestamp)
	tsNotFound [][2]int64    // time index: (indexed offset, found log offset or -1)
	problems   []dumpProblem // everything found, in index order, including the pairs above
}

// failed reports whether the dump found anything that makes the exit code 4.
func (d *indexDump) failed() bool { return len(d.problems) > 0 || d.sanityErr != nil }

func (d *indexDump) add(pos int64, kind, format string, args ...any) {
	d.problems = append(d.problems, dumpProblem{Position: pos, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// readIndexFile reads an index file whole; entries are decoded from the
// bytes, so nothing is mapped writable and the file is never touched.
func readIndexFile(path string) ([]byte, error) { return os.ReadFile(path) }

// partialEntryProblem reports bytes after the last whole entry, which Kafka
// ignores and partlog reports.
func partialEntryProblem(n, entrySize int) (dumpProblem, bool) {
	if n%entrySize == 0 {
		return dumpProblem{}, false
	}
	return dumpProblem{Position: int64(n / entrySize * entrySize), Kind: "partialEntry",
		Detail: fmt.Sprintf("%d bytes after the last whole %d-byte entry", n%entrySize, entrySize)}, true
}

// inspectOffsetIndex reads an .index file and checks each entry against
// the .log file, as kafka-dump-log does (formats.md §7.3).
func (o *dumpOptions) inspectOffsetIndex(path string) (*indexDump, error) {
	seg, err := siblingsOf(path)
	if err != nil {
		return nil, err
	}
	log, err := openSegmentLog(seg.log)
	if err != nil {
		return nil, missingSibling(err)
	}
	defer log.Close()
	b, err := readIndexFile(path)
	if err != nil {
		return nil, err
	}
	d := &indexDump{}
	n := len(b) / index.OffsetEntrySize
	if n == 0 {
		d.empty = true
		if p, ok := partialEntryProblem(len(b), index.OffsetEntrySize); ok {
			d.problems = append(d.problems, p)
		}
		return d, nil
	}
	if o.indexSanityCheck {
		d.sanityRan = true
		if !o.strictSanity {
			d.sanityErr = kafkaOffsetIndexSanity(absPath(path), b, seg.base)
			return d, nil
		}
		x, err := index.OpenOffsetIndex(path, seg.base, true)
		if err != nil {
			return nil, err
		}
		d.sanityErr = x.Sanity()
		x.Close()
		return d, nil
	}
	entries, _ := index.DecodeOffsetIndex(b, seg.base)
	for i, e := range entries {
		// Zero slots left by a lost trim read as (base, 0): stop at the first.
		if i > 0 && e.Offset == seg.base {
			break
		}
		if !o.offsets.contains(e.Offset) {
			continue
		}
		filePos := int64(i * index.OffsetEntrySize)
		hdr, _, err := log.header(int64(e.Position))
		if err != nil {
			d.add(filePos, "unreadableEntry", "entry for offset %d points at position %d of %s: %v",
				e.Offset, e.Position, filepath.Base(seg.log), err)
		} else if last := entryLastOffset(hdr); last != e.Offset {
			d.mismatches = append(d.mismatches, [2]int64{e.Offset, last})
			d.add(filePos, "indexMismatch", "index offset %d, log offset %d", e.Offset, last)
		}
		d.offsets = append(d.offsets, e)
	}
	if p, ok := partialEntryProblem(len(b), index.OffsetEntrySize); ok {
		d.problems = append(d.problems, p)
	}
	return d, nil
}

// inspectTimeIndex reads a .timeindex file and checks each entry against
// the .log file, looking batches up through the .index file, as
// kafka-dump-log does (formats.md §7.4).
func (o *dumpOptions) inspectTimeIndex(path string) (*indexDump, error) {
	seg, err := siblingsOf(path)
	if err != nil {
		return nil, err
	}
	log, err := openSegmentLog(seg.log)
	if err != nil {
		return nil, missingSibling(err)
	}
	defer log.Close()
	// Kafka's tool opens the .index with Kafka's index class, which
	// creates an empty file when there is none; partlog writes nothing
	// and reads a missing .index as empty, which prints the same.
	ib, err := os.ReadFile(seg.index)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	offsetEntries, _ := index.DecodeOffsetIndex(ib, seg.base)
	b, err := readIndexFile(path)
	if err != nil {
		return nil, err
	}
	d := &indexDump{}
	if o.indexSanityCheck {
		d.sanityRan = true
		if !o.strictSanity {
			d.sanityErr = kafkaTimeIndexSanity(absPath(path), b, seg.base)
			return d, nil
		}
		x, err := index.OpenTimeIndex(path, seg.base, true)
		if err != nil {
			return nil, err
		}
		d.sanityErr = x.Sanity()
		x.Close()
		return d, nil
	}
	entries, _ := index.DecodeTimeIndex(b, seg.base)
	prevTS := int64(-1)
	for i, e := range entries {
		if i > 0 && e.Offset == seg.base {
			break
		}
		if !o.offsets.contains(e.Offset) {
			continue
		}
		filePos := int64(i * index.TimeEntrySize)
		last, entry, err := findBatch(log, lookupPosition(offsetEntries, e.Offset), e.Offset)
		switch {
		case err != nil:
			d.tsNotFound = append(d.tsNotFound, [2]int64{e.Offset, -1})
			d.add(filePos, "unreadableLog", "looking for offset %d in %s: %v", e.Offset, filepath.Base(seg.log), err)
		case last != e.Offset && !insideBatch(entry, e.Offset):
			d.tsNotFound = append(d.tsNotFound, [2]int64{e.Offset, last})
			d.add(filePos, "offsetNotFound", "indexed offset %d, found log offset %d", e.Offset, last)
		default:
			if last != e.Offset {
				// Kafka 3.6 and 3.7 indexed the offset of the record
				// with the largest timestamp, inside the batch
				// (KAFKA-16310): valid. Kafka's tool lists it in its
				// trailer all the same.
				d.tsNotFound = append(d.tsNotFound, [2]int64{e.Offset, last})
			}
			logTS, err := maxRecordTimestamp(entry, o.maxMessageSize)
			if err != nil {
				d.add(filePos, "unreadableLog", "reading the records of the batch holding offset %d: %v", e.Offset, err)
				break
			}
			// Kafka's tool compares only entries at a batch's last
			// offset; an entry inside a batch is checked all the same,
			// without a trailer line.
			inside := last != e.Offset
			if logTS != e.Timestamp {
				if !inside {
					d.tsMismatch = append(d.tsMismatch, [2]int64{e.Timestamp, logTS})
				}
				d.add(filePos, "timestampMismatch", "index timestamp %d, log timestamp %d", e.Timestamp, logTS)
			}
			if prevTS >= e.Timestamp {
				if !inside {
					d.tsOrder = append(d.tsOrder, [2]int64{e.Timestamp, prevTS})
				}
				d.add(filePos, "timestampOrder", "index timestamp %d, previously indexed timestamp %d", e.Timestamp, prevTS)
			}
		}
		d.times = append(d.times, e)
		prevTS = e.Timestamp
	}
	if p, ok := partialEntryProblem(len(b), index.TimeEntrySize); ok {
		d.problems = append(d.problems, p)
	}
	return d, nil
}

// insideBatch reports whether offset lies inside the magic-2 batch entry
// (from its base offset to its last offset).
func insideBatch(entry []byte, offset int64) bool {
	if len(entry) < batch.HeaderSize || entry[batch.OffMagic] != batch.MagicV2 {
		return false
	}
	v := batch.View(entry)
	return v.BaseOffset() <= offset && offset <= v.LastOffset()
}

// lookupPosition returns the position of the last offset index entry whose
// offset is ≤ target, or 0 when there is none (Kafka's OffsetIndex.lookup).
func lookupPosition(entries []index.OffsetEntry, target int64) int64 {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Offset > target })
	if i == 0 {
		return 0
	}
	return int64(entries[i-1].Position)
}

// findBatch scans the .log from pos for the first entry whose last offset
// is ≥ target and returns that last offset with the whole entry. It returns
// last == -1 and a nil error when the log ends first.
func findBatch(log *segmentLog, pos, target int64) (last int64, entry []byte, err error) {
	for {
		hdr, size, err := log.header(pos)
		if errors.Is(err, errNoEntry) {
			return -1, nil, nil
		}
		if err != nil {
			return -1, nil, fmt.Errorf("position %d: %w", pos, err)
		}
		if last := entryLastOffset(hdr); last >= target {
			entry, err := log.entry(pos, size)
			return last, entry, err
		}
		pos += size
	}
}

// dumpOffsetIndex prints an .index file (formats.md §7.3).
func (o *dumpOptions) dumpOffsetIndex(w *bufio.Writer, stderr io.Writer, path string) (bool, error) {
	d, err := o.inspectOffsetIndex(path)
	if err != nil {
		return false, err
	}
	switch {
	case d.empty:
		fmt.Fprintf(w, "%s is empty.\n", path)
	case d.sanityRan:
		if err := o.printSanity(w, stderr, path, d.sanityErr); err != nil {
			return true, err
		}
	case !o.verifyIndexOnly:
		for _, e := range d.offsets {
			fmt.Fprintf(w, "offset: %d position: %d\n", e.Offset, e.Position)
		}
	}
	o.trailer.indexMismatches.add(absPath(path), d.mismatches...)
	printProblems(w, stderr, path, d.problems)
	return d.failed(), nil
}

// dumpTimeIndex prints a .timeindex file (formats.md §7.4).
func (o *dumpOptions) dumpTimeIndex(w *bufio.Writer, stderr io.Writer, path string) (bool, error) {
	d, err := o.inspectTimeIndex(path)
	if err != nil {
		return false, err
	}
	switch {
	case d.sanityRan:
		if err := o.printSanity(w, stderr, path, d.sanityErr); err != nil {
			return true, err
		}
	case !o.verifyIndexOnly:
		for _, e := range d.times {
			fmt.Fprintf(w, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
		}
	}
	abs := absPath(path)
	o.trailer.timeMismatches.add(abs, d.tsMismatch...)
	o.trailer.timeOutOfOrder.add(abs, d.tsOrder...)
	o.trailer.timeNotFound.add(abs, d.tsNotFound...)
	printProblems(w, stderr, path, d.problems)
	return d.failed(), nil
}

// printSanity prints the result of --index-sanity-check: the pass line on
// stdout, or the failure: Kafka's check fails with the exception that
// ends Kafka's tool (returned, see kafkaException), partlog's stricter
// one (--strict-sanity-check) on stderr.
func (o *dumpOptions) printSanity(w *bufio.Writer, stderr io.Writer, path string, err error) error {
	if err == nil {
		fmt.Fprintf(w, "%s passed sanity check.\n", path)
		return nil
	}
	var ke *kafkaException
	if errors.As(err, &ke) {
		return ke
	}
	w.Flush()
	fmt.Fprintf(stderr, "partlog: %s failed sanity check: %v\n", path, err)
	return nil
}

// corruptIndex is the exception Kafka's index sanity checks throw.
const corruptIndex = "org.apache.kafka.storage.internals.log.CorruptIndexException"

// kafkaOffsetIndexSanity is Kafka's OffsetIndex.sanityCheck on an .index
// file's bytes: the last entry's offset is not below the base offset,
// and the length is a multiple of 8. It ignores what partlog's own check
// (index.OffsetIndex.Sanity) finds besides: trailing zero entries, an
// unordered or out-of-range entry.
func kafkaOffsetIndexSanity(abs string, b []byte, base int64) error {
	if n := len(b) / index.OffsetEntrySize; n > 0 {
		last, _ := index.DecodeOffsetIndex(b[(n-1)*index.OffsetEntrySize:n*index.OffsetEntrySize], base)
		if last[0].Offset < base {
			return &kafkaException{class: corruptIndex, message: fmt.Sprintf(
				"Corrupt index found, index file %s has non-zero size but the last offset is %d which is less than the base offset %d",
				abs, last[0].Offset, base)}
		}
	}
	if len(b)%index.OffsetEntrySize != 0 {
		return &kafkaException{class: corruptIndex, message: fmt.Sprintf(
			"Index file %s is corrupt, found %d bytes which is neither positive nor a multiple of %d", abs, len(b), index.OffsetEntrySize)}
	}
	return nil
}

// kafkaTimeIndexSanity is Kafka's TimeIndex.sanityCheck on a .timeindex
// file's bytes: the last timestamp is not below the first, the last
// offset not below the base, and the length a multiple of 12. A time
// index whose trim was lost (zeros after its entries) fails it.
func kafkaTimeIndexSanity(abs string, b []byte, base int64) error {
	if n := len(b) / index.TimeEntrySize; n > 0 {
		firsts, _ := index.DecodeTimeIndex(b[:index.TimeEntrySize], base)
		lasts, _ := index.DecodeTimeIndex(b[(n-1)*index.TimeEntrySize:n*index.TimeEntrySize], base)
		first, last := firsts[0], lasts[0]
		if last.Timestamp < first.Timestamp {
			return &kafkaException{class: corruptIndex, message: fmt.Sprintf(
				"Corrupt time index found, time index file (%s) has non-zero size but the last timestamp is %d which is less than the first timestamp %d",
				abs, last.Timestamp, first.Timestamp)}
		}
		if last.Offset < base {
			return &kafkaException{class: corruptIndex, message: fmt.Sprintf(
				"Corrupt time index found, time index file (%s) has non-zero size but the last offset is %d which is less than the first offset %d",
				abs, last.Offset, base)}
		}
	}
	if len(b)%index.TimeEntrySize != 0 {
		return &kafkaException{class: corruptIndex, message: fmt.Sprintf(
			"Time index file %s is corrupt, found %d bytes which is neither positive nor a multiple of %d", abs, len(b), index.TimeEntrySize)}
	}
	return nil
}

// printProblems reports findings on stderr, after the file's stdout lines.
func printProblems(w *bufio.Writer, stderr io.Writer, path string, problems []dumpProblem) {
	if len(problems) == 0 {
		return
	}
	w.Flush()
	for _, p := range problems {
		if trailerKinds[p.Kind] {
			continue
		}
		if p.Position >= 0 {
			fmt.Fprintf(stderr, "partlog: %s: byte %d: %s\n", path, p.Position, p.Detail)
		} else {
			fmt.Fprintf(stderr, "partlog: %s: %s\n", path, p.Detail)
		}
	}
}

// inspectTxnIndex decodes a .txnindex file. Entries before a bad one are
// returned; the bad entry or a partial trailing entry is a problem.
func (o *dumpOptions) inspectTxnIndex(path string) ([]index.AbortedTxn, []dumpProblem, error) {
	b, err := readIndexFile(path)
	if err != nil {
		return nil, nil, err
	}
	all, derr := index.DecodeTxnIndex(b)
	var problems []dumpProblem
	if derr != nil {
		var ce *index.CorruptionError
		pos := int64(-1)
		detail := derr.Error()
		if errors.As(derr, &ce) {
			pos, detail = ce.FilePos, ce.Reason
		}
		problems = append(problems, dumpProblem{Position: pos, Kind: "corruptEntry", Detail: detail})
	}
	out := all[:0]
	for _, e := range all {
		if o.offsets.overlaps(e.FirstOffset, e.LastOffset) {
			out = append(out, e)
		}
	}
	return out, problems, nil
}

// dumpTxnIndex prints a .txnindex file (formats.md §7.6).
func (o *dumpOptions) dumpTxnIndex(w *bufio.Writer, stderr io.Writer, path string) (bool, error) {
	entries, problems, err := o.inspectTxnIndex(path)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		fmt.Fprintf(w, "version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			e.Version, e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
	}
	printProblems(w, stderr, path, problems)
	return len(problems) > 0, nil
}

// absPath is the path kafka-dump-log prints in its reports.
func absPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	return abs
}
