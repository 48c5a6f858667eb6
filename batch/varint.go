package batch

// Zig-zag varints of v2 records (formats.md §0.2 (a)) and the unsigned
// varints of flexible-version control values (§0.2 (b)). Go's
// encoding/binary varints are not used for the 32-bit fields: they decode
// 64-bit quantities and would accept values that overflow int32.

// AppendVarint appends the minimal zig-zag encoding of v.
func AppendVarint(b []byte, v int32) []byte {
	u := uint32(v<<1) ^ uint32(v>>31)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// AppendVarlong appends the minimal zig-zag encoding of v.
func AppendVarlong(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// AppendUvarint appends the unsigned LEB128 encoding of u.
func AppendUvarint(b []byte, u uint32) []byte {
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// VarintSize is the number of bytes AppendVarint writes for v.
func VarintSize(v int32) int {
	u := uint32(v<<1) ^ uint32(v>>31)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// ReadVarint decodes a zig-zag varint at the start of b. It returns the
// value and the number of bytes read; n == 0 means b ended first, n < 0
// means the encoding ran past 5 bytes ("Varint is too long"). Like Kafka,
// bits of the 5th byte above the 32nd are dropped and non-minimal
// encodings are accepted.
func ReadVarint(b []byte) (v int32, n int) {
	// The one-byte form first (most of a record's deltas and lengths),
	// then one loop: together at the inliner's budget, so that both
	// inline into the record walk; a longer body stops that.
	if len(b) > 0 && b[0] < 0x80 {
		return int32(b[0]>>1) ^ -int32(b[0]&1), 1
	}
	var u uint32
	for i, c := range b {
		// i ≤ 4: the mask only tells the compiler the shift is in range.
		u |= uint32(c&0x7f) << (7 * uint(i) & 31)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
		if i == 4 {
			return 0, -1
		}
	}
	return 0, 0
}

// ReadVarlong decodes a zig-zag varlong (at most 10 bytes), with the same
// conventions as ReadVarint.
func ReadVarlong(b []byte) (v int64, n int) {
	// As ReadVarint: the one-byte form first, within the inliner's budget.
	if len(b) > 0 && b[0] < 0x80 {
		return int64(b[0]>>1) ^ -int64(b[0]&1), 1
	}
	var u uint64
	for i, c := range b {
		u |= uint64(c&0x7f) << (7 * uint(i) & 63) // i ≤ 9
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
		if i == 9 {
			return 0, -1
		}
	}
	return 0, 0
}

// ReadUvarint decodes an unsigned LEB128 32-bit value (at most 5 bytes),
// with the same conventions as ReadVarint.
func ReadUvarint(b []byte) (u uint32, n int) {
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		u |= uint32(c&0x7f) << (7 * uint(i))
		if c < 0x80 {
			return u, i + 1
		}
	}
	return 0, -1
}
