package batch

import (
	"encoding/binary"
	"math"
)

// Record is one decoded v2 record (formats.md §1.5). Key, Value and the
// headers alias the records data given to the iterator; a nil Key or
// Value is null, a non-nil empty one is empty.
type Record struct {
	// BodyLength is the record's length varint: bytes after that field.
	BodyLength int32
	// Attributes is the unused per-record attributes byte.
	Attributes int8
	// TimestampDelta and OffsetDelta are the stored deltas.
	TimestampDelta int64
	OffsetDelta    int32
	// Key and Value are nil when null.
	Key, Value []byte
	// HeaderCount is the number of headers.
	HeaderCount int32
	// Offset is baseOffset+OffsetDelta.
	Offset int64
	// Timestamp is the effective timestamp: maxTimestamp for LogAppendTime
	// batches, baseTimestamp+TimestampDelta otherwise.
	Timestamp int64
	// Sequence is the record's sequence number, or -1.
	Sequence int32

	headers []byte // the validated header bytes
}

// KeySize is the key length, -1 for a null key.
func (r *Record) KeySize() int {
	if r.Key == nil {
		return -1
	}
	return len(r.Key)
}

// ValueSize is the value length, -1 for a null value.
func (r *Record) ValueSize() int {
	if r.Value == nil {
		return -1
	}
	return len(r.Value)
}

// Headers returns an iterator over the record's headers, in order.
func (r *Record) Headers() HeaderIterator {
	return HeaderIterator{b: r.headers, left: r.HeaderCount}
}

// Header is one record header. Value is nil when null (a header key is
// never null). Both alias the records data.
type Header struct {
	Key, Value []byte
}

// HeaderIterator walks headers that RecordIterator has already validated.
type HeaderIterator struct {
	b    []byte
	left int32
}

// Next returns the next header, or false after the last.
//
//	hs := r.Headers()
//	for h, ok := hs.Next(); ok; h, ok = hs.Next() { ... }
func (it *HeaderIterator) Next() (Header, bool) {
	if it.left <= 0 {
		return Header{}, false
	}
	it.left--
	var h Header
	var n int
	h.Key, n = readLenBytes(it.b)
	it.b = it.b[n:]
	h.Value, n = readLenBytes(it.b)
	it.b = it.b[n:]
	return h, true
}

// readLenBytes reads a varint length and the bytes it announces from
// bytes already validated by parseRecord.
func readLenBytes(b []byte) ([]byte, int) {
	l, n := ReadVarint(b)
	if l < 0 {
		return nil, n
	}
	return b[n : n+int(l) : n+int(l)], n + int(l)
}

// RecordIterator decodes the records of one batch from its uncompressed
// records data (View.RecordsSection for an uncompressed batch, the
// decompressed section otherwise: View.RecordData gives either). It
// stops after RecordsCount records and, at that point, requires the data
// to be used up exactly, as Kafka does. It is used as Iterator is:
//
//	it := v.Records(data)
//	for r, ok := it.Next(); ok; r, ok = it.Next() { ... }
//	if err := it.Err(); err != nil { ... }
//
// It does not allocate and is not safe for concurrent use.
type RecordIterator struct {
	data          []byte
	pos           int
	left          int32
	baseOffset    int64
	baseTimestamp int64
	maxTimestamp  int64
	baseSequence  int32
	logAppendTime bool
	empty         bool // the batch declares zero records
	err           error
	rec           Record // the record Next returns
}

// Records returns an iterator over the records of v held in data (see
// RecordIterator). Positions in errors are relative to the start of data.
func (v View) Records(data []byte) RecordIterator {
	var it RecordIterator
	it.reset(v, data)
	return it
}

// reset starts it over the records of v held in data, in place: the
// iterator is a few hundred bytes (mostly rec), which a return by value
// copies; SummarizeRecords, run on every batch a leader takes, resets
// its own.
func (it *RecordIterator) reset(v View, data []byte) {
	// Field by field: a composite literal is built aside and copied.
	// it.rec is left as it is; Next sets every field of it.
	it.data, it.pos, it.err = data, 0, nil
	it.left = v.RecordsCount()
	it.empty = it.left == 0
	it.baseOffset = v.BaseOffset()
	it.baseTimestamp, it.maxTimestamp = v.BaseTimestamp(), v.MaxTimestamp()
	it.baseSequence = v.BaseSequence()
	it.logAppendTime = v.TimestampType() == LogAppendTime
}

// Next returns the next record, or false when all records were read or
// on an error (see Err). The record is the iterator's own, overwritten by
// the next call (as Iterator.Header); its bytes alias the data.
func (it *RecordIterator) Next() (*Record, bool) {
	if it.err != nil {
		return nil, false
	}
	if it.left <= 0 {
		// A batch that declares no records is not looked into (Kafka
		// returns an empty iterator for count 0, formats.md §1.4).
		if it.pos != len(it.data) && !it.empty {
			it.err = corruptf(int64(it.pos), "incorrect declared batch size, %d bytes remain after the last record", len(it.data)-it.pos)
			it.pos = len(it.data)
		}
		return nil, false
	}
	r := &it.rec
	n, err := parseRecord(it.data[it.pos:], r)
	if err != nil {
		err.Pos += int64(it.pos)
		it.err = err
		return nil, false
	}
	it.pos += n
	it.left--
	r.Offset = it.baseOffset + int64(r.OffsetDelta)
	if it.logAppendTime {
		r.Timestamp = it.maxTimestamp
	} else {
		r.Timestamp = it.baseTimestamp + r.TimestampDelta
	}
	if it.baseSequence < 0 {
		r.Sequence = NoSequence
	} else {
		r.Sequence = IncrementSequence(it.baseSequence, r.OffsetDelta)
	}
	return r, true
}

// Err returns the first decoding error, or nil.
func (it *RecordIterator) Err() error {
	if it.err == nil {
		return nil
	}
	return it.err
}

// parseRecord decodes one record at the start of b, checking every length
// against the record's own length field. It returns the bytes consumed.
func parseRecord(b []byte, r *Record) (int, *CorruptionError) {
	length, n := ReadVarint(b)
	if n <= 0 {
		return 0, corruptf(0, "record length: %s", varintProblem(n))
	}
	if length < 0 || int64(length) > int64(len(b)-n) {
		return 0, corruptf(0, "invalid record size %d with %d bytes left", length, len(b)-n)
	}
	body := b[n : n+int(length)]
	total := n + int(length)
	p := 0
	if len(body) < 1 {
		return 0, corruptf(0, "record of %d bytes has no attributes", length)
	}
	r.BodyLength = length
	r.Attributes = int8(body[0])
	p++
	tsd, k := ReadVarlong(body[p:])
	if k <= 0 {
		return 0, corruptf(int64(n+p), "timestamp delta: %s", varintProblem(k))
	}
	r.TimestampDelta = tsd
	p += k
	od, k := ReadVarint(body[p:])
	if k <= 0 {
		return 0, corruptf(int64(n+p), "offset delta: %s", varintProblem(k))
	}
	r.OffsetDelta = od
	p += k
	// The key and the value: readField written out (same checks, same
	// errors), so that the walk makes no call per field; the headers'
	// values, rarer, call it.
	for i := range 2 {
		l, k := ReadVarint(body[p:])
		if k <= 0 {
			return 0, corruptf(int64(n+p), "%s length: %s", keyValue[i], varintProblem(k))
		}
		p += k
		var f []byte
		if l >= 0 {
			if int(l) > len(body)-p {
				return 0, corruptf(int64(n+p), "%s of %d bytes runs past the record", keyValue[i], l)
			}
			f = body[p : p+int(l) : p+int(l)]
			p += int(l)
		}
		if i == 0 {
			r.Key = f
		} else {
			r.Value = f
		}
	}
	var e *CorruptionError
	hc, k := ReadVarint(body[p:])
	if k <= 0 {
		return 0, corruptf(int64(n+p), "header count: %s", varintProblem(k))
	}
	p += k
	if hc < 0 || int(hc) > len(body)-p {
		return 0, corruptf(int64(n+p), "invalid header count %d", hc)
	}
	r.HeaderCount = hc
	hstart := p
	for i := int32(0); i < hc; i++ {
		kl, k := ReadVarint(body[p:])
		if k <= 0 {
			return 0, corruptf(int64(n+p), "header key length: %s", varintProblem(k))
		}
		if kl < 0 {
			return 0, corruptf(int64(n+p), "invalid negative header key length %d", kl)
		}
		if int(kl) > len(body)-p-k {
			return 0, corruptf(int64(n+p), "header key of %d bytes runs past the record", kl)
		}
		p += k + int(kl)
		if _, p, e = readField(body, p, n, "header value"); e != nil {
			return 0, e
		}
	}
	r.headers = body[hstart:p:p]
	if p != len(body) {
		return 0, corruptf(0, "invalid record size: expected to read %d bytes, read %d", length, p)
	}
	return total, nil
}

// keyValue names a record's key and value in parseRecord's errors.
var keyValue = [2]string{"key", "value"}

// readField reads a varint length and that many bytes from body at p; a
// negative length is null (Kafka reads every negative length as null).
// parseRecord reads the key and value with the same code written out
// (bench/RESULTS.md, the record walk); a change here is a change there.
// off is the position of body in the enclosing data, for error positions.
func readField(body []byte, p, off int, what string) ([]byte, int, *CorruptionError) {
	l, k := ReadVarint(body[p:])
	if k <= 0 {
		return nil, p, corruptf(int64(off+p), "%s length: %s", what, varintProblem(k))
	}
	p += k
	if l < 0 {
		return nil, p, nil
	}
	if int(l) > len(body)-p {
		return nil, p, corruptf(int64(off+p), "%s of %d bytes runs past the record", what, l)
	}
	return body[p : p+int(l) : p+int(l)], p + int(l), nil
}

func varintProblem(n int) string {
	if n == 0 {
		return "premature end of data"
	}
	return "varint is too long"
}

// CheckRecords decodes every record of v from data (its uncompressed
// records section) and checks that offset deltas increase strictly and
// stay within lastOffsetDelta, and that the data ends exactly after the
// last record. With contiguous set it also requires the deltas to be
// 0, 1, …, n-1 and lastOffsetDelta = n-1, as a leader requires of a
// client's batch (formats.md §1.8). It does not allocate.
func CheckRecords(v View, data []byte, contiguous bool) error {
	var sum RecordSummary
	return SummarizeRecords(v, data, contiguous, &sum)
}

// RecordSummary is what a leader needs of a batch's records beyond their
// framing, gathered in CheckRecords' one walk: Kafka's LogValidator
// checks every record's timestamp, takes the batch's max timestamp from
// the records, and refuses a keyless record on a compacted topic.
type RecordSummary struct {
	// MinTimestamp and MaxTimestamp are the smallest and largest record
	// timestamps (Record.Timestamp); MinTimestamp skips NoTimestamp, and
	// both are NoTimestamp when no record has one.
	MinTimestamp, MaxTimestamp int64
	// NullKey says a record has a null key; NullKeyDelta is the offset
	// delta of the first.
	NullKey      bool
	NullKeyDelta int32
}

// SummarizeRecords is CheckRecords, filling sum. It does not allocate.
func SummarizeRecords(v View, data []byte, contiguous bool, sum *RecordSummary) error {
	var it RecordIterator
	it.reset(v, data)
	prev := int32(-1)
	lod := v.LastOffsetDelta()
	lo, hi := int64(math.MaxInt64), int64(NoTimestamp)
	*sum = RecordSummary{}
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		if r.OffsetDelta <= prev || r.OffsetDelta > lod {
			return corruptf(0, "record offset delta %d out of order (previous %d, last offset delta %d)", r.OffsetDelta, prev, lod)
		}
		if contiguous && r.OffsetDelta != prev+1 {
			return corruptf(0, "record offset delta %d where %d was expected", r.OffsetDelta, prev+1)
		}
		prev = r.OffsetDelta
		if ts := r.Timestamp; ts != NoTimestamp {
			lo, hi = min(lo, ts), max(hi, ts)
		}
		if r.Key == nil && !sum.NullKey {
			sum.NullKey, sum.NullKeyDelta = true, r.OffsetDelta
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if contiguous && prev != lod {
		return corruptf(0, "last offset delta %d but %d records", lod, prev+1)
	}
	if lo == math.MaxInt64 {
		lo = NoTimestamp
	}
	sum.MinTimestamp, sum.MaxTimestamp = lo, hi
	return nil
}

// be32 reads a big-endian int32 (helper for control values).
func be32(b []byte) int32 { return int32(binary.BigEndian.Uint32(b)) }

// be16 reads a big-endian int16.
func be16(b []byte) int16 { return int16(binary.BigEndian.Uint16(b)) }
