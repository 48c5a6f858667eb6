// Package producerstate is the producer state manager (PSM) of one
// partition: idempotent-producer deduplication and fencing, transaction
// tracking (first unstable and last stable offset), expiration, snapshots,
// and the MIRROR_PID_RESET barrier (docs/producer-state.md).
//
// # State model
//
// For every producer id (> -1, §2.1) the Manager keeps an entry: the last
// producer epoch, up to 5 cached data batches of that epoch (sequence and
// offset ranges, for duplicate detection), the last coordinator epoch, the
// last timestamp and the first offset of the producer's open transaction.
// Beside the entries it keeps the open transactions ordered by first
// offset, the decided transactions whose marker is not yet below the high
// watermark, the map end offset (MEO: the state reflects exactly the
// batches below it) and the offsets of the barriers it applied.
//
// # The append protocol
//
//	var a producerstate.Append // reused across appends
//	m.Begin(&a, producerstate.Client, nowMs)
//	for each batch v of the append, with its base offset o:
//	    if err := m.Validate(&a, v, o); err != nil { abandon the append }
//	write the bytes to the log
//	m.Commit(&a)
//	for _, t := range a.CompletedTxns() { if t.Aborted { write a .txnindex entry } }
//
// Invariants:
//
//  1. Appends (Begin … Commit) and every other mutation (RemoveExpired,
//     OnLogStartOffsetIncremented, OnHighWatermarkUpdated, resets, loads)
//     are serialised by the caller (the log's append lock, named with
//     SetAppendLock). Readers may run at any time (readers of entries
//     only once an append lock is set, and not while holding it). This
//     is what lets Validate read stored entries without a lock and keep
//     pointers to them until Commit.
//  2. Validate never changes the Manager. It applies each batch to a
//     per-producer working copy inside the Append (the accumulator), so a
//     later batch of the same append is checked against the effect of the
//     earlier ones. A rejected batch stages nothing and marks the append
//     failed; Commit of a failed append does nothing. The usual produce
//     request (the first batch with a producer id is a data batch of a
//     stored producer that the rules accept without a question: same
//     epoch, next sequence, no transaction, not in the cache) is staged
//     without an accumulator or an op (validateKnownData); should another
//     batch with a producer id follow, both are made first, exactly as
//     the general path would have made them. A caller appending that one
//     batch alone (the log's leader) may skip the Append altogether:
//     FindKnown makes the same decision and CommitKnown the same commit.
//  3. Commit applies the staged updates one by one in batch order, with
//     the same functions the accumulators used, so the committed state is
//     exactly what validation predicted. Completed transactions are
//     computed at their marker's position (their LastStableOffset sees the
//     transactions open at that point), then MEO := last offset + 1.
//  4. A committed append's effect on the state depends only on its
//     batches, not on how the batches were grouped into appends: replaying
//     the same batches one at a time or all at once (origin Replay) gives
//     the same state (the property test checks this).
//
// Rejected design: Kafka merges each producer's accumulator into the
// stored entry once, at the end of the append. That is cheaper for long
// follower appends, but a barrier in the middle of an append must wipe the
// state at its position, and merging afterwards resurrects pre-barrier
// batches (producer-state.md §6.5 defect 1). Sequential application costs
// one shard lock per batch, which is well inside the budget.
//
// # The barrier (§6.8, normative)
//
// A control batch whose first record's key has type 7 (MIRROR_PID_RESET),
// whatever its producer id, epoch, sequence or transactional flag, is a
// barrier. From Client it is refused like every control batch
// (ErrControlFromClient); from every other origin, Replay included, it
// removes every producer entry and every open-transaction record at its
// exact offset: batches before it in the same append are applied first,
// batches after it are validated and applied against the empty state. It
// never creates an entry. Decided (unreplicated) transactions are kept so
// they still pin the LSO until their marker is below the high watermark.
// Open transactions dropped this way are counted (OrphanedTransactions).
// A type-7 control batch with zero records (every record compacted away)
// cannot be recognised and is not a barrier (§6.8 R1, T48); with a
// producer id it only creates a blank entry, like any empty control batch.
//
// # Locking
//
// Manager.mu (a Mutex, the state lock) guards the producer count, the
// open and decided transactions, MEO, the last snapshot offset, the log
// start offset, the barrier list and, for writing, every shard table
// and entry (a shard's table is a pidTable: open addressing keyed by
// producer id, cheaper per lookup than a Go map). Each shard's mutex
// additionally guards its table and entries against Producer(pid), the
// only reader that does not take Manager.mu.
// Mutations hold Manager.mu and take one shard lock at a time
// around each entry update, with three exceptions that change no count,
// transaction or barrier: the Commit of an append that staged nothing
// (it only stores the MEO, an atomic), of an append of one data batch of
// a known producer outside a transaction (it updates that entry under
// its shard lock alone), and of an append whose one batch with producer
// state the known path staged or FindKnown accepted (CommitKnown;
// below). So readers of entries (Producers,
// SnapshotEntries) hold Manager.mu and take each shard's lock while they
// read that shard; readers of transactions and offsets (LastStableOffset,
// …) hold Manager.mu only. A snapshot pairs the entries with the MEO, so
// TakeSnapshot is serialised with appends by the caller (the log takes it
// under its append lock). Lock order: the caller's append lock, then
// Manager.mu, then at most one shard lock; never two shard locks at once.
//
// The known batch's commit is the produce request's, so it takes no lock
// and adds no atomic read-modify-write or store to the append when no
// reader is at work: it loads the count of readers at work, writes the
// entry (under its shard lock only if that count was not 0) and stores
// the new MEO, as every commit does. It runs inside the caller's append
// lock (SetAppendLock; the log sets its own). A reader of entries
// first adds itself to the count, then takes and releases the append
// lock (beginRead), and leaves the count when done. An append that held
// the append lock before the reader took it has finished its commit, and
// the lock orders its entry writes before the reads; one that takes it
// afterwards loads the count after the reader's increment, so it writes
// under the shard lock the reader holds while reading
// (TestKnownCommitsWithReaders runs them under -race). A reader thus
// waits for at most the append in flight, as Kafka's readers of producer
// state wait for the log lock. A reload (Reload: a truncation's reset and
// rebuild) marks itself in a counter that is odd while it runs; a reader
// of entries that saw it odd or changed reads again, so it never returns
// the empty state between the reset and the rebuild. Without an append lock readers of entries
// must not run during an append. Rejected design: the commit storing ^MEO
// (negative) first, for readers to see it at work without the lock: one more
// atomic store, a full fence of ~5% of a plain append's time
// (BenchmarkProducerAppendPaired).
//
// The shard count (DefaultShards = 16) is justified beside the constant:
// one writer per partition cannot create contention that more stripes
// would relieve, and a broker holds thousands of partitions.
//
// # Differences from Kafka
//
// Transaction verification (guards, verification states: decision table
// rows 8 and 9) is leader-only state outside the log and is not part of
// this package; origin RAFT_LEADER does not exist. The barrier goes beyond
// the prototypes as §6.8 requires (applied at its offset in every path,
// open transactions dropped). The aborted-index LastStableOffset of a
// marker only sees transactions opened before the marker (Kafka's segment
// recovery does the same; its live multi-batch path also counts
// transactions opened later in the same append).
package producerstate
