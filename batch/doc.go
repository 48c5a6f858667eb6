// Package batch is partlog's codec for Kafka record batches (magic 2) and
// the read-only decoder of legacy messages (magic 0 and 1). It works on
// the bytes where they are (a produce request, a mapped segment): a View
// is a []byte with accessors, validation computes the CRC once and never
// rewrites it, and the only fields ever changed in place are the two the
// CRC does not cover. Formats: docs/formats.md §0–§3.
//
// The v2 batch header (61 bytes, big-endian; Kafka format, do not change):
//
//	 0  baseOffset            int64   offset of the first record slot          ┐ not covered
//	 8  batchLength           int32   bytes after this field (size - 12)       │ by the CRC;
//	12  partitionLeaderEpoch  int32   set by the leader on append              │ SetBaseOffset and
//	16  magic                 int8    2                                        │ SetPartitionLeaderEpoch
//	17  crc                   uint32  CRC-32C of bytes [21, end)               ┘ write 0-7 and 12-15
//	21  attributes            int16   bits 0-2 codec, 3 LogAppendTime, 4 transactional,
//	                                  5 control, 6 delete horizon (Kafka reads byte 22 only)
//	23  lastOffsetDelta       int32   lastOffset - baseOffset
//	27  baseTimestamp         int64   first record's timestamp (or delete horizon)
//	35  maxTimestamp          int64   largest timestamp, or the append time
//	43  producerId            int64   -1 if none
//	51  producerEpoch         int16   -1 if none
//	53  baseSequence          int32   -1 if none
//	57  recordsCount          int32
//	61  records               ...     recordsCount records, compressed as one stream
//	                                  when the codec is not none
//
// Each record (uncompressed; every length is a zig-zag varint):
//
//	length | attributes int8 | timestampDelta varlong | offsetDelta varint |
//	keyLength, key | valueLength, value | headerCount | headers (keyLength, key, valueLength, value)...
//
// A length of -1 is null. Control batches (attribute bit 5) hold one
// record whose 4-byte key is version int16 + type int16 (ControlType) and
// whose value depends on the type: an EndTxnMarker for ABORT/COMMIT, a
// flexible-version message for KRaft types 2-6 and for
// MIRROR_PID_RESET (type 7), the cluster-mirroring barrier.
//
// Typical use:
//
//	it := batch.NewIterator(request, 0)
//	for v, ok := it.Next(); ok; v, ok = it.Next() {
//		// v.BaseOffset(), v.ProducerID(), v.RecordsCount(), ...
//	}
//	if err := it.Err(); batch.IsTornTail(err) { ... } else if batch.IsCorrupt(err) { ... }
//
// Errors: every decoding failure satisfies errors.Is(err, ErrCorrupt) and
// is a *CorruptionError carrying the position; a region that ends inside
// a batch or in zero padding yields a *TornTailError (ErrTornTail)
// instead, so a log can tell an interrupted append from damage. No input
// makes this package panic.
//
// Concurrency: Views, Iterators and RecordIterators are plain values over
// caller-owned bytes; they may be used from many goroutines as long as the
// bytes are not written concurrently. A Builder is not safe for concurrent
// use. The CRC-32C is internal/crc32c's (hash/crc32; see BenchmarkCRC32C).
package batch
