package dump

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
)

// Options say what Read reads and what the renderers print; they are
// kafka-dump-log's flags.
type Options struct {
	// Deep reads every record, not only the batch headers
	// (--deep-iteration); PrintData implies it and makes the text print
	// keys and values (--print-data-log).
	Deep, PrintData bool
	// SkipRecordMetadata leaves the record metadata out of the text
	// (--skip-record-metadata).
	SkipRecordMetadata bool
	// MaxBytes reads at most this many bytes of each .log file (-1: all;
	// --max-bytes).
	MaxBytes int64
	// MaxMessageSize is the largest decompressed batch decoded
	// (--max-message-size).
	MaxMessageSize int
	// MirrorFormat prints type-7 control records (mirroring barriers) as
	// the dump tool of Kafka's mirroring fork does, MirrorPidReset {json},
	// instead of Apache Kafka 4.4's controlType: UNKNOWN(7)
	// (--mirror-format).
	MirrorFormat bool
	// VerifyIndexOnly checks index entries without listing them;
	// IndexSanityCheck only runs the index sanity check: Kafka's, or
	// with StrictSanity partlog's stricter one (the one recovery
	// applies).
	VerifyIndexOnly, IndexSanityCheck, StrictSanity bool
	// Offsets keeps only the batches and index entries that overlap it.
	Offsets Range
	// Decoder, when a decoder flag chose one, decodes keys and values
	// (Record.DecodedKey, DecodedValue); nil: the text decodes them with
	// Kafka's default StringDecoder and JSON carries no decoded fields. A
	// record it fails on is a "decoder" problem and File.Exception.
	Decoder Decoder
}

func (o *Options) deep() bool { return o.Deep || o.PrintData }

// Range is an inclusive range of offsets, the value of --offsets
// FROM:TO. Either bound may be left out ("100:", ":200"); an unset range
// matches everything. It implements pflag.Value.
type Range struct {
	from, to int64
	set      bool
}

// Set parses FROM:TO.
func (r *Range) Set(s string) error {
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

// String formats the range as Set reads it.
func (r *Range) String() string {
	if !r.set {
		return ""
	}
	return strconv.FormatInt(r.from, 10) + ":" + strconv.FormatInt(r.to, 10)
}

// Type names the value's form in usage lines.
func (r *Range) Type() string { return "FROM:TO" }

// overlaps reports whether [first, last] shares an offset with the range.
func (r *Range) overlaps(first, last int64) bool {
	return !r.set || (last >= r.from && first <= r.to)
}

// contains reports whether offset is in the range.
func (r *Range) contains(offset int64) bool { return r.overlaps(offset, offset) }

// kinds maps a file name extension to its kind (File.Kind).
var kinds = map[string]string{
	filenames.Log:       "log",
	filenames.Index:     "index",
	filenames.TimeIndex: "timeindex",
	filenames.TxnIndex:  "txnindex",
	filenames.Snapshot:  "snapshot",
	".checkpoint":       "kraftSnapshot",
}

// ErrUnknownKind is returned by Read for a file whose name ends in no
// extension it reads.
var ErrUnknownKind = errors.New("partlog/dump: unknown file kind")

// Read reads the file at path, of the kind its extension says (log,
// index, timeindex, txnindex, snapshot, kraftSnapshot), into its model.
// Nothing is written.
//
// each, when set, is called with every batch of a .log or KRaft snapshot
// as it is read (with the problems found so far in f.Problems), and the
// batch is not kept in f.Batches: a renderer that prints as it goes holds
// one batch at a time. Otherwise f.Batches holds them all.
//
// err is an operational failure (the file or a sibling it needs could not
// be read); f is then still the file's model as far as it got, with its
// name, kind and base offset. A file of no known kind is ErrUnknownKind.
func Read(path string, o *Options, each func(f *File, b *Batch)) (*File, error) {
	kind, ok := kinds[filepath.Ext(path)]
	if !ok {
		return nil, ErrUnknownKind
	}
	f := &File{SchemaVersion: SchemaVersion, File: path, Kind: kind, Problems: []Problem{}}
	stem, _, _ := strings.Cut(filepath.Base(path), ".")
	if base, err := strconv.ParseInt(stem, 10, 64); err == nil {
		f.BaseOffset = &base
	}
	var err error
	switch kind {
	case "log":
		err = readLog(path, o, f, each)
	case "index":
		err = readOffsetIndex(path, o, f)
	case "timeindex":
		err = readTimeIndex(path, o, f)
	case "txnindex":
		err = readTxnIndex(path, o, f)
	case "snapshot":
		err = readSnapshot(path, f)
	case "kraftSnapshot":
		f.BaseOffset = nil
		err = readKRaftSnapshot(path, o, f, each)
	}
	return f, err
}

// Failed reports whether f holds damage: a problem other than
// non-consecutive offsets, or offsets that go backwards. Offsets that skip
// ahead are what compaction leaves in a healthy log (Kafka's tool lists
// them as a report, and so does the text's trailer).
func (f *File) Failed() bool {
	for _, p := range f.Problems {
		if p.Kind != "nonConsecutiveOffsets" {
			return true
		}
	}
	for _, p := range f.Pairs.NonConsecutive {
		if p[1] <= p[0] {
			return true
		}
	}
	return false
}

func (f *File) problem(pos int64, kind, format string, args ...any) {
	f.Problems = append(f.Problems, Problem{Position: pos, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// readLogPrefix reads a .log file, or only its first maxBytes bytes when
// maxBytes >= 0 (kafka-dump-log's --max-bytes: nothing past them is read).
func readLogPrefix(path string, maxBytes int64) ([]byte, error) {
	if maxBytes < 0 {
		return os.ReadFile(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxBytes))
}

// readLog reads a .log file (formats.md §1.4, §7.2): a CRC failure is a
// problem and the walk goes on; a framing failure ends it, and the rest of
// the file is the invalid tail.
func readLog(path string, o *Options, f *File, each func(*File, *Batch)) error {
	data, err := readLogPrefix(path, o.MaxBytes)
	if err != nil {
		return err
	}
	walkBatches(path, data, o, f, each)
	return nil
}

// KRaftSnapshotName is what a KRaft snapshot's file name says.
type KRaftSnapshotName struct {
	Bootstrap bool
	EndOffset int64
	Epoch     int32
}

// ParseKRaftSnapshotName parses "bootstrap.checkpoint" or
// "<20 digits>-<10 digits>.checkpoint" (Kafka's Snapshots naming).
func ParseKRaftSnapshotName(name string) (KRaftSnapshotName, bool) {
	if name == "bootstrap.checkpoint" {
		return KRaftSnapshotName{Bootstrap: true}, true
	}
	stem, ok := strings.CutSuffix(name, ".checkpoint")
	if !ok || len(stem) != 31 || stem[20] != '-' {
		return KRaftSnapshotName{}, false
	}
	for i := 0; i < len(stem); i++ {
		if i != 20 && (stem[i] < '0' || stem[i] > '9') {
			return KRaftSnapshotName{}, false
		}
	}
	off, err1 := strconv.ParseInt(stem[:20], 10, 64)
	ep, err2 := strconv.ParseInt(stem[21:], 10, 32)
	if err1 != nil || err2 != nil {
		return KRaftSnapshotName{}, false
	}
	return KRaftSnapshotName{EndOffset: off, Epoch: int32(ep)}, true
}

// readKRaftSnapshot reads a KRaft snapshot (<end offset>-<epoch>.checkpoint
// or bootstrap.checkpoint): its name, then its batches as readLog does. A
// name that is neither is a "name" problem.
func readKRaftSnapshot(path string, o *Options, f *File, each func(*File, *Batch)) error {
	data, err := readLogPrefix(path, o.MaxBytes)
	if err != nil {
		return err
	}
	id, ok := ParseKRaftSnapshotName(filepath.Base(path))
	switch {
	case ok && id.Bootstrap:
		f.Bootstrap = true
	case ok:
		f.SnapshotEndOffset, f.SnapshotEpoch = &id.EndOffset, &id.Epoch
	default:
		f.problem(-1, "name", "not a KRaft snapshot name (<20-digit end offset>-<10-digit epoch>.checkpoint or bootstrap.checkpoint)")
	}
	walkBatches(path, data, o, f, each)
	return nil
}

// logWalk is the state of one walk of a .log's (or KRaft snapshot's)
// entries.
type logWalk struct {
	o          *Options
	f          *File
	deep       bool
	keep       bool   // batches are kept: nothing may alias scratch
	scratch    []byte // decompression buffer, reused while streaming
	lastOffset int64
}

// walkBatches reads the entries of a .log or KRaft snapshot's bytes.
func walkBatches(path string, data []byte, o *Options, f *File, each func(*File, *Batch)) {
	// Kafka's tool starts the run of offsets at -1, so a file whose first
	// record is not offset 0 reports "-1 is followed by" it; with
	// --offsets (partlog's) the run starts at the first record read.
	lw := &logWalk{o: o, f: f, deep: o.deep(), keep: each == nil, lastOffset: -1}
	if o.Offsets.set {
		lw.lastOffset = noOffsetYet
	}
	emit := func(b Batch) {
		if each == nil {
			f.Batches = append(f.Batches, b)
		} else {
			each(f, &b)
		}
	}
	if each == nil {
		f.Batches = []Batch{}
	}
	pos := 0
	for pos < len(data) {
		size, err := batch.Frame(data[pos:])
		if err != nil {
			if !batch.IsTornTail(err) {
				f.problem(int64(pos), "framing", "%v", err)
			}
			break
		}
		entry := data[pos : pos+size]
		if int8(entry[batch.OffMagic]) < batch.MagicV2 {
			m, err := batch.ParseLegacy(entry)
			if err != nil {
				f.problem(int64(pos), "framing", "%v", err)
				break
			}
			if lw.legacyOverlaps(m) {
				emit(lw.legacy(m, int64(pos)))
			}
			pos += size
			continue
		}
		v := batch.View(entry)
		if len(v) < batch.HeaderSize || v.Magic() != batch.MagicV2 {
			f.problem(int64(pos), "framing", "not a valid batch (magic %d, %d bytes)", int8(entry[batch.OffMagic]), len(v))
			break
		}
		if o.Offsets.overlaps(v.BaseOffset(), v.LastOffset()) {
			emit(lw.v2(v, int64(pos)))
		}
		pos += size
	}
	if pos < len(data) && o.MaxBytes < 0 {
		n := int64(len(data) - pos)
		zero := batch.IsZero(data[pos:])
		f.InvalidBytes = &InvalidBytes{Position: int64(pos), Count: n, Zero: zero}
		if !zero {
			f.problem(int64(pos), "invalidBytes", "found %d invalid bytes at the end of %s", n, filepath.Base(path))
		}
	}
}

// legacyOverlaps reports whether a legacy entry holds an offset in the
// --offsets range. A compressed wrapper is opened only when a range is set
// and its last offset alone does not decide.
func (lw *logWalk) legacyOverlaps(m batch.LegacyMessage) bool {
	if !lw.o.Offsets.set {
		return true
	}
	first, last := legacyRange(m, lw.o.MaxMessageSize)
	return lw.o.Offsets.overlaps(first, last)
}

// legacyRange returns the first and last offsets of a legacy entry: the
// wrapper's offset is the last inner offset; the first is read from the
// inner messages of a compressed wrapper.
func legacyRange(m batch.LegacyMessage, limit int) (first, last int64) {
	last = m.Offset()
	if m.Compression() == batch.CompressionNone {
		return last, last
	}
	inner, err := m.AppendInner(nil, limit)
	if err != nil || len(inner) == 0 {
		return last, last
	}
	return inner[0].Offset, last
}

// encodeBytes renders a key or value for JSON: UTF-8 text when the bytes
// are valid UTF-8, standard base64 otherwise.
func encodeBytes(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, "utf8"
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, "base64"
}

// noOffsetYet is a run of offsets that has no previous offset.
const noOffsetYet = math.MinInt64

// noteOffset records a record offset that is not previous+1: in the
// trailer's pairs as Kafka's tool counts them (from -1), as a problem only
// after a record's offset (the start of a segment is no problem).
func (lw *logWalk) noteOffset(pos, offset int64) {
	if lw.lastOffset != noOffsetYet && offset != lw.lastOffset+1 {
		if lw.lastOffset >= 0 {
			lw.f.problem(pos, "nonConsecutiveOffsets", "%d is followed by %d", lw.lastOffset, offset)
		}
		lw.f.Pairs.NonConsecutive = append(lw.f.Pairs.NonConsecutive, [2]int64{lw.lastOffset, offset})
	}
	lw.lastOffset = offset
}

// setKeyValue fills a record's key and value fields; control records get
// no decoded fields.
func (lw *logWalk) setKeyValue(rec *Record, offset int64, key, value []byte, control bool) {
	rec.key, rec.value = key, value
	rec.Key, rec.KeyEncoding = encodeBytes(key)
	rec.Value, rec.ValueEncoding = encodeBytes(value)
	if rec.KeyEncoding == "base64" {
		rec.KeyText = strp(javaUTF8(key))
	}
	if rec.ValueEncoding == "base64" {
		rec.ValueText = strp(javaUTF8(value))
	}
	if lw.o.Decoder != nil && !control {
		var err error
		rec.DecodedKey, rec.DecodedValue, err = lw.o.Decoder.Decode(offset, key, value)
		if err != nil {
			rec.DecodeFailed = true
			lw.f.problem(-1, "decoder", "offset %d: the decoder fails (Kafka's tool dies here): %v", offset, err)
			var ex *Exception
			if errors.As(err, &ex) && lw.f.Exception == nil {
				lw.f.Exception = ex
			}
		}
	}
}

// recordData returns v's records section, decompressed; kept batches get a
// buffer of their own, streamed ones share the walk's.
func (lw *logWalk) recordData(v batch.View) ([]byte, error) {
	var buf []byte
	if !lw.keep {
		buf = lw.scratch
	}
	data, err := v.RecordData(buf, lw.o.MaxMessageSize)
	if err == nil && !lw.keep && v.Compression() != batch.CompressionNone {
		lw.scratch = data
	}
	return data, err
}

// v2 reads a v2 batch, with its records when deep.
func (lw *logWalk) v2(v batch.View, pos int64) Batch {
	valid := v.CRC() == v.ComputeCRC()
	if !valid {
		lw.f.problem(pos, "crc", "stored crc %d, computed %d", v.CRC(), v.ComputeCRC())
	}
	b := Batch{
		Position: pos, Size: v.Size(), Magic: v.Magic(),
		BaseOffset: v.BaseOffset(), LastOffset: v.LastOffset(),
		CRC: v.CRC(), CRCValid: valid, Attributes: v.Attributes(),
		Compression: v.Compression().String(), TimestampType: v.TimestampType().String(),
		V2Header: &V2Header{
			BatchLength: v.BatchLength(), PartitionLeaderEpoch: v.PartitionLeaderEpoch(),
			IsTransactional: v.IsTransactional(), IsControl: v.IsControl(),
			LastOffsetDelta: v.LastOffsetDelta(), BaseTimestamp: v.BaseTimestamp(), MaxTimestamp: v.MaxTimestamp(),
			ProducerID: v.ProducerID(), ProducerEpoch: v.ProducerEpoch(),
			BaseSequence: v.BaseSequence(), LastSequence: v.LastSequence(), RecordsCount: v.RecordsCount(),
		},
	}
	if h, ok := v.DeleteHorizon(); ok {
		b.DeleteHorizonMs = &h
	}
	if !lw.deep {
		return b
	}
	data, err := lw.recordData(v)
	if err != nil {
		lw.f.problem(pos, "records", "%v", err)
		return b
	}
	b.Records = []Record{}
	it := v.Records(data)
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		lw.noteOffset(pos, r.Offset)
		seq := r.Sequence
		rec := Record{Offset: r.Offset, Timestamp: r.Timestamp, KeySize: r.KeySize(), ValueSize: r.ValueSize(),
			Sequence: &seq, HeaderKeys: []string{}}
		hi := r.Headers()
		for h, ok := hi.Next(); ok; h, ok = hi.Next() {
			rec.HeaderKeys = append(rec.HeaderKeys, string(h.Key))
		}
		lw.setKeyValue(&rec, r.Offset, r.Key, r.Value, v.IsControl())
		if v.IsControl() {
			rec.Control = lw.control(pos, r)
		}
		b.Records = append(b.Records, rec)
	}
	if err := it.Err(); err != nil {
		lw.f.problem(pos, "records", "%v", err)
	}
	return b
}

// control decodes a control record's key and value.
func (lw *logWalk) control(pos int64, r *batch.Record) *Control {
	_, t, err := batch.ParseControlKey(r.Key)
	if err != nil {
		lw.f.problem(pos, "control", "offset %d: %v", r.Offset, err)
		return &Control{Type: -1, TypeName: "INVALID", Error: err.Error()}
	}
	c := &Control{Type: int16(t), TypeName: t.String()}
	val, err := batch.DecodeControlValue(t, r.Value)
	if err != nil {
		lw.f.problem(pos, "control", "offset %d: %v", r.Offset, err)
		c.Error = err.Error()
		return c
	}
	switch m := val.(type) {
	case nil:
	case batch.EndTxnMarker:
		epoch := m.CoordinatorEpoch
		c.CoordinatorEpoch = &epoch
	case batch.MirrorPidReset:
		c.MirrorPidReset = &m
	default:
		c.JSON = json.RawMessage(batch.ControlValueJSON(m))
	}
	return c
}

// legacy reads a magic 0/1 entry, with its message(s) when deep.
func (lw *logWalk) legacy(m batch.LegacyMessage, pos int64) Batch {
	valid := m.Valid()
	if !valid {
		lw.f.problem(pos, "crc", "stored crc %d, computed %d", m.CRC(), m.ComputeCRC())
	}
	first, last := legacyRange(m, lw.o.MaxMessageSize)
	b := Batch{
		Position: pos, Size: m.Size(), Magic: m.Magic(),
		BaseOffset: first, LastOffset: last,
		CRC: m.CRC(), CRCValid: valid, Attributes: int16(m.Attributes()),
		Compression: m.Compression().String(), TimestampType: m.TimestampType().String(),
		LegacyHeader: &LegacyHeader{Timestamp: m.Timestamp(), KeySize: m.KeySize(), ValueSize: m.ValueSize()},
	}
	if !lw.deep {
		return b
	}
	b.Records = []Record{}
	if m.Compression() == batch.CompressionNone {
		b.Records = append(b.Records, lw.legacyRecord(pos, m, m.Offset(), m.Timestamp()))
		return b
	}
	inner, err := m.AppendInner(nil, lw.o.MaxMessageSize)
	if err != nil {
		lw.f.problem(pos, "records", "invalid wrapper: %v", err)
		return b
	}
	for _, in := range inner {
		b.Records = append(b.Records, lw.legacyRecord(pos, in.Message, in.Offset, in.Timestamp))
	}
	return b
}

func (lw *logWalk) legacyRecord(pos int64, m batch.LegacyMessage, offset, ts int64) Record {
	lw.noteOffset(pos, offset)
	crc, valid := m.CRC(), m.Valid()
	rec := Record{Offset: offset, Timestamp: ts, KeySize: int(m.KeySize()), ValueSize: int(m.ValueSize()),
		CRC: &crc, CRCValid: &valid}
	lw.setKeyValue(&rec, offset, m.Key(), m.Value(), false)
	return rec
}
