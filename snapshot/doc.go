// Package snapshot reads and writes Kafka producer-state snapshot files
// (`<20-digit offset>.snapshot`), byte-compatible with Apache Kafka
// (docs/formats.md §5, producer-state.md §5).
//
// A snapshot named N holds the state of every producer after all batches
// with offset < N. The package only moves bytes: it does not expire
// producers, rebuild transactions or decide which snapshot to trust; the
// producer-state manager and recovery do that on top of Entry values.
//
// # File layout
//
// All integers are big-endian. The file is the ProducerSnapshot message,
// version 1, in Kafka's non-flexible encoding, prefixed by its version:
//
//	offset  width  field
//	     0      2  version       int16  (= 1)
//	     2      4  crc           uint32 CRC-32C (Castagnoli) of bytes [6, end of file)
//	     6      4  entryCount    int32  (>= 0)
//	    10   46*n  entries, back to back; no padding, no trailer
//
// Each 46-byte entry, in file order:
//
//	rel.  width  field
//	   0      8  ProducerID             int64
//	   8      2  ProducerEpoch          int16
//	  10      4  LastSequence           int32  (-1: no batch metadata)
//	  14      8  LastOffset             int64  (-1: no batch metadata)
//	  22      4  OffsetDelta            int32  (lastOffset - firstOffset of that batch; 0 if none)
//	  26      8  Timestamp              int64  (the producer's last timestamp)
//	  34      4  CoordinatorEpoch       int32  (-1: none seen)
//	  38      8  CurrentTxnFirstOffset  int64  (-1: no open transaction)
//
// So a valid file is exactly 10 + 46*entryCount bytes. Entry order carries
// no meaning (Kafka writes Java HashMap order); Decode preserves it and
// Encode writes entries in the order given, so a decoded file re-encodes to
// identical bytes.
//
// # Validation
//
// Decode applies Kafka's load-time checks in Kafka's order (formats.md
// §5.3): the version must be 1, the count must be non-negative and fit in
// the remaining bytes, and the stored CRC must match. It is stricter in one
// respect: trailing bytes after the last entry are rejected (Kafka's parser
// ignores them but still covers them with the CRC), so that every accepted
// file has exactly one encoding. Every failure is a *CorruptionError, and
// errors.Is(err, ErrCorrupt) holds for it; Decode never panics.
//
// # Files in a directory
//
// Kafka writes snapshots in place (create, write, maybe fsync), so a crash
// can leave a torn file that only the CRC catches. Write instead writes
// `<name>.snapshot.tmp`, fsyncs it, renames it over `<name>.snapshot` and
// fsyncs the directory (recovery.md §1.5 requires this of the engine). The
// temporary name is chosen so that Kafka ignores it (see filenames.Temp).
//
// List, Latest and NewestAtOrBelow see only canonical names (exactly 20
// ASCII digits + ".snapshot"). DeleteAbove, DeleteBelow and DeleteAtOrBelow
// remove files immediately and fsync the directory; together they express
// Kafka's rebuild rule "delete every snapshot with offset > T or <= log
// start" (recovery.md §2.11 step 3.1, producer-state.md §4.4 step 2) as
//
//	snapshot.DeleteAbove(dir, target)
//	snapshot.DeleteAtOrBelow(dir, logStartOffset)
//
// # Example
//
//	err := snapshot.Write(dir, 18, []snapshot.Entry{{ProducerID: 1000, ProducerEpoch: 5, ...}})
//	f, ok, err := snapshot.NewestAtOrBelow(dir, 18)
//	entries, err := snapshot.Read(f.Path)
//
// # Concurrency
//
// All functions are safe for concurrent use as long as no two goroutines
// write or delete snapshots of the same directory at the same time; the
// caller (the producer-state manager of a partition) serialises those.
package snapshot
