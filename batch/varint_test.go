package batch

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"
)

func hexBytes(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// TestVarintSpecExamples checks the examples of formats.md §0.2 (a) for
// both the 32-bit and the 64-bit zig-zag encodings.
func TestVarintSpecExamples(t *testing.T) {
	tests := []struct {
		name string
		v    int32
		enc  string
	}{
		{"zero", 0, "00"},
		{"minus one", -1, "01"},
		{"one", 1, "02"},
		{"minus two", -2, "03"},
		{"63", 63, "7e"},
		{"minus 64", -64, "7f"},
		{"64", 64, "8001"},
		{"300", 300, "d804"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := hexBytes(t, tc.enc)
			if got := AppendVarint(nil, tc.v); !bytes.Equal(got, want) {
				t.Errorf("AppendVarint(%d) = %x, want %x", tc.v, got, want)
			}
			if got := AppendVarlong(nil, int64(tc.v)); !bytes.Equal(got, want) {
				t.Errorf("AppendVarlong(%d) = %x, want %x", tc.v, got, want)
			}
			if got := VarintSize(tc.v); got != len(want) {
				t.Errorf("VarintSize(%d) = %d, want %d", tc.v, got, len(want))
			}
			if got, n := ReadVarint(want); got != tc.v || n != len(want) {
				t.Errorf("ReadVarint(%x) = %d, %d; want %d, %d", want, got, n, tc.v, len(want))
			}
			if got, n := ReadVarlong(want); got != int64(tc.v) || n != len(want) {
				t.Errorf("ReadVarlong(%x) = %d, %d; want %d, %d", want, got, n, tc.v, len(want))
			}
		})
	}
}

// TestVarintAppendKeepsPrefix checks that the Append functions extend dst.
func TestVarintAppendKeepsPrefix(t *testing.T) {
	prefix := []byte{0xaa, 0xbb}
	if got := AppendVarint(bytes.Clone(prefix), 300); !bytes.Equal(got, []byte{0xaa, 0xbb, 0xd8, 0x04}) {
		t.Errorf("AppendVarint = %x", got)
	}
	if got := AppendVarlong(bytes.Clone(prefix), -1); !bytes.Equal(got, []byte{0xaa, 0xbb, 0x01}) {
		t.Errorf("AppendVarlong = %x", got)
	}
	if got := AppendUvarint(bytes.Clone(prefix), 128); !bytes.Equal(got, []byte{0xaa, 0xbb, 0x80, 0x01}) {
		t.Errorf("AppendUvarint = %x", got)
	}
}

func TestVarintRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		v    int32
		size int
	}{
		{"zero", 0, 1},
		{"largest 1 byte", 63, 1},
		{"smallest 1 byte", -64, 1},
		{"smallest positive 2 bytes", 64, 2},
		{"largest negative 2 bytes", -65, 2},
		{"largest 2 bytes", 8191, 2},
		{"3 bytes", 8192, 3},
		{"largest 4 bytes", 1<<27 - 1, 4},
		{"5 bytes", 1 << 27, 5},
		{"MaxInt32", math.MaxInt32, 5},
		{"MinInt32", math.MinInt32, 5},
		{"MinInt32+1", math.MinInt32 + 1, 5},
		{"MaxInt32-1", math.MaxInt32 - 1, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := AppendVarint(nil, tc.v)
			if len(enc) != tc.size {
				t.Errorf("AppendVarint(%d) = %x (%d bytes), want %d bytes", tc.v, enc, len(enc), tc.size)
			}
			if got := VarintSize(tc.v); got != len(enc) {
				t.Errorf("VarintSize(%d) = %d, encoding has %d bytes", tc.v, got, len(enc))
			}
			got, n := ReadVarint(enc)
			if got != tc.v || n != len(enc) {
				t.Errorf("ReadVarint(%x) = %d, %d; want %d, %d", enc, got, n, tc.v, len(enc))
			}
			// Extra bytes after the varint are not consumed.
			if got, n := ReadVarint(append(enc, 0xff, 0xff)); got != tc.v || n != len(enc) {
				t.Errorf("ReadVarint with trailing bytes = %d, %d; want %d, %d", got, n, tc.v, len(enc))
			}
			// The 64-bit encoding of a 32-bit value is the same.
			if l := AppendVarlong(nil, int64(tc.v)); !bytes.Equal(l, enc) {
				t.Errorf("AppendVarlong(%d) = %x, AppendVarint gave %x", tc.v, l, enc)
			}
		})
	}
}

func TestVarlongRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		v    int64
		size int
	}{
		{"zero", 0, 1},
		{"minus one", -1, 1},
		{"MaxInt32+1", math.MaxInt32 + 1, 5},
		{"MinInt32-1", math.MinInt32 - 1, 5},
		{"largest 9 bytes", 1<<62 - 1, 9},
		{"smallest 10 bytes", 1 << 62, 10},
		{"MaxInt64", math.MaxInt64, 10},
		{"MinInt64", math.MinInt64, 10},
		{"timestamp", 1700000000000, 6},
		{"negative timestamp delta", -1700000000000, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := AppendVarlong(nil, tc.v)
			if len(enc) != tc.size {
				t.Errorf("AppendVarlong(%d) = %x (%d bytes), want %d bytes", tc.v, enc, len(enc), tc.size)
			}
			if got := varlongSize(tc.v); got != len(enc) {
				t.Errorf("varlongSize(%d) = %d, encoding has %d bytes", tc.v, got, len(enc))
			}
			got, n := ReadVarlong(enc)
			if got != tc.v || n != len(enc) {
				t.Errorf("ReadVarlong(%x) = %d, %d; want %d, %d", enc, got, n, tc.v, len(enc))
			}
		})
	}
}

func TestUvarintRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		u    uint32
		enc  string
	}{
		{"zero", 0, "00"},
		{"one", 1, "01"},
		{"127", 127, "7f"},
		{"128", 128, "8001"},
		{"300", 300, "ac02"},
		{"16383", 16383, "ff7f"},
		{"16384", 16384, "808001"},
		{"32768", 32768, "808002"},
		{"MaxInt32", math.MaxInt32, "ffffffff07"},
		{"MaxUint32", math.MaxUint32, "ffffffff0f"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := hexBytes(t, tc.enc)
			if got := AppendUvarint(nil, tc.u); !bytes.Equal(got, want) {
				t.Errorf("AppendUvarint(%d) = %x, want %x", tc.u, got, want)
			}
			if got, n := ReadUvarint(want); got != tc.u || n != len(want) {
				t.Errorf("ReadUvarint(%x) = %d, %d; want %d, %d", want, got, n, tc.u, len(want))
			}
		})
	}
}

// TestReadVarintLenient checks what Kafka's readers accept beyond the
// minimal encoding: padded encodings and dropped high bits of the last byte.
func TestReadVarintLenient(t *testing.T) {
	tests := []struct {
		name string
		enc  string
		want int64
		n    int
		// which decoders to run
		varint, varlong, uvarint bool
	}{
		{"zero padded to 2 bytes", "8000", 0, 2, true, true, true},
		{"one padded to 5 bytes", "8280808000", 1, 5, true, true, false},
		{"minus one padded to 5 bytes", "8180808000", -1, 5, true, true, false},
		{"high bits of 5th byte dropped", "ffffffff7f", math.MinInt32, 5, true, false, false},
		{"5th byte 0x10 dropped entirely", "8080808010", 0, 5, true, false, false},
		{"zero padded to 10 bytes", "80808080808080808000", 0, 10, false, true, false},
		{"uvarint high bits of 5th byte dropped", "ffffffff7f", math.MaxUint32, 5, false, false, true},
		{"uvarint 1 padded", "8180808000", 1, 5, false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := hexBytes(t, tc.enc)
			if tc.varint {
				if v, n := ReadVarint(b); int64(v) != tc.want || n != tc.n {
					t.Errorf("ReadVarint(%x) = %d, %d; want %d, %d", b, v, n, tc.want, tc.n)
				}
			}
			if tc.varlong {
				if v, n := ReadVarlong(b); v != tc.want || n != tc.n {
					t.Errorf("ReadVarlong(%x) = %d, %d; want %d, %d", b, v, n, tc.want, tc.n)
				}
			}
			if tc.uvarint {
				if v, n := ReadUvarint(b); int64(v) != tc.want || n != tc.n {
					t.Errorf("ReadUvarint(%x) = %d, %d; want %d, %d", b, v, n, tc.want, tc.n)
				}
			}
		})
	}
}

// TestReadVarintMalformed checks too-long (n < 0) and truncated (n == 0)
// encodings for the three decoders.
func TestReadVarintMalformed(t *testing.T) {
	type reader struct {
		name string
		read func([]byte) int
	}
	varint := reader{"ReadVarint", func(b []byte) int { _, n := ReadVarint(b); return n }}
	varlong := reader{"ReadVarlong", func(b []byte) int { _, n := ReadVarlong(b); return n }}
	uvarint := reader{"ReadUvarint", func(b []byte) int { _, n := ReadUvarint(b); return n }}
	tests := []struct {
		name     string
		enc      string
		tooLong  bool
		decoders []reader
	}{
		{"empty", "", false, []reader{varint, varlong, uvarint}},
		{"continuation then end", "80", false, []reader{varint, varlong, uvarint}},
		{"four continuation bytes", "ffffffff", false, []reader{varint, varlong, uvarint}},
		{"five continuation bytes", "8080808080", true, []reader{varint, uvarint}},
		{"five continuation bytes then a terminator", "808080808000", true, []reader{varint, uvarint}},
		{"nine continuation bytes", "808080808080808080", false, []reader{varlong}},
		{"ten continuation bytes", "80808080808080808080", true, []reader{varlong}},
		{"ten continuation bytes then a terminator", "8080808080808080808001", true, []reader{varlong}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := hexBytes(t, tc.enc)
			for _, d := range tc.decoders {
				n := d.read(b)
				switch {
				case tc.tooLong && n >= 0:
					t.Errorf("%s(%x): n = %d, want < 0 (too long)", d.name, b, n)
				case !tc.tooLong && n != 0:
					t.Errorf("%s(%x): n = %d, want 0 (truncated)", d.name, b, n)
				}
			}
		})
	}
}

// TestVarintSizeAll compares VarintSize with the encoder on a sweep of
// values around every size boundary.
func TestVarintSizeAll(t *testing.T) {
	for shift := 0; shift < 32; shift++ {
		for _, base := range []int64{1 << shift, -(1 << shift)} {
			for d := int64(-2); d <= 2; d++ {
				v := base + d
				if v < math.MinInt32 || v > math.MaxInt32 {
					continue
				}
				enc := AppendVarint(nil, int32(v))
				if VarintSize(int32(v)) != len(enc) {
					t.Fatalf("VarintSize(%d) = %d, encoding %x", v, VarintSize(int32(v)), enc)
				}
				if got, n := ReadVarint(enc); int64(got) != v || n != len(enc) {
					t.Fatalf("ReadVarint(%x) = %d, %d; want %d", enc, got, n, v)
				}
			}
		}
	}
}
