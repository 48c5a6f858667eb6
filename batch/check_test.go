package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// build encodes one batch with a fresh Builder and fails the test on error.
func mustBuild(t testing.TB, spec BatchSpec, explicitDeltas bool, recs ...RecordSpec) []byte {
	t.Helper()
	b := Builder{ExplicitOffsetDeltas: explicitDeltas}
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatalf("AppendBatch(%+v): %v", spec, err)
	}
	return out
}

// fixCRC recomputes and stores the CRC of the batch at the start of b.
func fixCRC(b []byte) {
	v := View(b[:LogOverhead+int(int32(binary.BigEndian.Uint32(b[OffBatchLength:])))])
	binary.BigEndian.PutUint32(b[OffCRC:], v.ComputeCRC())
}

func putBE16(b []byte, off int, v int16) { binary.BigEndian.PutUint16(b[off:], uint16(v)) }
func putBE32(b []byte, off int, v int32) { binary.BigEndian.PutUint32(b[off:], uint32(v)) }

// idempotentSpec is a producer batch spec used by the damage tests.
func idempotentSpec(base int64) BatchSpec {
	s := NewBatchSpec(base)
	s.PartitionLeaderEpoch = 4
	s.ProducerID = 77
	s.ProducerEpoch = 3
	s.BaseSequence = 10
	return s
}

// threeRecords returns three small records with increasing timestamps.
func threeRecords() []RecordSpec {
	return []RecordSpec{
		{Timestamp: 1000, Key: []byte("k0"), Value: []byte("v0")},
		{Timestamp: 1001, Key: nil, Value: []byte("value-1")},
		{Timestamp: 1002, Key: []byte{}, Value: nil, Headers: []Header{{Key: []byte("h"), Value: []byte("x")}}},
	}
}

// validBatch is a three-record idempotent uncompressed batch.
func validBatch(t testing.TB) []byte {
	t.Helper()
	return mustBuild(t, idempotentSpec(100), false, threeRecords()...)
}

// sparseBatch has three records at deltas 0, 4, 10 and lastOffsetDelta 10,
// so that the record count can be raised without breaking count ≤ lod+1.
func sparseBatch(t testing.TB) []byte {
	t.Helper()
	spec := idempotentSpec(100)
	spec.LastOffsetDelta, spec.HasLastOffsetDelta = 10, true
	recs := threeRecords()
	recs[0].OffsetDelta, recs[1].OffsetDelta, recs[2].OffsetDelta = 0, 4, 10
	return mustBuild(t, spec, true, recs...)
}

type errKind int

const (
	kindOK errKind = iota
	kindTorn
	kindCorrupt
)

func (k errKind) String() string {
	return [...]string{"valid", "torn tail", "corrupt"}[k]
}

// classify checks that err is nil, or exactly one of corrupt and torn, and
// returns which.
func classify(t testing.TB, err error) errKind {
	t.Helper()
	if err == nil {
		return kindOK
	}
	c, tt := IsCorrupt(err), IsTornTail(err)
	if c == tt {
		t.Fatalf("error %v: IsCorrupt=%v IsTornTail=%v, want exactly one", err, c, tt)
	}
	var ce *CorruptionError
	var te *TornTailError
	if c && !errors.As(err, &ce) {
		t.Fatalf("corrupt error %T is not a *CorruptionError", err)
	}
	if tt && !errors.As(err, &te) {
		t.Fatalf("torn tail error %T is not a *TornTailError", err)
	}
	if c {
		return kindCorrupt
	}
	return kindTorn
}

func TestCheckClassification(t *testing.T) {
	tests := []struct {
		name   string
		input  func(t testing.TB) []byte
		want   errKind
		zero   bool   // for torn tails: TornTailError.Zero
		reason string // substring of the error text, if not empty
		frame  bool   // Frame must succeed (legacy entries)
	}{
		{
			name:  "valid",
			input: validBatch,
			want:  kindOK,
		},
		{
			name:  "valid with trailing bytes",
			input: func(t testing.TB) []byte { return append(validBatch(t), 1, 2, 3) },
			want:  kindOK,
		},
		{
			name: "empty compacted batch",
			input: func(t testing.TB) []byte {
				s := idempotentSpec(5)
				s.LastOffsetDelta, s.HasLastOffsetDelta = 9, true
				s.MaxTimestamp, s.HasMaxTimestamp = 1234, true
				return mustBuild(t, s, false)
			},
			want: kindOK,
		},
		{
			name:  "compacted: fewer records than lastOffsetDelta+1",
			input: sparseBatch,
			want:  kindOK,
		},
		{
			name: "attributes high byte set is ignored",
			input: func(t testing.TB) []byte {
				b := validBatch(t)
				b[OffAttributes] = 0xff
				fixCRC(b)
				return b
			},
			want: kindOK,
		},
		{
			name: "compressed section smaller than 7 bytes per record",
			input: func(t testing.TB) []byte {
				recs := make([]RecordSpec, 200)
				for i := range recs {
					recs[i].Timestamp = 5
				}
				s := NewBatchSpec(0)
				s.Compression = CompressionGzip
				b := mustBuild(t, s, false, recs...)
				if len(b)-HeaderSize >= 7*len(recs) {
					t.Fatalf("gzip section of %d bytes does not exercise the rule", len(b)-HeaderSize)
				}
				return b
			},
			want: kindOK,
		},
		{
			name: "producer epoch and base sequence -1",
			input: func(t testing.TB) []byte {
				return mustBuild(t, NewBatchSpec(0), false, threeRecords()...)
			},
			want: kindOK,
		},
		{
			name:  "17 bytes of a batch",
			input: func(t testing.TB) []byte { return validBatch(t)[:17] },
			want:  kindTorn,
		},
		{
			name:  "1 byte",
			input: func(t testing.TB) []byte { return []byte{2} },
			want:  kindTorn,
		},
		{
			name:  "17 zero bytes",
			input: func(t testing.TB) []byte { return make([]byte, 17) },
			want:  kindTorn,
			zero:  true,
		},
		{
			name:  "all-zero region",
			input: func(t testing.TB) []byte { return make([]byte, 4096) },
			want:  kindTorn,
			zero:  true,
		},
		{
			name:  "18 zero bytes",
			input: func(t testing.TB) []byte { return make([]byte, 18) },
			want:  kindTorn,
			zero:  true,
		},
		{
			name: "length 13",
			input: func(t testing.TB) []byte {
				b := validBatch(t)
				putBE32(b, OffBatchLength, 13)
				return b
			},
			want:   kindCorrupt,
			reason: "smaller than 14",
		},
		{
			name: "negative length",
			input: func(t testing.TB) []byte {
				b := validBatch(t)
				putBE32(b, OffBatchLength, -1)
				return b
			},
			want: kindCorrupt,
		},
		{
			name: "length 0 with a non-zero base offset",
			input: func(t testing.TB) []byte {
				b := make([]byte, 100)
				b[7] = 1
				return b
			},
			want: kindCorrupt,
		},
		{
			name: "zero header followed by non-zero bytes",
			input: func(t testing.TB) []byte {
				return append(make([]byte, HeaderSize), validBatch(t)...)
			},
			want:   kindCorrupt,
			reason: "zero-filled hole",
		},
		{
			name: "zero header then a single non-zero byte far away",
			input: func(t testing.TB) []byte {
				b := make([]byte, 4096)
				b[4000] = 1
				return b
			},
			want: kindCorrupt,
		},
		{
			name:  "length past the end by one byte",
			input: func(t testing.TB) []byte { b := validBatch(t); return b[:len(b)-1] },
			want:  kindTorn,
		},
		{
			name:  "only 18 bytes of the batch",
			input: func(t testing.TB) []byte { return validBatch(t)[:18] },
			want:  kindTorn,
		},
		{
			name: "length past the end, zero tail after the header",
			input: func(t testing.TB) []byte {
				b := validBatch(t)
				clear(b[HeaderSize:])
				return b[:len(b)-1]
			},
			want: kindTorn,
		},
		{
			name:   "magic 0",
			input:  func(t testing.TB) []byte { b := validBatch(t); b[OffMagic] = 0; return b },
			want:   kindCorrupt,
			reason: "legacy",
			frame:  true,
		},
		{
			name:   "magic 1",
			input:  func(t testing.TB) []byte { b := validBatch(t); b[OffMagic] = 1; return b },
			want:   kindCorrupt,
			reason: "legacy",
			frame:  true,
		},
		{
			name: "magic 1 with a 26-byte entry",
			input: func(t testing.TB) []byte {
				b := make([]byte, 26)
				putBE32(b, OffBatchLength, 14)
				b[OffMagic] = 1
				return b
			},
			want:   kindCorrupt,
			reason: "legacy",
			frame:  true,
		},
		{
			name:   "magic 3",
			input:  func(t testing.TB) []byte { b := validBatch(t); b[OffMagic] = 3; return b },
			want:   kindCorrupt,
			reason: "magic 3",
			frame:  true,
		},
		{
			name:   "magic 255",
			input:  func(t testing.TB) []byte { b := validBatch(t); b[OffMagic] = 255; return b },
			want:   kindCorrupt,
			reason: "magic -1",
			frame:  true,
		},
		{
			name: "size 60 with magic 2",
			input: func(t testing.TB) []byte {
				b := validBatch(t)[:60]
				putBE32(b, OffBatchLength, 48)
				return b
			},
			want:   kindCorrupt,
			reason: "smaller than the 61-byte header",
		},
		{
			name: "size 26 with magic 2",
			input: func(t testing.TB) []byte {
				b := validBatch(t)[:26]
				putBE32(b, OffBatchLength, 14)
				return b
			},
			want:   kindCorrupt,
			reason: "smaller than the 61-byte header",
		},
		{
			name:   "crc byte flipped",
			input:  func(t testing.TB) []byte { b := validBatch(t); b[OffCRC+3] ^= 0x01; return b },
			want:   kindCorrupt,
			reason: "crc mismatch",
		},
		{
			name:   "last record byte flipped",
			input:  func(t testing.TB) []byte { b := validBatch(t); b[len(b)-1] ^= 0x80; return b },
			want:   kindCorrupt,
			reason: "crc mismatch",
		},
		{
			name: "crc over the batch only, not the trailing bytes",
			input: func(t testing.TB) []byte {
				b := validBatch(t)
				return append(b, 0xde, 0xad)
			},
			want: kindOK,
		},
		{
			name:   "codec 5",
			input:  func(t testing.TB) []byte { return withAttrs(validBatch(t), 5) },
			want:   kindCorrupt,
			reason: "compression codec id 5",
		},
		{
			name:   "codec 6",
			input:  func(t testing.TB) []byte { return withAttrs(validBatch(t), 6) },
			want:   kindCorrupt,
			reason: "compression codec id 6",
		},
		{
			name:   "codec 7",
			input:  func(t testing.TB) []byte { return withAttrs(validBatch(t), 7|AttrTransactional) },
			want:   kindCorrupt,
			reason: "compression codec id 7",
		},
		{
			name:   "negative record count",
			input:  func(t testing.TB) []byte { return withField32(validBatch(t), OffRecordsCount, -1) },
			want:   kindCorrupt,
			reason: "invalid record count -1",
		},
		{
			name: "negative lastOffsetDelta",
			input: func(t testing.TB) []byte {
				b := mustBuild(t, idempotentSpec(3), false) // no records
				return withField32(b, OffLastOffsetDelta, -1)
			},
			want:   kindCorrupt,
			reason: "invalid last offset delta -1",
		},
		{
			name:   "count greater than lastOffsetDelta+1",
			input:  func(t testing.TB) []byte { return withField32(validBatch(t), OffLastOffsetDelta, 1) },
			want:   kindCorrupt,
			reason: "exceeds last offset delta",
		},
		{
			name:   "too many records for the section",
			input:  func(t testing.TB) []byte { return withField32(sparseBatch(t), OffRecordsCount, 11) },
			want:   kindCorrupt,
			reason: "cannot fit",
		},
		{
			name: "producer epoch -2",
			input: func(t testing.TB) []byte {
				b := validBatch(t)
				putBE16(b, OffProducerEpoch, -2)
				fixCRC(b)
				return b
			},
			want:   kindCorrupt,
			reason: "producer epoch -2",
		},
		{
			name:   "base sequence -2",
			input:  func(t testing.TB) []byte { return withField32(validBatch(t), OffBaseSequence, -2) },
			want:   kindCorrupt,
			reason: "base sequence -2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.input(t)
			v, err := Check(in)
			if got := classify(t, err); got != tc.want {
				t.Fatalf("Check = %v (%v), want %v", got, err, tc.want)
			}
			switch tc.want {
			case kindOK:
				size := LogOverhead + int(binary.BigEndian.Uint32(in[OffBatchLength:]))
				if len(v) != size || cap(v) != size || &v[0] != &in[0] {
					t.Errorf("View has len %d cap %d, want %d aliasing the input", len(v), cap(v), size)
				}
			case kindTorn:
				var te *TornTailError
				errors.As(err, &te)
				if te.Zero != tc.zero {
					t.Errorf("Zero = %v, want %v (%v)", te.Zero, tc.zero, err)
				}
				if te.Position != 0 || te.Remaining != int64(len(in)) {
					t.Errorf("Position %d Remaining %d, want 0 and %d", te.Position, te.Remaining, len(in))
				}
			case kindCorrupt:
				var ce *CorruptionError
				errors.As(err, &ce)
				if ce.Pos != 0 {
					t.Errorf("Position = %d, want 0", ce.Pos)
				}
			}
			if tc.want != kindOK && v != nil {
				t.Errorf("Check returned a View (%d bytes) with an error", len(v))
			}
			if tc.reason != "" && !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q does not mention %q", err, tc.reason)
			}
			if tc.frame {
				n, ferr := Frame(in)
				if ferr != nil || n != len(in) {
					t.Errorf("Frame = %d, %v; want %d, nil", n, ferr, len(in))
				}
			}
		})
	}
}

// withAttrs sets the low attributes byte and fixes the CRC.
func withAttrs(b []byte, attrs byte) []byte {
	b[OffAttributes+1] = attrs
	fixCRC(b)
	return b
}

// withField32 sets an int32 header field and fixes the CRC.
func withField32(b []byte, off int, v int32) []byte {
	putBE32(b, off, v)
	fixCRC(b)
	return b
}

// TestCheckEveryCoveredHeaderByte flips each bit-range of [21, 61) and
// expects the CRC rule to fire before any field rule.
func TestCheckEveryCoveredHeaderByte(t *testing.T) {
	orig := validBatch(t)
	for i := OffAttributes; i < HeaderSize; i++ {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(orig)
			b[i] ^= mask
			_, err := Check(b)
			if classify(t, err) != kindCorrupt || !strings.Contains(err.Error(), "crc mismatch") {
				t.Errorf("byte %d ^ %#02x: Check = %v, want crc mismatch", i, mask, err)
			}
		}
	}
}

// TestCheckUncoveredFieldsIgnoreCRC flips the bytes outside the CRC that
// do not affect framing: any value there keeps the batch valid.
func TestCheckUncoveredFieldsIgnoreCRC(t *testing.T) {
	orig := validBatch(t)
	for i := range OffBatchLength {
		b := bytes.Clone(orig)
		b[i] ^= 0xff
		if _, err := Check(b); err != nil {
			t.Errorf("base offset byte %d flipped: %v", i, err)
		}
	}
	for i := OffPartitionLeaderEpoch; i < OffMagic; i++ {
		b := bytes.Clone(orig)
		b[i] ^= 0xff
		if _, err := Check(b); err != nil {
			t.Errorf("leader epoch byte %d flipped: %v", i, err)
		}
	}
}

// TestIteratorPositions damages the third batch of a region at base 1000
// and checks the error position, Position() and Offset().
func TestIteratorPositions(t *testing.T) {
	const base = 1000
	mk := func(t testing.TB, off int64) []byte {
		return mustBuild(t, idempotentSpec(off), false, threeRecords()...)
	}
	b1, b2, b3, b4 := mk(t, 0), mk(t, 3), mk(t, 6), mk(t, 9)
	prefix := len(b1) + len(b2)
	tests := []struct {
		name      string
		region    []byte
		batches   int
		end       int // Offset() after the last Next
		want      errKind
		zero      bool
		remaining int64 // for torn tails
	}{
		{"four valid batches", joinBytes(b1, b2, b3, b4), 4, prefix + len(b3) + len(b4), kindOK, false, 0},
		{"empty region", nil, 0, 0, kindOK, false, 0},
		{"crc of the third batch damaged", joinBytes(b1, b2, flippedCopy(b3, 30), b4), 2, prefix, kindCorrupt, false, 0},
		{"third batch has magic 1", joinBytes(b1, b2, withByteCopy(b3, OffMagic, 1), b4), 2, prefix, kindCorrupt, false, 0},
		{"third batch torn", joinBytes(b1, b2, b3[:len(b3)-5]), 2, prefix, kindTorn, false, int64(len(b3) - 5)},
		{"third batch torn inside its first 17 bytes", joinBytes(b1, b2, b3[:10]), 2, prefix, kindTorn, false, 10},
		{"zero padding after two batches", joinBytes(b1, b2, make([]byte, 777)), 2, prefix, kindTorn, true, 777},
		{"zero hole after two batches", joinBytes(b1, b2, make([]byte, 100), b4), 2, prefix, kindCorrupt, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it := NewIterator(tc.region, base)
			n := 0
			at := 0
			for v, ok := it.Next(); ok; v, ok = it.Next() {
				if &v[0] != &tc.region[at] {
					t.Fatalf("batch %d does not alias the region at %d", n, at)
				}
				at += len(v)
				n++
			}
			if n != tc.batches {
				t.Errorf("%d batches, want %d", n, tc.batches)
			}
			if it.Offset() != tc.end || it.Position() != base+int64(tc.end) {
				t.Errorf("Offset %d Position %d, want %d and %d", it.Offset(), it.Position(), tc.end, base+tc.end)
			}
			err := it.Err()
			if got := classify(t, err); got != tc.want {
				t.Fatalf("Err = %v (%v), want %v", got, err, tc.want)
			}
			switch tc.want {
			case kindCorrupt:
				var ce *CorruptionError
				errors.As(err, &ce)
				if ce.Pos != base+int64(prefix) {
					t.Errorf("CorruptionError.Position = %d, want %d", ce.Pos, base+prefix)
				}
			case kindTorn:
				var te *TornTailError
				errors.As(err, &te)
				if te.Position != base+int64(prefix) || te.Remaining != tc.remaining || te.Zero != tc.zero {
					t.Errorf("TornTailError{Position %d Remaining %d Zero %v}, want {%d %d %v}",
						te.Position, te.Remaining, te.Zero, base+prefix, tc.remaining, tc.zero)
				}
			}
			// A walk with CheckAt (what the append path does instead of an
			// Iterator) sees the same batches, headers and error.
			var h BatchHeader
			walked, p := 0, 0
			var werr error
			for p < len(tc.region) {
				v, err := CheckAt(tc.region[p:], base+int64(p), &h)
				if err != nil {
					werr = err
					break
				}
				var want BatchHeader
				v.DecodeHeader(&want)
				if h != want || &v[0] != &tc.region[p] {
					t.Fatalf("CheckAt at %d: header %+v, want %+v", p, h, want)
				}
				p += len(v)
				walked++
			}
			if walked != n || p != tc.end || (werr == nil) != (err == nil) || werr != nil && werr.Error() != err.Error() {
				t.Errorf("CheckAt walk: %d batches to %d, %v; Iterator: %d to %d, %v", walked, p, werr, n, tc.end, err)
			}
			// Next stays false and the error sticks.
			if _, ok := it.Next(); ok {
				t.Error("Next returned a batch after the end")
			}
			if it.Err() != err {
				t.Errorf("Err changed from %v to %v", err, it.Err())
			}
		})
	}
}

func flippedCopy(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 0xff; return c }

func withByteCopy(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }

// TestSettersKeepBatchValid checks that the fields a broker rewrites lie
// outside the CRC.
func TestSettersKeepBatchValid(t *testing.T) {
	orig := sparseBatch(t) // lastOffsetDelta 10
	tests := []struct {
		name             string
		set              func(View)
		base, last       int64
		epoch            int32
		changedFrom, end int // only bytes [changedFrom, end) may differ
	}{
		{"SetBaseOffset", func(v View) { v.SetBaseOffset(1 << 40) }, 1 << 40, 1<<40 + 10, 4, OffBaseOffset, OffBatchLength},
		{"SetBaseOffset negative", func(v View) { v.SetBaseOffset(-5) }, -5, 5, 4, OffBaseOffset, OffBatchLength},
		{"SetLastOffset", func(v View) { v.SetLastOffset(500) }, 490, 500, 4, OffBaseOffset, OffBatchLength},
		{"SetPartitionLeaderEpoch", func(v View) { v.SetPartitionLeaderEpoch(123456) }, 100, 110, 123456, OffPartitionLeaderEpoch, OffMagic},
		{"SetPartitionLeaderEpoch -1", func(v View) { v.SetPartitionLeaderEpoch(-1) }, 100, 110, -1, OffPartitionLeaderEpoch, OffMagic},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(orig)
			v, err := Check(b)
			if err != nil {
				t.Fatal(err)
			}
			crc := v.CRC()
			tc.set(v)
			if v.BaseOffset() != tc.base || v.LastOffset() != tc.last || v.NextOffset() != tc.last+1 || v.PartitionLeaderEpoch() != tc.epoch {
				t.Errorf("base %d last %d next %d epoch %d, want %d %d %d %d",
					v.BaseOffset(), v.LastOffset(), v.NextOffset(), v.PartitionLeaderEpoch(), tc.base, tc.last, tc.last+1, tc.epoch)
			}
			if v.CRC() != crc {
				t.Errorf("CRC changed from %#x to %#x", crc, v.CRC())
			}
			for i := range b {
				if (i < tc.changedFrom || i >= tc.end) && b[i] != orig[i] {
					t.Errorf("byte %d changed from %#02x to %#02x", i, orig[i], b[i])
				}
			}
			if _, err := Check(b); err != nil {
				t.Errorf("Check after %s: %v", tc.name, err)
			}
			data, err := v.RecordData(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckRecords(v, data, false); err != nil {
				t.Errorf("CheckRecords after %s: %v", tc.name, err)
			}
		})
	}
}

// TestFrameLegacyAndV2 checks that Frame steps over entries whatever their
// magic and applies only the framing rules.
func TestFrameLegacyAndV2(t *testing.T) {
	b := validBatch(t)
	if n, err := Frame(b); err != nil || n != len(b) {
		t.Errorf("Frame(valid) = %d, %v", n, err)
	}
	bad := flippedCopy(b, 40) // CRC no longer matches: Frame does not care
	if n, err := Frame(bad); err != nil || n != len(b) {
		t.Errorf("Frame(bad crc) = %d, %v", n, err)
	}
	if _, err := Frame(b[:len(b)-1]); classify(t, err) != kindTorn {
		t.Errorf("Frame(truncated) = %v, want torn tail", err)
	}
	short := bytes.Clone(b)
	putBE32(short, OffBatchLength, 5)
	if _, err := Frame(short); classify(t, err) != kindCorrupt {
		t.Errorf("Frame(length 5) = %v, want corrupt", err)
	}
}
