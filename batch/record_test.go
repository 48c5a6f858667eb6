package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// vi is the zig-zag varint encoding of v.
func zigzag(v int32) []byte { return AppendVarint(nil, v) }

// cat concatenates byte slices.
func joinBytes(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// rec prefixes a record body with its length.
func rawRecord(body ...[]byte) []byte {
	b := joinBytes(body...)
	return joinBytes(zigzag(int32(len(b))), b)
}

// minimal is the body of a record with attributes 0, deltas 0, null key
// and value and no headers.
func minimal() []byte { return joinBytes([]byte{0, 0, 0}, zigzag(-1), zigzag(-1), zigzag(0)) }

// headerView returns a validated empty batch whose header declares count
// records and lastOffsetDelta lod; record data is passed to the iterator
// separately.
func headerView(t testing.TB, count, lod int32) View {
	t.Helper()
	s := idempotentSpec(1000)
	s.LastOffsetDelta, s.HasLastOffsetDelta = lod, true
	b := mustBuild(t, s, false)
	putBE32(b, OffRecordsCount, count)
	return View(b)
}

func TestRecordDecodeErrors(t *testing.T) {
	one := rawRecord(minimal())
	second := rawRecord([]byte{0, 0}, zigzag(1), zigzag(-1), zigzag(-1), zigzag(0)) // offset delta 1
	tests := []struct {
		name  string
		count int32
		data  []byte
		ok    int   // records decoded before the error
		pos   int64 // expected CorruptionError.Position, -1 for no check
		valid bool  // no error at all
	}{
		{"valid minimal record", 1, one, 1, 0, true},
		{"valid two records", 2, joinBytes(one, second), 2, 0, true},
		{"no records, no data", 0, nil, 0, 0, true},
		{"key length -5 is null", 1, rawRecord([]byte{0, 0, 0}, zigzag(-5), zigzag(-1), zigzag(0)), 1, 0, true},
		{"non-minimal varints", 1, joinBytes([]byte{0x8c, 0x00}, minimal()), 1, 0, true},
		{"length negative", 1, joinBytes(zigzag(-2), minimal()), 0, 0, false},
		{"length -1", 1, joinBytes(zigzag(-1), minimal()), 0, 0, false},
		{"length past the end", 1, joinBytes(zigzag(int32(len(minimal())+1)), minimal()), 0, 0, false},
		{"length larger than the fields", 1, joinBytes(zigzag(int32(len(minimal())+1)), minimal(), []byte{0}), 0, 0, false},
		{"length smaller than the fields", 1, joinBytes(zigzag(int32(len(minimal())-1)), minimal()), 0, -1, false},
		{"zero length", 1, zigzag(0), 0, 0, false},
		{"length varint too long", 1, joinBytes([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, minimal()), 0, 0, false},
		{"offset delta varint too long", 1, rawRecord([]byte{0, 0}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, zigzag(-1), zigzag(-1), zigzag(0)), 0, 3, false},
		{"timestamp delta varlong too long", 1, rawRecord([]byte{0}, bytes.Repeat([]byte{0x80}, 10), []byte{0}, zigzag(0), zigzag(-1), zigzag(-1), zigzag(0)), 0, 2, false},
		{"premature end: no data", 1, nil, 0, 0, false},
		{"premature end: length continuation byte", 1, []byte{0x80}, 0, 0, false},
		{"premature end inside the body", 1, rawRecord([]byte{0, 0x80}), 0, 2, false},
		{"header count negative", 1, rawRecord([]byte{0, 0, 0}, zigzag(-1), zigzag(-1), zigzag(-1)), 0, -1, false},
		{"header count too large", 1, rawRecord([]byte{0, 0, 0}, zigzag(-1), zigzag(-1), zigzag(3), []byte{0, 0}), 0, -1, false},
		{"header count missing", 1, rawRecord([]byte{0, 0, 0}, zigzag(-1), zigzag(-1)), 0, 6, false},
		{"negative header key length", 1, rawRecord([]byte{0, 0, 0}, zigzag(-1), zigzag(-1), zigzag(1), zigzag(-1), zigzag(-1)), 0, -1, false},
		{"header key past the record", 1, rawRecord([]byte{0, 0, 0}, zigzag(-1), zigzag(-1), zigzag(1), zigzag(5), []byte("ab"), zigzag(-1)), 0, -1, false},
		{"header value past the record", 1, rawRecord([]byte{0, 0, 0}, zigzag(-1), zigzag(-1), zigzag(1), zigzag(1), []byte("a"), zigzag(9), []byte("xy")), 0, -1, false},
		{"key past the record", 1, rawRecord([]byte{0, 0, 0}, zigzag(10), []byte("ab"), zigzag(-1), zigzag(0)), 0, -1, false},
		{"value past the record", 1, rawRecord([]byte{0, 0, 0}, zigzag(0), zigzag(10), []byte("ab"), zigzag(0)), 0, -1, false},
		{"key past the record, within the data", 1, joinBytes(rawRecord([]byte{0, 0, 0}, zigzag(4), []byte("ab")), []byte("cd"), zigzag(-1), zigzag(0)), 0, -1, false},
		{"trailing bytes after the last record", 1, joinBytes(one, []byte{0}), 1, int64(len(one)), false},
		{"a whole extra record", 1, joinBytes(one, one), 1, int64(len(one)), false},
		{"fewer records than declared", 2, one, 1, int64(len(one)), false},
		{"second record damaged", 2, joinBytes(one, zigzag(-3)), 1, int64(len(one)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := headerView(t, tc.count, max(tc.count-1, 0))
			it := v.Records(tc.data)
			n := 0
			for _, ok := it.Next(); ok; _, ok = it.Next() {
				n++
			}
			if n != tc.ok {
				t.Errorf("decoded %d records, want %d", n, tc.ok)
			}
			err := it.Err()
			if tc.valid {
				if err != nil {
					t.Fatalf("Err = %v, want nil", err)
				}
				if cerr := CheckRecords(v, tc.data, false); cerr != nil {
					t.Errorf("CheckRecords = %v", cerr)
				}
				return
			}
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || IsTornTail(err) {
				t.Fatalf("Err = %v (%T), want a *CorruptionError", err, err)
			}
			if ce.Pos < 0 || ce.Pos > int64(len(tc.data)) {
				t.Errorf("Position %d outside the %d bytes of data", ce.Pos, len(tc.data))
			}
			if tc.pos >= 0 && ce.Pos != tc.pos {
				t.Errorf("Position = %d, want %d (%v)", ce.Pos, tc.pos, err)
			}
			if _, ok := it.Next(); ok {
				t.Error("Next succeeded after an error")
			}
			if cerr := CheckRecords(v, tc.data, false); !IsCorrupt(cerr) {
				t.Errorf("CheckRecords = %v, want corrupt", cerr)
			}
		})
	}
}

// TestRecordFields decodes records with every kind of key, value and
// header and checks the null/empty distinction and aliasing.
func TestRecordFields(t *testing.T) {
	recs := []RecordSpec{
		{Timestamp: 500, Key: nil, Value: nil},
		{Timestamp: 400, Key: []byte{}, Value: []byte{}},
		{Timestamp: 600, Key: []byte("key"), Value: bytes.Repeat([]byte("v"), 300), Headers: []Header{
			{Key: []byte("null"), Value: nil},
			{Key: []byte("empty"), Value: []byte{}},
			{Key: []byte{}, Value: []byte("empty key")},
		}},
	}
	s := idempotentSpec(50)
	b := mustBuild(t, s, false, recs...)
	v, err := Check(b)
	if err != nil {
		t.Fatal(err)
	}
	data := v.RecordsSection()
	it := v.Records(data)
	for i := 0; ; i++ {
		r, ok := it.Next()
		if !ok {
			break
		}
		want := recs[i]
		if !sameBytes(r.Key, want.Key) || !sameBytes(r.Value, want.Value) {
			t.Errorf("record %d: key %q (nil %v) value %d bytes (nil %v)", i, r.Key, r.Key == nil, len(r.Value), r.Value == nil)
		}
		wantKeySize, wantValueSize := -1, -1
		if want.Key != nil {
			wantKeySize = len(want.Key)
		}
		if want.Value != nil {
			wantValueSize = len(want.Value)
		}
		if r.KeySize() != wantKeySize || r.ValueSize() != wantValueSize {
			t.Errorf("record %d: KeySize %d ValueSize %d, want %d %d", i, r.KeySize(), r.ValueSize(), wantKeySize, wantValueSize)
		}
		if r.Offset != 50+int64(i) || r.OffsetDelta != int32(i) || r.Timestamp != want.Timestamp || r.TimestampDelta != want.Timestamp-500 {
			t.Errorf("record %d: offset %d delta %d timestamp %d delta %d", i, r.Offset, r.OffsetDelta, r.Timestamp, r.TimestampDelta)
		}
		if r.Sequence != 10+int32(i) {
			t.Errorf("record %d: sequence %d, want %d", i, r.Sequence, 10+i)
		}
		if int(r.HeaderCount) != len(want.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, r.HeaderCount, len(want.Headers))
		}
		hi := r.Headers()
		j := 0
		for ; ; j++ {
			h, ok := hi.Next()
			if !ok {
				break
			}
			if !bytes.Equal(h.Key, want.Headers[j].Key) || h.Key == nil || !sameBytes(h.Value, want.Headers[j].Value) {
				t.Errorf("record %d header %d: %q=%q (null %v)", i, j, h.Key, h.Value, h.Value == nil)
			}
		}
		if j != len(want.Headers) {
			t.Errorf("record %d: header iterator gave %d headers, want %d", i, j, len(want.Headers))
		}
		if r.Value != nil && len(r.Value) > 0 && !aliasesInto(r.Value, data) {
			t.Errorf("record %d: value does not alias the records data", i)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if v.MaxTimestamp() != 600 || v.BaseTimestamp() != 500 {
		t.Errorf("base/max timestamp %d/%d, want 500/600", v.BaseTimestamp(), v.MaxTimestamp())
	}
}

// aliases reports whether sub lies inside whole's memory.
func aliasesInto(sub, whole []byte) bool {
	for i := range whole {
		if len(sub) > 0 && &whole[i] == &sub[0] {
			return i+len(sub) <= len(whole)
		}
	}
	return false
}

func TestCheckRecords(t *testing.T) {
	tests := []struct {
		name        string
		deltas      []int32
		lod         int32
		wantLoose   bool // CheckRecords(..., false) succeeds
		wantContig  bool // CheckRecords(..., true) succeeds
		trailingRaw []byte
	}{
		{"contiguous", []int32{0, 1, 2}, 2, true, true, nil},
		{"single record", []int32{0}, 0, true, true, nil},
		{"gaps", []int32{0, 2, 5}, 5, true, false, nil},
		{"first record removed", []int32{1, 2}, 2, true, false, nil},
		{"last records removed", []int32{0, 1}, 3, true, false, nil},
		{"no records, lastOffsetDelta kept", nil, 7, true, false, nil},
		{"out of order", []int32{1, 0}, 1, false, false, nil},
		{"duplicate delta", []int32{0, 0}, 1, false, false, nil},
		{"negative delta", []int32{-1, 0}, 1, false, false, nil},
		{"delta beyond lastOffsetDelta", []int32{0, 4}, 3, false, false, nil},
		{"trailing bytes", []int32{0, 1}, 1, false, false, []byte{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewBatchSpec(0)
			s.LastOffsetDelta, s.HasLastOffsetDelta = tc.lod, true
			recs := make([]RecordSpec, len(tc.deltas))
			for i, d := range tc.deltas {
				recs[i] = RecordSpec{OffsetDelta: d, Timestamp: 10, Value: []byte{byte(i)}}
			}
			b := mustBuild(t, s, true, recs...)
			v := View(b)
			data := append(bytes.Clone(v.RecordsSection()), tc.trailingRaw...)
			for _, contiguous := range []bool{false, true} {
				want := tc.wantLoose
				if contiguous {
					want = tc.wantContig
				}
				err := CheckRecords(v, data, contiguous)
				if (err == nil) != want {
					t.Errorf("CheckRecords(contiguous=%v) = %v, want success %v", contiguous, err, want)
				}
				if err != nil && !IsCorrupt(err) {
					t.Errorf("CheckRecords(contiguous=%v) error %v is not ErrCorrupt", contiguous, err)
				}
			}
		})
	}
}

func TestRecordTimestamps(t *testing.T) {
	recs := []RecordSpec{{Timestamp: 1000}, {Timestamp: 900}, {Timestamp: 1500}, {Timestamp: 1000}}
	tests := []struct {
		name      string
		tsType    TimestampType
		maxTS     int64 // 0: let the builder compute it
		horizon   int64 // 0: none
		wantMax   int64
		wantTS    []int64
		wantDelta []int64
	}{
		{"CreateTime", CreateTime, 0, 0, 1500, []int64{1000, 900, 1500, 1000}, []int64{0, -100, 500, 0}},
		{"LogAppendTime", LogAppendTime, 7777, 0, 7777, []int64{7777, 7777, 7777, 7777}, []int64{0, -100, 500, 0}},
		{"LogAppendTime before the records", LogAppendTime, 5, 0, 5, []int64{5, 5, 5, 5}, []int64{0, -100, 500, 0}},
		{"delete horizon", CreateTime, 0, 2000, 1500, []int64{1000, 900, 1500, 1000}, []int64{-1000, -1100, -500, -1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewBatchSpec(0)
			s.TimestampType = tc.tsType
			if tc.maxTS != 0 {
				s.MaxTimestamp, s.HasMaxTimestamp = tc.maxTS, true
			}
			if tc.horizon != 0 {
				s.DeleteHorizon, s.HasDeleteHorizon = tc.horizon, true
			}
			v, err := Check(mustBuild(t, s, false, recs...))
			if err != nil {
				t.Fatal(err)
			}
			if v.TimestampType() != tc.tsType || v.MaxTimestamp() != tc.wantMax {
				t.Errorf("timestamp type %v max %d, want %v %d", v.TimestampType(), v.MaxTimestamp(), tc.tsType, tc.wantMax)
			}
			if h, ok := v.DeleteHorizon(); ok != (tc.horizon != 0) || (ok && h != tc.horizon) {
				t.Errorf("DeleteHorizon = %d, %v; want %d", h, ok, tc.horizon)
			}
			it := v.Records(v.RecordsSection())
			i := 0
			for ; ; i++ {
				r, ok := it.Next()
				if !ok {
					break
				}
				if r.Timestamp != tc.wantTS[i] || r.TimestampDelta != tc.wantDelta[i] {
					t.Errorf("record %d: timestamp %d delta %d, want %d %d", i, r.Timestamp, r.TimestampDelta, tc.wantTS[i], tc.wantDelta[i])
				}
			}
			if it.Err() != nil || i != len(recs) {
				t.Errorf("%d records, err %v", i, it.Err())
			}
		})
	}
}

func TestRecordSequences(t *testing.T) {
	tests := []struct {
		name     string
		baseSeq  int32
		deltas   []int32
		lod      int32
		wantSeqs []int32
		wantLast int32
	}{
		{"no sequence", NoSequence, []int32{0, 1}, 1, []int32{-1, -1}, -1},
		{"from zero", 0, []int32{0, 1, 2}, 2, []int32{0, 1, 2}, 2},
		{"wrap-around", math.MaxInt32 - 1, []int32{0, 1, 2, 3}, 3, []int32{math.MaxInt32 - 1, math.MaxInt32, 0, 1}, 1},
		{"wrap-around with gaps", math.MaxInt32 - 1, []int32{0, 3}, 5, []int32{math.MaxInt32 - 1, 1}, 3},
		{"starts at MaxInt32", math.MaxInt32, []int32{0, 1}, 1, []int32{math.MaxInt32, 0}, 0},
		{"empty batch keeps last sequence", 100, nil, 9, nil, 109},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := idempotentSpec(0)
			s.BaseSequence = tc.baseSeq
			s.LastOffsetDelta, s.HasLastOffsetDelta = tc.lod, true
			recs := make([]RecordSpec, len(tc.deltas))
			for i, d := range tc.deltas {
				recs[i] = RecordSpec{OffsetDelta: d, Timestamp: 1}
			}
			v, err := Check(mustBuild(t, s, true, recs...))
			if err != nil {
				t.Fatal(err)
			}
			if v.LastSequence() != tc.wantLast {
				t.Errorf("LastSequence = %d, want %d", v.LastSequence(), tc.wantLast)
			}
			it := v.Records(v.RecordsSection())
			i := 0
			for ; ; i++ {
				r, ok := it.Next()
				if !ok {
					break
				}
				if r.Sequence != tc.wantSeqs[i] {
					t.Errorf("record %d: sequence %d, want %d", i, r.Sequence, tc.wantSeqs[i])
				}
			}
			if it.Err() != nil || i != len(tc.deltas) {
				t.Errorf("%d records, err %v", i, it.Err())
			}
		})
	}
}

func TestIncrementDecrementSequence(t *testing.T) {
	const maxSeq = math.MaxInt32
	tests := []struct {
		name       string
		seq, delta int32
		want       int32
	}{
		{"zero delta", 5, 0, 5},
		{"plain", 5, 10, 15},
		{"to MaxInt32", maxSeq - 1, 1, maxSeq},
		{"MaxInt32 wraps to 0", maxSeq, 1, 0},
		{"MaxInt32 plus 2", maxSeq, 2, 1},
		{"four from MaxInt32-1", maxSeq - 1, 3, 1},
		{"zero plus MaxInt32", 0, maxSeq, maxSeq},
		{"one plus MaxInt32", 1, maxSeq, 0},
		{"MaxInt32 plus MaxInt32", maxSeq, maxSeq, maxSeq - 1},
		{"middle wrap", 2_000_000_000, 200_000_000, 52_516_352},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IncrementSequence(tc.seq, tc.delta); got != tc.want {
				t.Errorf("IncrementSequence(%d, %d) = %d, want %d", tc.seq, tc.delta, got, tc.want)
			}
			if got := DecrementSequence(tc.want, tc.delta); got != tc.seq {
				t.Errorf("DecrementSequence(%d, %d) = %d, want %d", tc.want, tc.delta, got, tc.seq)
			}
		})
	}
}

// TestZeroCountIgnoresSection checks that a batch declaring no records is
// not looked into, whatever its records section holds (Kafka returns an
// empty iterator for count 0, formats.md §1.4).
func TestZeroCountIgnoresSection(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionGzip} {
		spec := NewBatchSpec(40)
		spec.Compression = c
		var b Builder
		out, err := b.AppendBatch(nil, &spec, []RecordSpec{{Timestamp: 1, Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		v := View(out)
		// Declare zero records and fix the CRC: the section now holds a
		// record (or a compressed stream) that must be ignored.
		binary.BigEndian.PutUint32(v[OffRecordsCount:], 0)
		binary.BigEndian.PutUint32(v[OffCRC:], v.ComputeCRC())
		if _, err := Check(v); err != nil {
			t.Fatalf("%v: Check: %v", c, err)
		}
		data, err := v.RecordData(nil, 1<<20)
		if err != nil {
			t.Fatalf("%v: RecordData: %v", c, err)
		}
		it := v.Records(data)
		if _, ok := it.Next(); ok || it.Err() != nil {
			t.Fatalf("%v: iterator yielded a record or failed: %v", c, it.Err())
		}
		if err := CheckRecords(v, data, false); err != nil {
			t.Fatalf("%v: CheckRecords: %v", c, err)
		}
	}
}

// TestRecordFieldErrors: the key and the value (read by parseRecord's
// written-out copy of readField) and a header's value (read by readField)
// fail alike, at the same place in the field: a length past the record is
// named with the field after its length varint, a bad length varint at
// the varint.
func TestRecordFieldErrors(t *testing.T) {
	head := []byte{0, 0, 0} // attributes, timestamp delta, offset delta
	hdr := func(value ...[]byte) []byte {
		return joinBytes(append([][]byte{zigzag(1), zigzag(1), []byte("h")}, value...)...)
	}
	tooLong := []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}
	tests := []struct {
		name string
		data []byte
		want string
		pos  int64
	}{
		{"key past the record", rawRecord(head, zigzag(10), []byte("ab")), "key of 10 bytes runs past the record", 5},
		{"value past the record", rawRecord(head, zigzag(-1), zigzag(10), []byte("ab")), "value of 10 bytes runs past the record", 6},
		{"header value past the record", rawRecord(head, zigzag(-1), zigzag(-1), hdr(zigzag(10), []byte("ab"))), "header value of 10 bytes runs past the record", 10},
		{"key length too long", rawRecord(head, tooLong, zigzag(-1), zigzag(0)), "key length: varint is too long", 4},
		{"value length too long", rawRecord(head, zigzag(-1), tooLong, zigzag(0)), "value length: varint is too long", 5},
		{"header value length too long", rawRecord(head, zigzag(-1), zigzag(-1), hdr(tooLong)), "header value length: varint is too long", 9},
		{"key length cut short", rawRecord(head, []byte{0x80}), "key length: premature end of data", 4},
		{"value length cut short", rawRecord(head, zigzag(-1), []byte{0x80}), "value length: premature end of data", 5},
		{"header value length cut short", rawRecord(head, zigzag(-1), zigzag(-1), hdr([]byte{0x80})), "header value length: premature end of data", 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := headerView(t, 1, 0)
			it := v.Records(tc.data)
			if _, ok := it.Next(); ok {
				t.Fatal("the record decoded")
			}
			var ce *CorruptionError
			if err := it.Err(); !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Err = %v, want one saying %q", err, tc.want)
			}
			if ce.Pos != tc.pos {
				t.Errorf("Position = %d, want %d (%v)", ce.Pos, tc.pos, ce)
			}
		})
	}
}
