package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
)

// This file implements `partlog dump --json`: one JSON object per dumped
// file on stdout, one object a line (JSON Lines), nothing else on stdout.
// Unknown files are reported on stderr ("Ignoring unknown file …") and get
// no object. The exit code follows the text mode: 4 when any object has
// problems, 8 when a file could not be read (its object then has an "io"
// problem), 16 for usage errors.
//
// Every object is a FileJSON. Field names are lower camel case; integers
// are JSON numbers; byte strings (record keys and values) are UTF-8 text
// when the bytes are valid UTF-8 and standard base64 (RFC 4648, padded)
// otherwise, with "keyEncoding"/"valueEncoding" saying which ("utf8" or
// "base64"); a null key or value is JSON null and has no encoding field.
//
// Problem kinds ("problems"[].kind):
//
//	io                 the file (or a sibling it needs) could not be read
//	crc                a v2 batch or legacy message fails its CRC check
//	framing            an entry of a .log cannot be framed or parsed; the
//	                   dump stops there and "invalidBytes" follows
//	invalidBytes       bytes after the last complete entry of a .log
//	records            the records of a batch cannot be decoded
//	control            a control record's key or value is invalid
//	decoder            the chosen decoder fails on a record (Kafka's tool dies there)
//	nonConsecutiveOffsets  a record offset is not previous+1 (deep iteration)
//	indexMismatch      .index entry whose batch has another last offset
//	unreadableEntry    .index entry pointing at no readable batch
//	offsetNotFound     .timeindex entry whose offset is not a batch's last offset
//	timestampMismatch  .timeindex timestamp differs from the batch's max timestamp
//	timestampOrder     .timeindex timestamp not above the previous entry's
//	unreadableLog      the .log could not be read where a .timeindex entry points
//	partialEntry       bytes after the last whole index entry
//	sanity             --index-sanity-check failed
//	corruptEntry       a .txnindex entry is invalid (or partial)
//	corrupt            a .snapshot fails validation
//	name               a .checkpoint's name is not a KRaft snapshot's

// jsonSchemaVersion is the value of "schemaVersion" in every object; it
// changes only when a field changes meaning or disappears.
const jsonSchemaVersion = 1

// FileJSON is the object printed for one file.
type FileJSON struct {
	// SchemaVersion is always jsonSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// File is the path as given on the command line.
	File string `json:"file"`
	// Kind is log, index, timeindex, txnindex, snapshot (a producer
	// snapshot) or kraftSnapshot.
	Kind string `json:"kind"`
	// Bootstrap is true for bootstrap.checkpoint (kind kraftSnapshot).
	Bootstrap bool `json:"bootstrap,omitempty"`
	// SnapshotEndOffset and SnapshotEpoch are the end offset and epoch in
	// a KRaft snapshot's name (kind kraftSnapshot, not bootstrap).
	SnapshotEndOffset *int64 `json:"snapshotEndOffset,omitempty"`
	SnapshotEpoch     *int32 `json:"snapshotEpoch,omitempty"`
	// BaseOffset is the offset in the file name (the segment's base offset,
	// or a snapshot's offset); absent if the name holds none.
	BaseOffset *int64 `json:"baseOffset,omitempty"`
	// Batches are the entries of a .log file in file order (kind log only).
	Batches []BatchJSON `json:"batches,omitzero"`
	// InvalidBytes describes the bytes after the last complete entry of a
	// .log file; absent when there are none or --max-bytes was given.
	InvalidBytes *InvalidBytesJSON `json:"invalidBytes,omitempty"`
	// SanityCheck is the result of --index-sanity-check (index, timeindex).
	SanityCheck *SanityJSON `json:"sanityCheck,omitempty"`
	// Entries are the index entries: []OffsetEntryJSON (index),
	// []TimeEntryJSON (timeindex) or []TxnEntryJSON (txnindex). Absent with
	// --index-sanity-check and --verify-index-only.
	Entries any `json:"entries,omitempty"`
	// Producers are the entries of a .snapshot file in file order.
	Producers []ProducerJSON `json:"producers,omitzero"`
	// Problems lists everything wrong found in the file; [] when none.
	Problems []ProblemJSON `json:"problems"`
}

// ProblemJSON is one finding: {"position", "kind", "detail"}.
type ProblemJSON = dumpProblem

// InvalidBytesJSON locates the invalid tail of a .log file.
type InvalidBytesJSON struct {
	Position int64 `json:"position"`
	Count    int64 `json:"count"`
	// Zero: every one of them is zero, the unwritten (preallocated)
	// tail of an active segment; not a problem then.
	Zero bool `json:"zero,omitempty"`
}

// SanityJSON is the outcome of --index-sanity-check; a failure is also
// listed in problems.
type SanityJSON struct {
	Passed bool `json:"passed"`
}

// BatchJSON is one entry of a .log file: a v2 batch (V2HeaderJSON fields
// present) or a legacy magic 0/1 message (LegacyHeaderJSON fields present).
type BatchJSON struct {
	// Position is the byte position of the entry in the file.
	Position int64 `json:"position"`
	// Size is the entry's size in bytes (12 + length field).
	Size  int  `json:"size"`
	Magic int8 `json:"magic"`
	// BaseOffset and LastOffset are the batch's first and last offsets; for
	// a compressed legacy wrapper, the first and last inner offsets.
	BaseOffset int64 `json:"baseOffset"`
	LastOffset int64 `json:"lastOffset"`
	// CRC is the stored checksum; CRCValid says whether it matches.
	CRC      uint32 `json:"crc"`
	CRCValid bool   `json:"crcValid"`
	// Attributes is the raw attributes field (int16 for v2, int8 legacy).
	Attributes    int16  `json:"attributes"`
	Compression   string `json:"compression"`
	TimestampType string `json:"timestampType"`
	*V2HeaderJSON
	*LegacyHeaderJSON
	// Records are present with --deep-iteration (or --print-data-log).
	Records []RecordJSON `json:"records,omitzero"`
}

// V2HeaderJSON holds the v2 batch header fields not in BatchJSON
// (formats.md §1.1).
type V2HeaderJSON struct {
	BatchLength          int32 `json:"batchLength"`
	PartitionLeaderEpoch int32 `json:"partitionLeaderEpoch"`
	IsTransactional      bool  `json:"isTransactional"`
	IsControl            bool  `json:"isControl"`
	// DeleteHorizonMs is the base timestamp when attribute bit 6 is set,
	// else null.
	DeleteHorizonMs *int64 `json:"deleteHorizonMs"`
	LastOffsetDelta int32  `json:"lastOffsetDelta"`
	BaseTimestamp   int64  `json:"baseTimestamp"`
	MaxTimestamp    int64  `json:"maxTimestamp"`
	ProducerID      int64  `json:"producerId"`
	ProducerEpoch   int16  `json:"producerEpoch"`
	BaseSequence    int32  `json:"baseSequence"`
	LastSequence    int32  `json:"lastSequence"`
	RecordsCount    int32  `json:"recordsCount"`
}

// LegacyHeaderJSON holds the fields of a legacy (magic 0/1) outer message.
type LegacyHeaderJSON struct {
	// Timestamp is the outer message's timestamp, -1 for magic 0.
	Timestamp int64 `json:"timestamp"`
	KeySize   int32 `json:"keySize"`
	ValueSize int32 `json:"valueSize"`
}

// RecordJSON is one record of a batch (or one legacy message).
type RecordJSON struct {
	Offset    int64 `json:"offset"`
	Timestamp int64 `json:"timestamp"`
	KeySize   int   `json:"keySize"`
	ValueSize int   `json:"valueSize"`
	// Sequence and HeaderKeys are present for v2 records only.
	Sequence   *int32   `json:"sequence,omitempty"`
	HeaderKeys []string `json:"headerKeys,omitzero"`
	// CRC and CRCValid are present for legacy messages only.
	CRC      *uint32 `json:"crc,omitempty"`
	CRCValid *bool   `json:"crcValid,omitempty"`
	// Key and Value are null when null; see the file comment for encodings.
	Key           *string `json:"key"`
	KeyEncoding   string  `json:"keyEncoding,omitempty"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"valueEncoding,omitempty"`
	// KeyText and ValueText are present when the encoding is base64.
	KeyText   *string `json:"keyText,omitempty"`
	ValueText *string `json:"valueText,omitempty"`
	// DecodedKey and DecodedValue are present with a decoder flag.
	DecodedKey   *string `json:"decodedKey,omitempty"`
	DecodedValue *string `json:"decodedValue,omitempty"`
	// Control is present for records of control batches.
	Control *ControlJSON `json:"control,omitempty"`
}

// ControlJSON is the decoded key and value of a control record
// (formats.md §3). Exactly one of CoordinatorEpoch (ABORT, COMMIT),
// MirrorPidReset (type 7), JSON (KRaft types 2–6) or Error is present,
// or none for an unknown type.
type ControlJSON struct {
	// Type is the control type from the key, -1 if the key is invalid.
	Type int16 `json:"type"`
	// TypeName is Kafka's name of the type, UNKNOWN or INVALID.
	TypeName         string                `json:"typeName"`
	CoordinatorEpoch *int32                `json:"coordinatorEpoch,omitempty"`
	MirrorPidReset   *batch.MirrorPidReset `json:"mirrorPidReset,omitempty"`
	// JSON is the value as Kafka's generated JSON converter prints it.
	JSON  json.RawMessage `json:"json,omitempty"`
	Error string          `json:"error,omitempty"`
}

// OffsetEntryJSON is one .index entry with its offset made absolute.
type OffsetEntryJSON struct {
	Offset   int64 `json:"offset"`
	Position int32 `json:"position"`
}

// TimeEntryJSON is one .timeindex entry with its offset made absolute.
type TimeEntryJSON struct {
	Timestamp int64 `json:"timestamp"`
	Offset    int64 `json:"offset"`
}

// TxnEntryJSON is one .txnindex entry (AbortedTxn).
type TxnEntryJSON struct {
	Version          int16 `json:"version"`
	ProducerID       int64 `json:"producerId"`
	FirstOffset      int64 `json:"firstOffset"`
	LastOffset       int64 `json:"lastOffset"`
	LastStableOffset int64 `json:"lastStableOffset"`
}

// ProducerJSON is one producer entry of a .snapshot file, with the stored
// values (-1 where the file has -1), plus FirstSequence when the entry has
// batch metadata (lastOffset >= 0).
type ProducerJSON struct {
	ProducerID            int64  `json:"producerId"`
	ProducerEpoch         int16  `json:"producerEpoch"`
	LastSequence          int32  `json:"lastSequence"`
	LastOffset            int64  `json:"lastOffset"`
	OffsetDelta           int32  `json:"offsetDelta"`
	Timestamp             int64  `json:"timestamp"`
	CoordinatorEpoch      int32  `json:"coordinatorEpoch"`
	CurrentTxnFirstOffset int64  `json:"currentTxnFirstOffset"`
	FirstSequence         *int32 `json:"firstSequence,omitempty"`
}

// fileKinds maps a file name extension to its JSON kind.
var fileKinds = map[string]string{
	".log":        "log",
	".index":      "index",
	".timeindex":  "timeindex",
	".txnindex":   "txnindex",
	".snapshot":   "snapshot",
	".checkpoint": "kraftSnapshot",
}

// runJSON dumps every file as a FileJSON object.
func (o *dumpOptions) runJSON(files []string, stdout, stderr io.Writer) error {
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	code := exitOK
	for _, path := range files {
		kind, ok := fileKinds[filepath.Ext(path)]
		if !ok {
			w.Flush()
			fmt.Fprintf(stderr, "Ignoring unknown file %s\n", path)
			continue
		}
		out := FileJSON{SchemaVersion: jsonSchemaVersion, File: path, Kind: kind, Problems: []ProblemJSON{}}
		stem, _, _ := strings.Cut(filepath.Base(path), ".")
		if base, err := strconv.ParseInt(stem, 10, 64); err == nil {
			out.BaseOffset = &base
		}
		var err error
		switch kind {
		case "log":
			err = o.logJSON(path, &out)
		case "index":
			err = o.offsetIndexJSON(path, &out)
		case "timeindex":
			err = o.timeIndexJSON(path, &out)
		case "txnindex":
			err = o.txnIndexJSON(path, &out)
		case "snapshot":
			err = o.snapshotJSON(path, &out)
		case "kraftSnapshot":
			out.BaseOffset = nil
			err = o.kraftSnapshotJSON(path, &out)
		}
		if err != nil {
			out.Problems = append(out.Problems, ProblemJSON{Position: -1, Kind: "io", Detail: err.Error()})
			code |= exitOperational
		} else if len(out.Problems) > 0 {
			code |= exitProblems
		}
		if err := enc.Encode(&out); err != nil {
			return &exitError{code: exitOperational, err: err}
		}
	}
	if code != exitOK {
		return &exitError{code: code}
	}
	return nil
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

// legacyOverlaps reports whether a legacy entry holds an offset in the
// --offsets range. A compressed wrapper is opened only when a range is set
// and its last offset alone does not decide.
func (o *dumpOptions) legacyOverlaps(m batch.LegacyMessage) bool {
	if !o.offsets.set {
		return true
	}
	first, last := legacyRange(m, o.maxMessageSize)
	return o.offsets.overlaps(first, last)
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

// encodeBytes renders a key or value (see the file comment).
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

// logWalk is the state of one .log file being turned into JSON.
type logWalk struct {
	o          *dumpOptions
	out        *FileJSON
	deep       bool
	scratch    []byte
	lastOffset int64
}

func (lw *logWalk) problem(pos int64, kind, format string, args ...any) {
	lw.out.Problems = append(lw.out.Problems, ProblemJSON{Position: pos, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// noteOffset records a record offset that is not previous+1.
func (lw *logWalk) noteOffset(pos, offset int64) {
	if lw.lastOffset >= 0 && offset != lw.lastOffset+1 {
		lw.problem(pos, "nonConsecutiveOffsets", "%d is followed by %d", lw.lastOffset, offset)
	}
	lw.lastOffset = offset
}

// kraftSnapshotJSON dumps a KRaft snapshot: its name, then its batches
// as logJSON does. A name that is not a snapshot's is a "name" problem.
func (o *dumpOptions) kraftSnapshotJSON(path string, out *FileJSON) error {
	data, err := readLogPrefix(path, o.maxBytes)
	if err != nil {
		return err
	}
	id, ok := parseKRaftSnapshotName(filepath.Base(path))
	switch {
	case ok && id.bootstrap:
		out.Bootstrap = true
	case ok:
		out.SnapshotEndOffset, out.SnapshotEpoch = &id.endOffset, &id.epoch
	default:
		out.Problems = append(out.Problems, ProblemJSON{Position: -1, Kind: "name",
			Detail: "not a KRaft snapshot name (<20-digit end offset>-<10-digit epoch>.checkpoint or bootstrap.checkpoint)"})
	}
	o.batchesJSON(path, data, out)
	return nil
}

// logJSON walks a .log file like the text dump (formats.md §1.4, §7.2):
// a CRC failure is reported and the walk goes on; a framing failure ends
// it, and the rest of the file is reported as invalid bytes.
func (o *dumpOptions) logJSON(path string, out *FileJSON) error {
	data, err := readLogPrefix(path, o.maxBytes)
	if err != nil {
		return err
	}
	o.batchesJSON(path, data, out)
	return nil
}

// batchesJSON converts the entries of a .log or .checkpoint file's bytes.
func (o *dumpOptions) batchesJSON(path string, data []byte, out *FileJSON) {
	lw := &logWalk{o: o, out: out, deep: o.deepIteration || o.printDataLog, lastOffset: -1}
	out.Batches = []BatchJSON{}
	pos := 0
	for pos < len(data) {
		size, err := batch.Frame(data[pos:])
		if err != nil {
			if !batch.IsTornTail(err) {
				lw.problem(int64(pos), "framing", "%v", err)
			}
			break
		}
		entry := data[pos : pos+size]
		if int8(entry[batch.OffMagic]) < batch.MagicV2 {
			m, err := batch.ParseLegacy(entry)
			if err != nil {
				lw.problem(int64(pos), "framing", "%v", err)
				break
			}
			if o.legacyOverlaps(m) {
				out.Batches = append(out.Batches, lw.legacy(m, int64(pos)))
			}
			pos += size
			continue
		}
		v := batch.View(entry)
		if len(v) < batch.HeaderSize || v.Magic() != batch.MagicV2 {
			lw.problem(int64(pos), "framing", "not a valid batch (magic %d, %d bytes)", int8(entry[batch.OffMagic]), len(v))
			break
		}
		if o.offsets.overlaps(v.BaseOffset(), v.LastOffset()) {
			out.Batches = append(out.Batches, lw.v2(v, int64(pos)))
		}
		pos += size
	}
	if pos < len(data) && o.maxBytes < 0 {
		n := int64(len(data) - pos)
		zero := batch.IsZero(data[pos:])
		out.InvalidBytes = &InvalidBytesJSON{Position: int64(pos), Count: n, Zero: zero}
		if !zero {
			lw.problem(int64(pos), "invalidBytes", "found %d invalid bytes at the end of %s", n, filepath.Base(path))
		}
	}
}

// setKeyValue fills a record's key and value fields (see the file
// comment); control records get no decoded fields.
func (lw *logWalk) setKeyValue(rec *RecordJSON, offset int64, key, value []byte, control bool) {
	rec.Key, rec.KeyEncoding = encodeBytes(key)
	rec.Value, rec.ValueEncoding = encodeBytes(value)
	if rec.KeyEncoding == "base64" {
		rec.KeyText = strp(javaUTF8(key))
	}
	if rec.ValueEncoding == "base64" {
		rec.ValueText = strp(javaUTF8(value))
	}
	if lw.o.customDecoder && lw.o.decoder != nil && !control {
		var err error
		rec.DecodedKey, rec.DecodedValue, err = lw.o.decoder.decode(offset, key, value)
		if err != nil {
			lw.problem(-1, "decoder", "offset %d: the decoder fails (Kafka's tool dies here): %v", offset, err)
		}
	}
}

// v2 converts a v2 batch, with its records when deep.
func (lw *logWalk) v2(v batch.View, pos int64) BatchJSON {
	valid := v.CRC() == v.ComputeCRC()
	if !valid {
		lw.problem(pos, "crc", "stored crc %d, computed %d", v.CRC(), v.ComputeCRC())
	}
	b := BatchJSON{
		Position: pos, Size: v.Size(), Magic: v.Magic(),
		BaseOffset: v.BaseOffset(), LastOffset: v.LastOffset(),
		CRC: v.CRC(), CRCValid: valid, Attributes: v.Attributes(),
		Compression: v.Compression().String(), TimestampType: v.TimestampType().String(),
		V2HeaderJSON: &V2HeaderJSON{
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
	data, err := v.RecordData(lw.scratch, lw.o.maxMessageSize)
	if err != nil {
		lw.problem(pos, "records", "%v", err)
		return b
	}
	if v.Compression() != batch.CompressionNone {
		lw.scratch = data
	}
	b.Records = []RecordJSON{}
	it := batch.NewRecordIterator(v, data)
	var r batch.Record
	for it.Next(&r) {
		lw.noteOffset(pos, r.Offset)
		seq := r.Sequence
		rec := RecordJSON{Offset: r.Offset, Timestamp: r.Timestamp, KeySize: r.KeySize(), ValueSize: r.ValueSize(),
			Sequence: &seq, HeaderKeys: []string{}}
		hi := r.Headers()
		var h batch.Header
		for hi.Next(&h) {
			rec.HeaderKeys = append(rec.HeaderKeys, string(h.Key))
		}
		lw.setKeyValue(&rec, r.Offset, r.Key, r.Value, v.IsControl())
		if v.IsControl() {
			rec.Control = lw.control(pos, &r)
		}
		b.Records = append(b.Records, rec)
	}
	if err := it.Err(); err != nil {
		lw.problem(pos, "records", "%v", err)
	}
	return b
}

// control decodes a control record's key and value.
func (lw *logWalk) control(pos int64, r *batch.Record) *ControlJSON {
	_, t, err := batch.ParseControlKey(r.Key)
	if err != nil {
		lw.problem(pos, "control", "offset %d: %v", r.Offset, err)
		return &ControlJSON{Type: -1, TypeName: "INVALID", Error: err.Error()}
	}
	c := &ControlJSON{Type: int16(t), TypeName: t.String()}
	val, err := batch.DecodeControlValue(t, r.Value)
	if err != nil {
		lw.problem(pos, "control", "offset %d: %v", r.Offset, err)
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

// legacy converts a magic 0/1 entry, with its message(s) when deep.
func (lw *logWalk) legacy(m batch.LegacyMessage, pos int64) BatchJSON {
	valid := m.Valid()
	if !valid {
		lw.problem(pos, "crc", "stored crc %d, computed %d", m.CRC(), m.ComputeCRC())
	}
	first, last := legacyRange(m, lw.o.maxMessageSize)
	b := BatchJSON{
		Position: pos, Size: m.Size(), Magic: m.Magic(),
		BaseOffset: first, LastOffset: last,
		CRC: m.CRC(), CRCValid: valid, Attributes: int16(m.Attributes()),
		Compression: m.Compression().String(), TimestampType: m.TimestampType().String(),
		LegacyHeaderJSON: &LegacyHeaderJSON{Timestamp: m.Timestamp(), KeySize: m.KeySize(), ValueSize: m.ValueSize()},
	}
	if !lw.deep {
		return b
	}
	b.Records = []RecordJSON{}
	if m.Compression() == batch.CompressionNone {
		b.Records = append(b.Records, lw.legacyRecord(pos, m, m.Offset(), m.Timestamp()))
		return b
	}
	inner, err := m.AppendInner(nil, lw.o.maxMessageSize)
	if err != nil {
		lw.problem(pos, "records", "invalid wrapper: %v", err)
		return b
	}
	for _, in := range inner {
		b.Records = append(b.Records, lw.legacyRecord(pos, in.Message, in.Offset, in.Timestamp))
	}
	return b
}

func (lw *logWalk) legacyRecord(pos int64, m batch.LegacyMessage, offset, ts int64) RecordJSON {
	lw.noteOffset(pos, offset)
	crc, valid := m.CRC(), m.Valid()
	rec := RecordJSON{Offset: offset, Timestamp: ts, KeySize: int(m.KeySize()), ValueSize: int(m.ValueSize()),
		CRC: &crc, CRCValid: &valid}
	lw.setKeyValue(&rec, offset, m.Key(), m.Value(), false)
	return rec
}

// indexProblems copies an index dump's findings into out.
func indexProblems(out *FileJSON, d *indexDump) {
	if d.sanityRan {
		out.SanityCheck = &SanityJSON{Passed: d.sanityErr == nil}
		if d.sanityErr != nil {
			pos := int64(-1)
			var ce *index.CorruptionError
			if errors.As(d.sanityErr, &ce) {
				pos = ce.FilePos
			}
			out.Problems = append(out.Problems, ProblemJSON{Position: pos, Kind: "sanity", Detail: d.sanityErr.Error()})
		}
	}
	out.Problems = append(out.Problems, d.problems...)
}

func (o *dumpOptions) offsetIndexJSON(path string, out *FileJSON) error {
	d, err := o.inspectOffsetIndex(path)
	if err != nil {
		return err
	}
	if !d.sanityRan && !o.verifyIndexOnly {
		entries := make([]OffsetEntryJSON, len(d.offsets))
		for i, e := range d.offsets {
			entries[i] = OffsetEntryJSON{Offset: e.Offset, Position: e.Position}
		}
		out.Entries = entries
	}
	indexProblems(out, d)
	return nil
}

func (o *dumpOptions) timeIndexJSON(path string, out *FileJSON) error {
	d, err := o.inspectTimeIndex(path)
	if err != nil {
		return err
	}
	if !d.sanityRan && !o.verifyIndexOnly {
		entries := make([]TimeEntryJSON, len(d.times))
		for i, e := range d.times {
			entries[i] = TimeEntryJSON{Timestamp: e.Timestamp, Offset: e.Offset}
		}
		out.Entries = entries
	}
	indexProblems(out, d)
	return nil
}

func (o *dumpOptions) txnIndexJSON(path string, out *FileJSON) error {
	txns, problems, err := o.inspectTxnIndex(path)
	if err != nil {
		return err
	}
	entries := make([]TxnEntryJSON, len(txns))
	for i, e := range txns {
		entries[i] = TxnEntryJSON{Version: e.Version, ProducerID: e.ProducerID, FirstOffset: e.FirstOffset,
			LastOffset: e.LastOffset, LastStableOffset: e.LastStableOffset}
	}
	out.Entries = entries
	out.Problems = append(out.Problems, problems...)
	return nil
}

func (o *dumpOptions) snapshotJSON(path string, out *FileJSON) error {
	entries, data, corrupt, err := readSnapshotFile(path)
	if err != nil {
		return err
	}
	out.Producers = make([]ProducerJSON, 0, len(entries))
	if corrupt != nil {
		out.Problems = append(out.Problems, ProblemJSON{Position: corrupt.Offset, Kind: "corrupt",
			Detail: kafkaSnapshotError(data, corrupt) + " (" + corrupt.Reason + ")"})
		return nil
	}
	for i := range entries {
		e := &entries[i]
		p := ProducerJSON{
			ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch, LastSequence: e.LastSequence,
			LastOffset: e.LastOffset, OffsetDelta: e.OffsetDelta, Timestamp: e.Timestamp,
			CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnFirstOffset: e.CurrentTxnFirstOffset,
		}
		if e.HasBatchMetadata() {
			fs := firstSequence(e)
			p.FirstSequence = &fs
		}
		out.Producers = append(out.Producers, p)
	}
	return nil
}
