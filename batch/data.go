package batch

// RecordData returns v's records section in uncompressed form: the
// section itself (aliasing v) for an uncompressed batch, otherwise the
// section decompressed and appended to scratch[:0] (reuse scratch across
// calls to avoid allocating). limit caps the decompressed size.
func (v View) RecordData(scratch []byte, limit int) ([]byte, error) {
	if v.Compression() == CompressionNone {
		return v.RecordsSection(), nil
	}
	if v.RecordsCount() == 0 {
		// A batch without records is never decompressed: Kafka does not
		// look at its records section.
		return scratch[:0], nil
	}
	out, err := AppendDecompressed(scratch[:0], v.Compression(), v.RecordsSection(), limit)
	if err != nil {
		if ce, ok := err.(*CorruptionError); ok {
			ce.Pos += HeaderSize
		}
		return nil, err
	}
	return out, nil
}
