// Package partlog is a storage engine for Kafka-format partition logs.
// A Log is one partition directory whose files are byte-compatible with
// Apache Kafka's: 20-digit named segments, each a .log of record batches
// (magic 2) with its .index, .timeindex and .txnindex, and a
// leader-epoch-checkpoint. A Dir is a whole log directory (Kafka's
// log.dirs entry) with its checkpoints. The repository's docs/ folder
// describes the formats (formats.md), opening and recovery (recovery.md),
// producer state (producer-state.md), mirroring (mirror.md) and the
// options against Kafka's configuration names (options.md); "§" references
// in the documentation point there.
//
//	l, err := partlog.Open("/data/orders-0", nil) // nil: Kafka's defaults
//	info, err := l.AppendAsLeader(produceRequestBytes, leaderEpoch)
//	view, err := l.Read(offset, 1<<20, l.HighWatermark())
//	// ... send view.Records ...
//	view.Release()
//	err = l.Flush() // durable up to LogEndOffset
//	err = l.Close()
//
// The append path (invariants):
//
//  1. Every batch is validated where it lies (batch.Check: framing,
//     magic, CRC-32C, header rules; for a leader Kafka's client rules):
//     one CRC per batch, never recomputed, nothing written if any batch
//     fails.
//  2. The active segment copies each batch into its mapping, header first,
//     and writes only the two fields outside the CRC (base offset, leader
//     epoch) in the copy; the caller's bytes are never modified.
//  3. The segment publishes its new size, then the log its new end offset,
//     both with atomic stores: a reader bounded by them never meets a
//     partial batch.
//  4. Nothing on this path allocates (AppendAsLeader/AppendAsFollower
//     report 0 allocs/op; a test guards it).
//
// Rejected design: copying the whole append and stamping the headers
// afterwards is one memmove instead of two per batch, but a crash between
// the copy and the stamp leaves a CRC-valid batch with the client's
// offsets behind the published end, which recovery would admit
// (recovery.md §9 item 7).
//
// What a broker needs beside appends and reads: Offsets (one consistent
// reading of log start, high watermark, last stable offset, log end and
// recovery point; the high watermark persists in the log directory's
// replication-offset-checkpoint), WaitLogEndOffset and WaitHighWatermark
// (long-poll and delayed fetches), OffsetForTimestamp (ListOffsets),
// EndOffsetForEpoch and TruncateAt (a follower's OffsetForLeaderEpoch and
// truncation), DeleteOldSegments, Size and SegmentInfos (retention),
// Dir.Create and Dir.Delete (partitions with their topic ids), and
// KafkaErrorCode (the Kafka error code for every error returned).
//
// Compacted topics (Options.CleanupPolicy Compact or CompactDelete): a
// Cleaner (package cleaner; DefaultCleaner, shared by the process) cleans
// each compacted log when it is due, with Kafka's rules and the mirroring
// barrier always kept; Compact cleans one now; CleanerCheckpoint is the
// cleaner-offset-checkpoint entry a Dir persists.
//
// Concurrency: one appender at a time, any number of concurrent readers.
// See the Log type for which lock guards what, and the lock order.
//
// Durability: appends are durable once Flush returns (fdatasync of every
// segment from the recovery point on, then the directory), as Kafka's
// default of no fsync per append. A failed flush poisons the log.
//
// Mappings: active segments are preallocated with fallocate and mapped
// read-write; sealed segments are mapped read-only on demand, their
// mappings bounded by a process-wide MappingCache (ristretto) and unmapped
// only after the last reader releases its view.
package partlog
