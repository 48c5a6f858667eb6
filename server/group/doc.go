// Package group is partlog serve's group coordinator: one node, the
// classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup), KIP-848 consumer groups (ConsumerGroupHeartbeat,
// ConsumerGroupDescribe), committed offsets (OffsetCommit, OffsetFetch,
// TxnOffsetCommit, OffsetDelete), the group listings (ListGroups,
// DescribeGroups) and DeleteGroups, following the rules of Apache Kafka's
// group coordinator.
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
// and assignment), as Kafka keeps them in __consumer_offsets, or, for a
// consumer group, its type and epoch (format version 2; version 1 files
// are read). Every OffsetCommit, TxnOffsetCommit, CompleteTxn, completed
// rebalance and new consumer group rewrites the file with fsutil.WriteFileAtomic (temporary file,
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
// # Consumer groups (KIP-848)
//
// ConsumerGroupHeartbeat and ConsumerGroupDescribe serve the consumer
// group protocol as Kafka's GroupMetadataManager does (consumer.go): a
// member joins with epoch 0 and its subscription (topic names or a
// regular expression, matched against whole names); every change of
// membership, subscription, preferred assignor or subscribed topics'
// metadata (a topic created, deleted or grown) bumps the group epoch (a
// new group is at 1, as in Kafka), and the target assignment is computed
// for the new epoch by the server-side assignor most members name
// ("uniform", the default, or "range"; assign.go). Each member then
// reconciles towards its target: partitions it must give up are revoked
// first at its current epoch, and it takes the new epoch with the
// partitions no other member still owns. Heartbeats at a greater epoch,
// or at a smaller one that is not the previous epoch with owned
// partitions all assigned, are FENCED_MEMBER_EPOCH; a member silent for
// 45 s (group.consumer.session.timeout.ms), or that does not revoke
// within its rebalance timeout, is fenced and the group epoch bumped.
// Epoch -1 leaves; a static member's -2 keeps its partitions for its
// instance id, which rejoins under a new member id. OffsetCommit v9+,
// TxnOffsetCommit and OffsetFetch v9 check member epochs as Kafka's
// ConsumerGroup does (STALE_MEMBER_EPOCH; a partition committed must be
// assigned or being revoked at an epoch not above the request's). The
// coordinator learns topics from Config-less SetTopics (the server).
//
// Differences from Kafka: the target assignment is computed at once,
// where Kafka computes it at most once a second
// (group.consumer.assignment.interval.ms); the uniform assignor's choices
// follow member ids in order (Kafka: hash order), and with different
// subscriptions it balances its own way; a classic group with members is
// not converted to a consumer group, nor a consumer group with members
// joined by classic members (Kafka's group.consumer.migration.policy
// converts both: here GROUP_ID_NOT_FOUND and INCONSISTENT_GROUP_PROTOCOL);
// empty groups convert both ways, their offsets kept. Membership is not
// stored: the state file keeps that the group is a consumer group and its
// epoch, so after a restart its members' heartbeats answer
// UNKNOWN_MEMBER_ID and they join again (Kafka keeps members in
// __consumer_offsets and they carry on).
//
// # Not implemented
//
// Offset retention (Kafka expires the offsets
// of Empty groups after offsets.retention.minutes; here they stay; an
// Empty group with no offsets is dropped after ten minutes, Kafka's
// cleanup interval), group.max.size, classic-protocol members in
// consumer groups, and topic ids (OffsetCommit and OffsetFetch v10,
// TxnOffsetCommit v6). The coordinator does not know which topics exist
// for classic groups: the server checks that before it passes a commit
// on.
package group
