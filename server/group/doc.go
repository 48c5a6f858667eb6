// Package group is partlog serve's group coordinator: one node, the
// classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup), committed offsets (OffsetCommit, OffsetFetch,
// TxnOffsetCommit) and the group listings (ListGroups, DescribeGroups),
// following the rules of Apache Kafka's GroupCoordinator.
//
// # Groups
//
// A group is Empty, PreparingRebalance, CompletingRebalance or Stable (an
// unknown group describes as Dead). A JoinGroup with no member id gets a
// member id made by the coordinator (client id or group instance id, a
// dash and a random UUID); from JoinGroup v4 on the first such join is
// answered MEMBER_ID_REQUIRED and the client joins again with the id. A
// rebalance waits until every member has rejoined or the longest
// rebalance timeout of the members has passed (dynamic members that did
// not rejoin are dropped), then starts the next generation: the protocol
// is the one most members prefer among those all members support, and
// the leader (the oldest member that rejoined) gets the member list.
// SyncGroup waits for the leader's assignment and hands each member its
// part; members that do not sync within the rebalance timeout are
// dropped. Heartbeats answer REBALANCE_IN_PROGRESS during a rebalance; a
// member whose session timeout passes without one is dropped and the
// group rebalances. Static members (group.instance.id) keep their place
// across restarts of the client: a known instance id joining again takes
// over its old member, without a rebalance when the group is Stable.
// Config.InitialRebalanceDelay is Kafka's group.initial.rebalance.delay.ms.
//
// Deadlines (sessions, pending member ids, join and sync phases) are kept
// in the groups and served by one timer for the whole coordinator, set to
// the earliest of them; every request also runs the expirations that are
// due, so a test with its own clock (Config.Now) sees them as soon as the
// clock passes them. Close stops the timer.
//
// # Offsets and durability
//
// All durable state lives in one file, Config.Dir/group-coordinator.state:
// the committed offsets of every group, the transactional offsets still
// staged, and each group's metadata as stored at the end of its last
// rebalance (generation, protocol, leader, members with their metadata
// and assignment), as Kafka keeps them in __consumer_offsets. Every
// OffsetCommit, TxnOffsetCommit, CompleteTxn and completed rebalance
// rewrites the file with fsutil.WriteFileAtomic (temporary file,
// fsync, rename, directory fsync) before it is answered, so an
// acknowledged commit survives a crash; when the write fails the change
// is undone in memory and the client gets COORDINATOR_NOT_AVAILABLE.
//
// Rewriting the file each time was chosen over an append-only log with
// compaction, on measurement: with a few groups the state encodes in
// microseconds, so a commit costs the atomic replace, a few milliseconds
// (bench/RESULTS.md, server/group). Clients commit every few
// seconds per member (kgo and the Java client every 5 s by default), so
// a few hundred commits a second is ample for a one-node server for
// trying and testing, and the file needs no compaction, replay or repair
// of a torn tail. The writes are serialised under the coordinator's
// lock, which other requests wait on meanwhile. The file is read back
// whole and bounded by fsutil.SmallFileLimit (16 MiB, a few hundred
// thousand committed partitions). The format is binary (lengths,
// big-endian integers, a CRC-32C trailer) so that group ids, topics and
// metadata of any bytes come back unchanged; a file that does not decode
// fails Open with a clear error, never a silent reset.
//
// After a restart a group with stored members is Stable again: members
// that come back go on heartbeating in their generation, those that do
// not expire after their session timeout and the group rebalances.
// OffsetFetch answers from the committed offsets at once.
//
// # Transactions
//
// CommitTxnOffsets stages a producer's offsets per group (keyed by
// producer id, with its epoch); CompleteTxn(commit) makes them the
// committed offsets, unless a plain commit came after them, and
// CompleteTxn(abort) drops them. OffsetFetch with RequireStable (v7+)
// answers UNSTABLE_OFFSET_COMMIT for partitions with staged offsets.
// The transaction coordinator (the caller) checks producer ids and
// epochs against its own state; this package does not.
//
// # Not implemented
//
// DeleteGroups, OffsetDelete, offset retention (Kafka expires the offsets
// of Empty groups after offsets.retention.minutes; here they stay; an
// Empty group with no offsets is dropped after ten minutes, Kafka's
// cleanup interval), group.max.size, the KIP-848 consumer
// protocol, and topic ids (OffsetCommit and OffsetFetch v10,
// TxnOffsetCommit v6). The coordinator does not know which topics exist:
// the server checks that before it passes a commit on.
package group
