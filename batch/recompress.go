package batch

import "encoding/binary"

// AppendRecompressed appends to dst the batch v (whole, its CRC already
// checked) with its records compressed with c: what a leader stores when
// the topic's compression.type names a codec other than the producer's
// (Kafka's LogValidator recompresses such a batch). The header is v's,
// with only the codec bits of the attributes, the batch length and the
// CRC written anew; the records are v's, byte for byte, decompressed (at
// most limit bytes) and compressed again. Decompression errors are a
// *CorruptionError (ErrCorrupt) positioned in v; dst is then returned
// unchanged.
func (b *Builder) AppendRecompressed(dst []byte, v View, c Compression, limit int) ([]byte, error) {
	if !c.Valid() {
		return dst, ErrBuild
	}
	data, err := v.RecordData(b.scratch[:0], limit)
	if err != nil {
		return dst, err
	}
	if v.Compression() != CompressionNone {
		b.scratch = data // keep the grown buffer for the next call
	}
	start := len(dst)
	dst = append(dst, v[:HeaderSize]...)
	if dst, err = AppendCompressed(dst, c, data); err != nil {
		return dst[:start], err
	}
	size := len(dst) - start
	if size-LogOverhead > maxBatchLength {
		return dst[:start], ErrBuild
	}
	out := View(dst[start:])
	binary.BigEndian.PutUint32(out[OffBatchLength:], uint32(size-LogOverhead))
	out[OffAttributes+1] = out[OffAttributes+1]&^AttrCompressionMask | byte(c)
	binary.BigEndian.PutUint32(out[OffCRC:], out.ComputeCRC())
	return dst, nil
}
