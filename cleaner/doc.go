// Package cleaner is the log cleaner of compacted logs
// (cleanup.policy=compact): Kafka's LogCleaner, Cleaner and
// LogCleanerManager rules, with the mirroring barrier always kept. The
// root package gives it a log (Round), installs what it writes, and
// schedules it on a Pool shared by every log of the process.
//
// # Sections of a log
//
// The clean section runs from the log start to the first dirty offset
// (the log's cleaner-offset-checkpoint entry: where the last round's
// offset map ended); the dirty section from there to the first
// uncleanable offset; the uncleanable section from there to the log end.
// The first uncleanable offset is the base of the segment holding the
// lowest of: the last stable offset (which is never above the high
// watermark), the active segment's base, and the base of the first sealed
// segment whose largest timestamp is newer than min.compaction.lag.ms. A
// log is due when it has cleanable bytes and either its dirty ratio
// (dirty bytes / (clean + dirty bytes)) is above min.cleanable.dirty.ratio
// or its oldest dirty segment's first batch is older than
// max.compaction.lag.ms (PlanClean, Plan.Due). A checkpoint below the log
// start or above the log end is reset to the log start.
//
// # A round
//
//  1. The offset map (OffsetMap, fixed memory) takes the last offset of
//     every key of the dirty section, records of aborted transactions and
//     control records left out, until the map is full; the round's end is
//     the offset after the last one the map covers.
//  2. Every segment from the log's first up to the round's end is
//     rewritten, in groups (Group: at most segment.bytes of data and
//     segment.index.bytes of each index per group, offsets within 2³¹−1
//     of the group's base) each written as one segment named after its
//     first segment's base, then installed in its place.
//  3. The round's end becomes the log's first dirty offset.
//
// # Rules (Kafka's filterTo with the cleaner's filter, and partlog's two
// additions marked so)
//
// For each batch, in offset order, with the transactions followed from the
// transaction indexes (txnTracker):
//
//   - A data batch of an aborted transaction loses all its records.
//   - A COMMIT or ABORT marker may go once no batch of its transaction is
//     left in the log (none was read in this round); the first round that
//     finds it so writes a delete horizon into its batch (now +
//     delete.retention.ms, KIP-534), and it goes in the first round after
//     that horizon. An ABORT kept while its transaction's batches remain
//     keeps its .txnindex entry; one whose transaction is gone loses it.
//   - Every other control batch is kept as it is: above all the
//     MIRROR_PID_RESET barrier (see "The barrier"), and KRaft's types.
//   - A record is kept when its offset is past what the offset map covers,
//     or when it holds the last offset of its key and it has a value or its
//     batch has no delete horizon yet or one still in the future. A record
//     without a key is dropped (Kafka refuses such records on compacted
//     topics). A batch whose kept records are tombstones gets a delete
//     horizon; a later round past it drops them.
//   - The batch holding a live producer's last data batch (its state's
//     last offset), or, for a producer whose state holds no data batch, a
//     control batch of its current epoch, is kept even with no record left
//     (the empty form), so its sequence and epoch survive; so is the batch
//     that ends the round's range (its last offset stays).
//   - partlog: a live producer's last control batch in the round is kept
//     whole, never emptied or dropped (it still gets its delete horizon).
//     It carries the producer's epoch and its transaction coordinator's
//     epoch; Kafka drops it once its transaction is gone and its horizon
//     passed, after which a producer state rebuilt from the log has lost
//     the coordinator epoch (a fenced coordinator's marker would be
//     accepted) or, for an emptied marker, the producer's epoch.
//   - partlog: a batch rewritten with fewer records keeps its max
//     timestamp (batch.AppendRetained), where Kafka takes the largest kept
//     record's: a producer's last timestamp, and so its expiry, then read
//     the same from the cleaned log.
//   - A batch that keeps every record and needs no new horizon is copied
//     byte for byte; one that keeps none, and need not stay empty, goes.
//   - partlog: a group of one segment that keeps every batch as it is, with
//     the same .txnindex entries, is left in place instead of rewritten
//     (Kafka rewrites the whole clean section every round; its bytes would
//     be the same).
//
// With these rules, the producer state rebuilt from a cleaned log (no
// snapshot, replay from the log start) equals the one rebuilt from the log
// before cleaning, in every field a producer snapshot keeps
// (TestCleanKeepsProducerState): live producers keep their last batches,
// producers removed by a barrier are removed again by the barrier, expired
// producers come back only as old as they were and expire again, and open
// transactions lie above the last stable offset, which cleaning never
// reaches.
//
// # The barrier
//
// A MIRROR_PID_RESET barrier (control type 7) is never removed, emptied or
// given a delete horizon. The cleaner keeps the last batch of each live
// producer so that producer state survives; the producers a barrier reset
// are not live, so their batches before the barrier may be cleaned away
// only in part, and what is left of them is replayed by any replica that
// rebuilds producer state from the log. Only the barrier, replayed after
// them, removes them again: without it those producer ids would come back,
// and a mirrored producer's retries would be taken for duplicates or out of
// order. (docs/mirror.md states the same rule.)
//
// # Replacing segments (crash safety)
//
// A cleaned group is written as .cleaned files, which are fsynced (Output,
// StepWritten). Installing it then takes, each step durable (directory
// fsync) before the next:
//
//  1. .cleaned → .swap, the .log last (StepSwap);
//  2. the replaced segments' files → .deleted (StepOriginalsGone; the log
//     drops them from its list at the same time, under its locks);
//  3. .swap → live names, the .log first (StepLive); the .deleted files
//     are removed after file.delete.delay.ms.
//
// Recovery (package recovery, "Leftovers") agrees at every point: any
// .cleaned file rolls the replacement back (its .cleaned and .swap files
// at or above its base are removed: the originals are intact until step
// 2); a .log.swap that validates completes it (the live segments of its
// offset range are removed, the .swap files renamed); .deleted files are
// removed; index files left .swap after their .log went live are renamed.
// A crash after step 3 leaves a cleaned log whose checkpoint is older:
// the next round cleans the section again, which changes nothing but
// horizons already written. Kafka's own recovery does the same with these
// names, so a directory partlog crashed in opens in Kafka too.
//
// # Cost
//
// Memory: a worker's offset map (PoolConfig.MapBytes / Threads, reserved
// and touched only as far as a round's dirty offsets need, handed back
// when the worker idles), one decompressed batch, one rebuilt batch and a
// 1 MiB write buffer. Segments are read through their mappings; batches
// kept whole are written straight from them. I/O is throttled by the
// pool's Throttle. A Pool has no goroutine while no log is due, and a log
// that has nothing due and nothing that time alone makes due is not looked
// at until it rolls a segment or its settings change.
//
// Legacy (magic 0 and 1) batches are not cleaned: a log holding one is
// reported uncleanable (ErrUncleanable), as are corrupt batches, which
// Kafka's cleaner would copy or rewrite with a new CRC.
package cleaner
