package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Byte positions inside a legacy (magic 0/1) log entry (formats.md §2).
const (
	legacyOffSize      = 8
	legacyOffCRC       = 12
	legacyOffMagic     = 16
	legacyOffAttrs     = 17
	legacyOffTimestamp = 18
	legacyKeyLenV0     = 18
	legacyKeyLenV1     = 26
	legacyMinSizeV0    = 14
	legacyMinSizeV1    = 22
)

// LegacyMessage is one whole magic 0 or 1 log entry (offset, size and
// message: 12+size bytes) aliasing the caller's memory. Use ParseLegacy
// to obtain one; accessors on unchecked bytes may panic.
type LegacyMessage []byte

// ParseLegacy checks the framing of the magic 0/1 entry at the start of b
// and returns it (b is not copied; bytes after the entry are ignored).
// It fails with a *CorruptionError at position 0 if the size is below the
// minimum for the magic, b is shorter than the entry, the magic is not 0
// or 1, or the key and value lengths do not exactly fill the message. A
// CRC mismatch is not an error: see Valid.
func ParseLegacy(b []byte) (LegacyMessage, error) {
	if len(b) < LogOverhead {
		return nil, corruptf(0, "legacy entry needs %d bytes for offset and size, have %d", LogOverhead, len(b))
	}
	size := int64(int32(binary.BigEndian.Uint32(b[legacyOffSize:])))
	if size < legacyMinSizeV0 {
		return nil, corruptf(0, "legacy message size %d below the minimum %d", size, legacyMinSizeV0)
	}
	end := LogOverhead + size
	if int64(len(b)) < end {
		return nil, corruptf(0, "legacy entry needs %d bytes, have %d", end, len(b))
	}
	keyLenOff := int64(legacyKeyLenV0)
	switch magic := int8(b[legacyOffMagic]); magic {
	case 0:
	case 1:
		if size < legacyMinSizeV1 {
			return nil, corruptf(0, "magic 1 message size %d below the minimum %d", size, legacyMinSizeV1)
		}
		keyLenOff = legacyKeyLenV1
	default:
		return nil, corruptf(0, "legacy message magic %d, want 0 or 1", magic)
	}
	// The minimum sizes guarantee room for the key length.
	keyLen := int64(int32(binary.BigEndian.Uint32(b[keyLenOff:])))
	if keyLen < -1 {
		return nil, corruptf(0, "legacy key length %d", keyLen)
	}
	valueLenOff := keyLenOff + 4 + max(keyLen, 0)
	if valueLenOff+4 > end {
		return nil, corruptf(0, "legacy key of %d bytes runs past the message end", keyLen)
	}
	valueLen := int64(int32(binary.BigEndian.Uint32(b[valueLenOff:])))
	if valueLen < -1 {
		return nil, corruptf(0, "legacy value length %d", valueLen)
	}
	if valueEnd := valueLenOff + 4 + max(valueLen, 0); valueEnd != end {
		if valueEnd > end {
			return nil, corruptf(0, "legacy value of %d bytes runs past the message end", valueLen)
		}
		return nil, corruptf(0, "legacy message has %d bytes after its value", end-valueEnd)
	}
	return LegacyMessage(b[:end:end]), nil
}

// Offset is the entry's offset: the message's own absolute offset, or for
// a compressed wrapper the absolute offset of its last inner message (or
// a relative offset inside a magic 1 wrapper).
func (m LegacyMessage) Offset() int64 { return int64(binary.BigEndian.Uint64(m)) }

// Size is the whole entry size, 12 plus the size field.
func (m LegacyMessage) Size() int {
	return LogOverhead + int(int32(binary.BigEndian.Uint32(m[legacyOffSize:])))
}

// CRC is the stored CRC-32 (IEEE) of the message.
func (m LegacyMessage) CRC() uint32 { return binary.BigEndian.Uint32(m[legacyOffCRC:]) }

// ComputeCRC computes the CRC-32 (IEEE) over magic..end (formats.md §2.3).
func (m LegacyMessage) ComputeCRC() uint32 { return ChecksumIEEE(m[legacyOffMagic:]) }

// Valid reports whether the stored CRC matches the computed one.
func (m LegacyMessage) Valid() bool {
	return len(m) >= LogOverhead+legacyMinSizeV0 && m.CRC() == m.ComputeCRC()
}

// Magic is the message format version, 0 or 1.
func (m LegacyMessage) Magic() int8 { return int8(m[legacyOffMagic]) }

// Attributes is the raw attributes byte.
func (m LegacyMessage) Attributes() int8 { return int8(m[legacyOffAttrs]) }

// Compression is the codec from attribute bits 0-2.
func (m LegacyMessage) Compression() Compression {
	return Compression(m[legacyOffAttrs] & AttrCompressionMask)
}

// TimestampType is NoTimestampType for magic 0, else CreateTime or
// LogAppendTime from attribute bit 3.
func (m LegacyMessage) TimestampType() TimestampType {
	switch {
	case m.Magic() == 0:
		return NoTimestampType
	case m[legacyOffAttrs]&AttrTimestampType != 0:
		return LogAppendTime
	default:
		return CreateTime
	}
}

// Timestamp is the stored timestamp (magic 1), or -1 for magic 0.
func (m LegacyMessage) Timestamp() int64 {
	if m.Magic() == 0 {
		return NoTimestamp
	}
	return int64(binary.BigEndian.Uint64(m[legacyOffTimestamp:]))
}

func (m LegacyMessage) keyLenOff() int {
	if m.Magic() == 0 {
		return legacyKeyLenV0
	}
	return legacyKeyLenV1
}

// KeySize is the key length, -1 for a null key.
func (m LegacyMessage) KeySize() int32 {
	return int32(binary.BigEndian.Uint32(m[m.keyLenOff():]))
}

func (m LegacyMessage) valueLenOff() int {
	return m.keyLenOff() + 4 + int(max(m.KeySize(), 0))
}

// ValueSize is the value length, -1 for a null value.
func (m LegacyMessage) ValueSize() int32 {
	return int32(binary.BigEndian.Uint32(m[m.valueLenOff():]))
}

// Key is the key (aliasing m), nil if null.
func (m LegacyMessage) Key() []byte {
	n := m.KeySize()
	if n < 0 {
		return nil
	}
	off := m.keyLenOff() + 4
	return m[off : off+int(n) : off+int(n)]
}

// Value is the value (aliasing m), nil if null. For a compressed wrapper
// it holds the compressed inner message set.
func (m LegacyMessage) Value() []byte {
	n := m.ValueSize()
	if n < 0 {
		return nil
	}
	off := m.valueLenOff() + 4
	return m[off : off+int(n) : off+int(n)]
}

// LegacyInner is one message of a legacy entry as a reader sees it.
type LegacyInner struct {
	// Offset is the absolute offset of the message.
	Offset int64
	// Timestamp is the effective timestamp: the wrapper's for a magic 1
	// wrapper with LogAppendTime, -1 for magic 0, else the message's own.
	Timestamp int64
	// Message is the inner entry as stored (its Offset is relative inside
	// a magic 1 wrapper); it aliases the decompressed buffer.
	Message LegacyMessage
}

// AppendInner appends the messages m stands for to dst. For a compressed
// wrapper it decompresses the value (at most limit bytes), parses the
// inner message set and computes absolute offsets and effective
// timestamps as Kafka does (formats.md §2.4); for an uncompressed message
// it appends m itself. It fails with a *CorruptionError (position 0) on a
// null or undecodable value, zstd or an unknown codec, an empty or
// malformed inner set, a compressed inner message, or a magic 1 wrapper
// whose offset is below its last inner relative offset (and not 0). On
// error dst is returned unchanged.
func (m LegacyMessage) AppendInner(dst []LegacyInner, limit int) ([]LegacyInner, error) {
	c := m.Compression()
	if c == CompressionNone {
		return append(dst, LegacyInner{Offset: m.Offset(), Timestamp: m.Timestamp(), Message: m}), nil
	}
	if c == CompressionZstd {
		return dst, corruptf(0, "zstd is not allowed in a magic %d wrapper", m.Magic())
	}
	if !c.Valid() {
		return dst, corruptf(0, "unknown compression codec id %d in a magic %d wrapper", c, m.Magic())
	}
	value := m.Value()
	if value == nil {
		return dst, corruptf(0, "compressed magic %d wrapper has a null value", m.Magic())
	}
	set, err := appendDecompressed(nil, c, value, limit, m.Magic() == 0)
	if err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			ce.Reason = "wrapper value: " + ce.Reason
		}
		return dst, err
	}
	n := len(dst)
	for pos := 0; pos < len(set); {
		inner, err := ParseLegacy(set[pos:])
		if err != nil {
			var ce *CorruptionError
			if errors.As(err, &ce) {
				ce.Reason = fmt.Sprintf("inner message %d at decompressed byte %d: %s", len(dst)-n, pos, ce.Reason)
			}
			return dst[:n], err
		}
		if inner.Compression() != CompressionNone {
			return dst[:n], corruptf(0, "inner message %d is compressed (%s)", len(dst)-n, inner.Compression())
		}
		ts := inner.Timestamp()
		if inner.Magic() == 1 && m.Magic() == 1 && m.TimestampType() == LogAppendTime {
			ts = m.Timestamp()
		}
		dst = append(dst, LegacyInner{Offset: inner.Offset(), Timestamp: ts, Message: inner})
		pos += len(inner)
	}
	if len(dst) == n {
		return dst, corruptf(0, "compressed magic %d wrapper holds no messages", m.Magic())
	}
	if m.Magic() == 1 {
		wrapperOffset := m.Offset()
		lastInner := dst[len(dst)-1].Offset
		var base int64
		if wrapperOffset != 0 {
			if wrapperOffset < lastInner {
				return dst[:n], corruptf(0, "wrapper offset %d is less than the last inner relative offset %d and not 0", wrapperOffset, lastInner)
			}
			base = wrapperOffset - lastInner
		}
		for i := n; i < len(dst); i++ {
			dst[i].Offset += base
		}
	}
	return dst, nil
}
