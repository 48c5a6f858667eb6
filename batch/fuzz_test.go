package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/unsafeutil"
)

// fuzzBase is the region position used by the fuzz targets, so that
// position arithmetic with a non-zero base is exercised.
const fuzzBase = 1 << 40

// fuzzLimit caps decompression in the fuzz targets.
const fuzzLimit = 1 << 20

// addVectorSeeds adds every golden vector, their concatenation, truncated
// and padded forms, and compressed batches for each codec.
func addVectorSeeds(f *testing.F) {
	files, err := filepath.Glob("testdata/vectors/*.bin")
	if err != nil || len(files) == 0 {
		f.Fatalf("no vectors: %v", err)
	}
	var all []byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(bytes.Clone(b), make([]byte, 64)...))
		f.Add(b[:len(b)-1])
		all = append(all, b...)
	}
	f.Add(all)
	f.Add(all[:len(all)/2])
	var bld Builder
	for c := CompressionNone; c <= CompressionZstd; c++ {
		s := NewBatchSpec(10)
		s.Compression = c
		recs := []RecordSpec{
			{Timestamp: 1, Key: []byte("k"), Value: []byte("value"), Headers: []Header{{Key: []byte("h"), Value: nil}}},
			{Timestamp: 2, Key: nil, Value: []byte{}},
		}
		b, err := bld.AppendBatch(nil, &s, recs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkErrKind fails unless err is exactly one of ErrCorrupt and
// ErrTornTail, with the matching concrete type.
func checkErrKind(t *testing.T, err error) {
	t.Helper()
	c, tt := errors.Is(err, ErrCorrupt), errors.Is(err, ErrTornTail)
	if c == tt {
		t.Fatalf("error %v (%T): corrupt %v, torn %v; want exactly one", err, err, c, tt)
	}
	var ce *CorruptionError
	var te *TornTailError
	if c && !errors.As(err, &ce) || tt && !errors.As(err, &te) {
		t.Fatalf("error %v has type %T", err, err)
	}
}

func FuzzIterator(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		it := NewIterator(data, fuzzBase)
		var starts []int
		off := 0
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			if len(v) < HeaderSize || len(v) != v.Size() || v.Magic() != MagicV2 || v.CRC() != v.ComputeCRC() {
				t.Fatalf("invalid batch at %d: len %d size %d magic %d", off, len(v), v.Size(), v.Magic())
			}
			headerMatchesView(t, it.Header(), v)
			if &v[0] != &data[off] {
				t.Fatalf("batch at %d does not alias the region", off)
			}
			starts = append(starts, off)
			off += len(v)
			if it.Offset() != off || it.Position() != fuzzBase+int64(off) {
				t.Fatalf("Offset %d Position %d after a batch ending at %d", it.Offset(), it.Position(), off)
			}
		}
		if it.Position() > fuzzBase+int64(len(data)) {
			t.Fatalf("Position %d past the end %d", it.Position(), fuzzBase+len(data))
		}
		err := it.Err()
		if err == nil {
			if off != len(data) {
				t.Fatalf("iteration stopped at %d of %d without an error", off, len(data))
			}
		} else {
			checkErrKind(t, err)
			var ce *CorruptionError
			var te *TornTailError
			switch {
			case errors.As(err, &ce):
				if ce.Pos != it.Position() {
					t.Fatalf("corruption at %d, iterator at %d", ce.Pos, it.Position())
				}
			case errors.As(err, &te):
				if te.Position != it.Position() || te.Remaining != int64(len(data)-off) {
					t.Fatalf("torn tail at %d (%d left), iterator at %d (%d left)", te.Position, te.Remaining, it.Position(), len(data)-off)
				}
				if te.Zero != IsZero(data[off:]) {
					t.Fatalf("torn tail Zero = %v for %x", te.Zero, data[off:])
				}
			}
		}
		if _, ok := it.Next(); ok || it.Err() != err {
			t.Fatal("iterator not sticky after the end")
		}

		// The valid prefix iterates to the same batches and ends cleanly.
		it2 := NewIterator(data[:off], fuzzBase)
		k := 0
		for v, ok := it2.Next(); ok; v, ok = it2.Next() {
			if k >= len(starts) || &v[0] != &data[starts[k]] {
				t.Fatalf("prefix batch %d differs", k)
			}
			k++
		}
		if it2.Err() != nil || k != len(starts) || it2.Position() != it.Position() {
			t.Fatalf("prefix: %d of %d batches, ended at %d (want %d): %v", k, len(starts), it2.Position(), it.Position(), it2.Err())
		}
	})
}

// within reports whether sub lies inside data's memory.
func within(sub, data []byte) bool { return unsafeutil.Within(sub, data) }

func FuzzRecords(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, region []byte) {
		it := NewIterator(region, 0)
		var scratch []byte
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			data, err := v.RecordData(scratch, fuzzLimit)
			if err != nil {
				if !IsCorrupt(err) || IsTornTail(err) {
					t.Fatalf("RecordData error %v is not ErrCorrupt", err)
				}
				continue
			}
			if v.Compression() == CompressionNone {
				if !bytes.Equal(data, v.RecordsSection()) {
					t.Fatal("uncompressed RecordData differs from the section")
				}
			} else {
				if len(data) > fuzzLimit {
					t.Fatalf("decompressed %d bytes, limit %d", len(data), fuzzLimit)
				}
				scratch = data
			}
			ri := v.Records(data)
			n := int32(0)
			for r, ok := ri.Next(); ok; r, ok = ri.Next() {
				n++
				if n > v.RecordsCount() {
					t.Fatalf("%d records, %d declared", n, v.RecordsCount())
				}
				if !within(r.Key, data) || !within(r.Value, data) {
					t.Fatalf("record %d: key or value outside the data", n)
				}
				if r.KeySize() != len(r.Key) && !(r.Key == nil && r.KeySize() == -1) {
					t.Fatalf("KeySize %d for %d bytes", r.KeySize(), len(r.Key))
				}
				if r.Offset != v.BaseOffset()+int64(r.OffsetDelta) {
					t.Fatalf("offset %d for delta %d", r.Offset, r.OffsetDelta)
				}
				if v.TimestampType() == LogAppendTime && r.Timestamp != v.MaxTimestamp() {
					t.Fatalf("LogAppendTime record timestamp %d, max %d", r.Timestamp, v.MaxTimestamp())
				}
				hi := r.Headers()
				hn := int32(0)
				for h, ok := hi.Next(); ok; h, ok = hi.Next() {
					hn++
					if h.Key == nil || !within(h.Key, data) || !within(h.Value, data) {
						t.Fatalf("record %d header %d: key %v value %v outside the data", n, hn, h.Key, h.Value)
					}
				}
				if hn != r.HeaderCount {
					t.Fatalf("record %d: %d headers iterated, %d declared", n, hn, r.HeaderCount)
				}
			}
			rerr := ri.Err()
			if rerr == nil && n != v.RecordsCount() {
				t.Fatalf("%d records without error, %d declared", n, v.RecordsCount())
			}
			if rerr != nil {
				var ce *CorruptionError
				if !errors.As(rerr, &ce) || ce.Pos < 0 || ce.Pos > int64(len(data)) {
					t.Fatalf("record error %v: not a *CorruptionError inside the %d bytes", rerr, len(data))
				}
			}
			cerr := CheckRecords(v, data, false)
			if cerr != nil && !IsCorrupt(cerr) {
				t.Fatalf("CheckRecords error %v is not ErrCorrupt", cerr)
			}
			if rerr != nil && cerr == nil {
				t.Fatalf("CheckRecords accepted records the iterator rejected: %v", rerr)
			}
			_ = CheckRecords(v, data, true)
		}
	})
}

func FuzzControlValue(f *testing.F) {
	f.Add(hexBytes(f, mprVector))
	f.Add(hexBytes(f, "00000100"))
	f.Add(hexBytes(f, "000000000007"))
	f.Add(hexBytes(f, "0000000100"))
	f.Add(hexBytes(f, "000000"))
	f.Add(hexBytes(f, "00000000018bcfe5680000"))
	f.Add(hexBytes(f, "0000"+"00000002"+"03"+"0000000100"+"0000000200"+"02"+"0000000200"+"00"))
	f.Add(hexBytes(f, kraftVotersValue))
	f.Add(hexBytes(f, "000002410205"+"01ff"+"07"+"00"))
	f.Fuzz(func(t *testing.T, value []byte) {
		for typ := ControlType(0); typ <= 8; typ++ {
			v, err := DecodeControlValue(typ, value)
			if err != nil {
				if !IsCorrupt(err) || IsTornTail(err) {
					t.Fatalf("type %d: error %v is not ErrCorrupt", typ, err)
				}
				continue
			}
			if !typ.Known() {
				if v != nil {
					t.Fatalf("type %d: unknown type decoded to %#v", typ, v)
				}
				continue
			}
			if j := ControlValueJSON(v); !json.Valid([]byte(j)) {
				t.Fatalf("type %d: invalid JSON %s", typ, j)
			}
		}
		m, err := ParseMirrorPidReset(value)
		if err != nil {
			return
		}
		enc := AppendMirrorPidReset(nil, m.SourceClusterID)
		if enc[0] != 0 || enc[1] != 0 {
			t.Fatalf("AppendMirrorPidReset wrote version %x", enc[:2])
		}
		putBE16(enc, 0, m.Version)
		m2, err := ParseMirrorPidReset(enc)
		if err != nil || m2 != m {
			t.Fatalf("re-encoded %+v as %x, parsed back %+v, %v", m, enc, m2, err)
		}
	})
}

func FuzzCheck(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		n, ferr := Frame(data)
		v, err := Check(data)
		// The one-pass fast path and the rule-by-rule path agree on
		// every input: same View, same error.
		var hs BatchHeader
		vs, serr := checkSlow(data, 0, &hs)
		if len(vs) != len(v) || (err == nil) != (serr == nil) || err != nil && err.Error() != serr.Error() {
			t.Fatalf("CheckAt: %d bytes, %v; checkSlow: %d bytes, %v", len(v), err, len(vs), serr)
		}
		if err != nil {
			checkErrKind(t, err)
			if v != nil {
				t.Fatalf("Check returned a View of %d bytes with %v", len(v), err)
			}
			if IsTornTail(err) != IsTornTail(ferr) {
				t.Fatalf("Check says %v, Frame says %v", err, ferr)
			}
			return
		}
		if ferr != nil || n != len(v) {
			t.Fatalf("Check accepted %d bytes, Frame = %d, %v", len(v), n, ferr)
		}
		if len(v) > len(data) || len(v) != v.Size() || len(v) < HeaderSize || &v[0] != &data[0] {
			t.Fatalf("View of %d bytes (size %d) for %d bytes of input", len(v), v.Size(), len(data))
		}
		v2, err := Check(v)
		if err != nil || len(v2) != len(v) {
			t.Fatalf("Check(View) = %d bytes, %v", len(v2), err)
		}
		if v.LastOffset() != v.BaseOffset()+int64(v.LastOffsetDelta()) || int64(v.RecordsCount()) > int64(v.LastOffsetDelta())+1 {
			t.Fatalf("accepted header: count %d lastOffsetDelta %d", v.RecordsCount(), v.LastOffsetDelta())
		}
	})
}

// FuzzAppendRecompressed: any checked batch recompressed with any codec
// is a valid batch with the same records, or an error with dst as it
// was; never a panic.
func FuzzAppendRecompressed(f *testing.F) {
	addVectorSeeds(f)
	var bld Builder
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Check(b)
		if err != nil || v.IsControl() {
			return
		}
		want, werr := v.RecordData(nil, fuzzLimit)
		for c := CompressionNone; c <= CompressionZstd; c++ {
			dst := []byte{1, 2, 3}
			out, err := bld.AppendRecompressed(dst, v, c, fuzzLimit)
			if err != nil {
				if werr == nil {
					t.Fatalf("%s: %v, though the records decompress", c, err)
				}
				if !bytes.Equal(out, []byte{1, 2, 3}) {
					t.Fatalf("%s: dst changed on error", c)
				}
				continue
			}
			got, err := Check(out[3:])
			if err != nil {
				t.Fatalf("%s: recompressed batch fails its check: %v", c, err)
			}
			data, err := got.RecordData(nil, fuzzLimit)
			if err != nil || !bytes.Equal(data, want) {
				t.Fatalf("%s: records differ after recompression (%v)", c, err)
			}
		}
	})
}
