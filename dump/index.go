package dump

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
)

// This file reads the three index files of a segment as kafka-dump-log
// does (formats.md §7.3, §7.4, §7.6), checking offset and time index
// entries against the segment's .log file.

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
		log:   filepath.Join(dir, stem+filenames.Log),
		index: filepath.Join(dir, stem+filenames.Index),
	}, nil
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
	it := v.Records(data)
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		maxTS = max(maxTS, r.Timestamp)
	}
	return maxTS, it.Err()
}

// readIndexFile reads an index file whole; entries are decoded from the
// bytes, so nothing is mapped writable and the file is never touched.
func readIndexFile(path string) ([]byte, error) { return os.ReadFile(path) }

// partialEntryProblem reports bytes after the last whole entry, which Kafka
// ignores and partlog reports.
func partialEntryProblem(n, entrySize int) (Problem, bool) {
	if n%entrySize == 0 {
		return Problem{}, false
	}
	return Problem{Position: int64(n / entrySize * entrySize), Kind: "partialEntry",
		Detail: fmt.Sprintf("%d bytes after the last whole %d-byte entry", n%entrySize, entrySize)}, true
}

// readOffsetIndex reads an .index file and checks each entry against
// the .log file, as kafka-dump-log does (formats.md §7.3).
func readOffsetIndex(path string, o *Options, f *File) error {
	seg, log, err := openSegment(path)
	if err != nil {
		return err
	}
	defer log.Close()
	b, err := readIndexFile(path)
	if err != nil {
		return err
	}
	n := len(b) / index.OffsetEntrySize
	if n == 0 {
		f.Empty = true
		if !o.VerifyIndexOnly {
			f.Entries = []OffsetEntry{}
		}
		if p, ok := partialEntryProblem(len(b), index.OffsetEntrySize); ok {
			f.Problems = append(f.Problems, p)
		}
		return nil
	}
	if o.IndexSanityCheck {
		if !o.StrictSanity {
			f.sanity(kafkaOffsetIndexSanity(absPath(path), b, seg.base))
			return nil
		}
		return f.sanityOf(index.OpenOffsetIndex(path, seg.base, true))
	}
	decoded, _ := index.DecodeOffsetIndex(b, seg.base)
	entries := []OffsetEntry{}
	for i, e := range decoded {
		// Zero slots left by a lost trim read as (base, 0): stop at the first.
		if i > 0 && e.Offset == seg.base {
			break
		}
		if !o.Offsets.contains(e.Offset) {
			continue
		}
		filePos := int64(i * index.OffsetEntrySize)
		hdr, _, err := log.header(int64(e.Position))
		if err != nil {
			f.problem(filePos, "unreadableEntry", "entry for offset %d points at position %d of %s: %v",
				e.Offset, e.Position, filepath.Base(seg.log), err)
		} else if last := entryLastOffset(hdr); last != e.Offset {
			f.Pairs.IndexMismatch = append(f.Pairs.IndexMismatch, [2]int64{e.Offset, last})
			f.problem(filePos, "indexMismatch", "index offset %d, log offset %d", e.Offset, last)
		}
		entries = append(entries, OffsetEntry{Offset: e.Offset, Position: e.Position})
	}
	if !o.VerifyIndexOnly {
		f.Entries = entries
	}
	if p, ok := partialEntryProblem(len(b), index.OffsetEntrySize); ok {
		f.Problems = append(f.Problems, p)
	}
	return nil
}

// readTimeIndex reads a .timeindex file and checks each entry against
// the .log file, looking batches up through the .index file, as
// kafka-dump-log does (formats.md §7.4).
func readTimeIndex(path string, o *Options, f *File) error {
	seg, log, err := openSegment(path)
	if err != nil {
		return err
	}
	defer log.Close()
	// Kafka's tool opens the .index with Kafka's index class, which
	// creates an empty file when there is none; partlog writes nothing
	// and reads a missing .index as empty, which prints the same.
	ib, err := os.ReadFile(seg.index)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	offsetEntries, _ := index.DecodeOffsetIndex(ib, seg.base)
	b, err := readIndexFile(path)
	if err != nil {
		return err
	}
	if o.IndexSanityCheck {
		if !o.StrictSanity {
			f.sanity(kafkaTimeIndexSanity(absPath(path), b, seg.base))
			return nil
		}
		return f.sanityOf(index.OpenTimeIndex(path, seg.base, true))
	}
	decoded, _ := index.DecodeTimeIndex(b, seg.base)
	entries := []TimeEntry{}
	prevTS := int64(-1)
	for i, e := range decoded {
		if i > 0 && e.Offset == seg.base {
			break
		}
		if !o.Offsets.contains(e.Offset) {
			continue
		}
		filePos := int64(i * index.TimeEntrySize)
		last, entry, err := findBatch(log, lookupPosition(offsetEntries, e.Offset), e.Offset)
		switch {
		case err != nil:
			f.Pairs.TimeNotFound = append(f.Pairs.TimeNotFound, [2]int64{e.Offset, -1})
			f.problem(filePos, "unreadableLog", "looking for offset %d in %s: %v", e.Offset, filepath.Base(seg.log), err)
		case last != e.Offset && !insideBatch(entry, e.Offset):
			f.Pairs.TimeNotFound = append(f.Pairs.TimeNotFound, [2]int64{e.Offset, last})
			f.problem(filePos, "offsetNotFound", "indexed offset %d, found log offset %d", e.Offset, last)
		default:
			if last != e.Offset {
				// Kafka 3.6 and 3.7 indexed the offset of the record
				// with the largest timestamp, inside the batch
				// (KAFKA-16310): valid. Kafka's tool lists it in its
				// trailer all the same.
				f.Pairs.TimeNotFound = append(f.Pairs.TimeNotFound, [2]int64{e.Offset, last})
			}
			logTS, err := maxRecordTimestamp(entry, o.MaxMessageSize)
			if err != nil {
				f.problem(filePos, "unreadableLog", "reading the records of the batch holding offset %d: %v", e.Offset, err)
				break
			}
			// Kafka's tool compares only entries at a batch's last
			// offset; an entry inside a batch is checked all the same,
			// without a trailer line.
			inside := last != e.Offset
			if logTS != e.Timestamp {
				if !inside {
					f.Pairs.TimeMismatch = append(f.Pairs.TimeMismatch, [2]int64{e.Timestamp, logTS})
				}
				f.problem(filePos, "timestampMismatch", "index timestamp %d, log timestamp %d", e.Timestamp, logTS)
			}
			if prevTS >= e.Timestamp {
				if !inside {
					f.Pairs.TimeOrder = append(f.Pairs.TimeOrder, [2]int64{e.Timestamp, prevTS})
				}
				f.problem(filePos, "timestampOrder", "index timestamp %d, previously indexed timestamp %d", e.Timestamp, prevTS)
			}
		}
		entries = append(entries, TimeEntry{Timestamp: e.Timestamp, Offset: e.Offset})
		prevTS = e.Timestamp
	}
	if !o.VerifyIndexOnly {
		f.Entries = entries
	}
	if p, ok := partialEntryProblem(len(b), index.TimeEntrySize); ok {
		f.Problems = append(f.Problems, p)
	}
	return nil
}

// openSegment returns the files of the segment whose index is at path,
// with its .log opened.
func openSegment(path string) (segmentFiles, *segmentLog, error) {
	seg, err := siblingsOf(path)
	if err != nil {
		return seg, nil, err
	}
	log, err := openSegmentLog(seg.log)
	var pe *fs.PathError
	if errors.Is(err, fs.ErrNotExist) && errors.As(err, &pe) {
		// Kafka's tool dies with java.nio.file.NoSuchFileException
		// naming the file.
		return seg, nil, &Exception{Class: "java.nio.file.NoSuchFileException", Message: pe.Path, Unreadable: true}
	}
	if err != nil {
		return seg, nil, fmt.Errorf("the segment's .log file must exist: %w", err)
	}
	return seg, log, nil
}

// sanityOf runs --index-sanity-check on an index opened (or not) by the
// caller, and closes it.
func (f *File) sanityOf(x interface {
	Sanity() error
	Close() error
}, err error) error {
	if err != nil {
		return err
	}
	f.sanity(x.Sanity())
	return x.Close()
}

// sanity records the result of --index-sanity-check: a failure is also a
// "sanity" problem, at the position the error names; Kafka's check fails
// with the exception that ends Kafka's tool (File.Exception).
func (f *File) sanity(err error) {
	f.SanityCheck = &Sanity{Passed: err == nil}
	if err == nil {
		return
	}
	f.SanityErr = err
	var ex *Exception
	if errors.As(err, &ex) {
		f.Exception = ex
	}
	pos := int64(-1)
	var ce *index.CorruptionError
	if errors.As(err, &ce) {
		pos = ce.Pos
	}
	f.Problems = append(f.Problems, Problem{Position: pos, Kind: "sanity", Detail: err.Error()})
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
			return &Exception{Class: corruptIndex, Message: fmt.Sprintf(
				"Corrupt index found, index file %s has non-zero size but the last offset is %d which is less than the base offset %d",
				abs, last[0].Offset, base)}
		}
	}
	if len(b)%index.OffsetEntrySize != 0 {
		return &Exception{Class: corruptIndex, Message: fmt.Sprintf(
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
			return &Exception{Class: corruptIndex, Message: fmt.Sprintf(
				"Corrupt time index found, time index file (%s) has non-zero size but the last timestamp is %d which is less than the first timestamp %d",
				abs, last.Timestamp, first.Timestamp)}
		}
		if last.Offset < base {
			return &Exception{Class: corruptIndex, Message: fmt.Sprintf(
				"Corrupt time index found, time index file (%s) has non-zero size but the last offset is %d which is less than the first offset %d",
				abs, last.Offset, base)}
		}
	}
	if len(b)%index.TimeEntrySize != 0 {
		return &Exception{Class: corruptIndex, Message: fmt.Sprintf(
			"Time index file %s is corrupt, found %d bytes which is neither positive nor a multiple of %d", abs, len(b), index.TimeEntrySize)}
	}
	return nil
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

// readTxnIndex decodes a .txnindex file. Entries before a bad one are
// kept; the bad entry or a partial trailing entry is a problem.
func readTxnIndex(path string, o *Options, f *File) error {
	b, err := readIndexFile(path)
	if err != nil {
		return err
	}
	all, derr := index.DecodeTxnIndex(b)
	if derr != nil {
		var ce *index.CorruptionError
		pos := int64(-1)
		detail := derr.Error()
		if errors.As(derr, &ce) {
			pos, detail = ce.Pos, ce.Reason
		}
		f.Problems = append(f.Problems, Problem{Position: pos, Kind: "corruptEntry", Detail: detail})
	}
	entries := []TxnEntry{}
	for _, e := range all {
		if o.Offsets.overlaps(e.FirstOffset, e.LastOffset) {
			entries = append(entries, TxnEntry{Version: e.Version, ProducerID: e.ProducerID, FirstOffset: e.FirstOffset,
				LastOffset: e.LastOffset, LastStableOffset: e.LastStableOffset})
		}
	}
	f.Entries = entries
	return nil
}
