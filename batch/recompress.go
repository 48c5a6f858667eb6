package batch

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
	dst[start+OffAttributes+1] = dst[start+OffAttributes+1]&^AttrCompressionMask | byte(c)
	if dst, err = AppendCompressed(dst, c, data); err != nil {
		return dst[:start], err
	}
	return finishBatch(dst, start)
}
