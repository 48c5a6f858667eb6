// Package server is a single-node Kafka-protocol server over a partlog
// log directory: the engine behind `partlog serve`. It is one node, for
// trying the engine with real clients, for integration tests and as the
// example a broker author reads first; production brokers embed the
// root package and do their own replication. Requests and responses are
// franz-go's kmsg types; nothing else of a client library is used.
//
//	srv, err := server.Open(server.Config{Dir: "/tmp/data", AutoCreate: true})
//	ln, err := net.Listen("tcp", "127.0.0.1:9092")
//	go srv.Serve(ln)
//	...
//	err = srv.Close() // flush, checkpoints, clean-shutdown marker
//
// # APIs and versions
//
// ApiVersions advertises exactly these (the table apis in versions.go),
// each covered by the package's tests and by the interop module's
// clients (kgo, kcat/librdkafka, kafkajs):
//
//	Produce               3–13  every batch through Log.AppendAsLeader after
//	                            Kafka's request checks (one magic-2 batch per
//	                            partition, zstd from v7, acks -1/0/1, the
//	                            transactional id of transactional batches);
//	                            the first transactional batch of a transaction
//	                            on a partition checked with the coordinator
//	                            (KIP-890; v12 adds the partition); v13 by
//	                            topic id; a produce creates no topic
//	Fetch                 4–18  read_uncommitted (to the high watermark) and
//	                            read_committed (to the last stable offset, with
//	                            the aborted transactions); MinBytes/MaxWait long
//	                            polling on Log.WaitHighWatermark; MaxBytes and
//	                            partition max bytes with the at-least-one-batch
//	                            rule; fetch sessions (KIP-227, v7+:
//	                            incremental fetches name and are answered only
//	                            the partitions that changed; fetch_session.go);
//	                            v13+ by topic id
//	ListOffsets           1–11  Log.OffsetForTimestamp; latest is the high
//	                            watermark or, read_committed, the last stable
//	                            offset; each special timestamp from the version
//	                            that defines it (-3 v7, -4 v8, -5 v9, -6 v11)
//	Metadata              0–13  this node as the only broker, leader and ISR
//	OffsetForLeaderEpoch  0–4   Log.EndOffsetForEpoch
//	FindCoordinator       0–4   this node (groups only with a GroupHandler)
//	ApiVersions           0–3   v3+: transaction.version 2 finalized
//	CreateTopics          0–7   topic configs (configs.go, Kafka 4.4's types and
//	                            bounds): cleanup.policy (delete, compact,
//	                            both), compression.type (a
//	                            leader recompresses client batches
//	                            to it; Log's CompressionType),
//	                            delete.retention.ms, file.delete.delay.ms,
//	                            index.interval.bytes, max.compaction.lag.ms,
//	                            max.message.bytes, message.timestamp.*,
//	                            min.cleanable.dirty.ratio,
//	                            min.compaction.lag.ms, min.insync.replicas,
//	                            preallocate, retention.*, segment.*,
//	                            unclean.leader.election.enable; v5+ answers
//	                            every config; the names Kafka refuses
//	                            (__cluster_metadata, one colliding with a
//	                            topic's after '.' and '_' are unified) and
//	                            Kafka's internal topics (this server keeps
//	                            offsets and transactions in its own files)
//	                            are refused, by auto-creation too; at most
//	                            10 000 records (partitions, topics,
//	                            configs) per request, as Kafka's
//	                            controller, and Config.MaxPartitions
//	                            served; a creation that fails part way
//	                            removes what it made
//	DeleteTopics          0–6   by name or topic id (Dir.DeletePartitions:
//	                            one directory sync for every partition)
//	CreatePartitions      0–3
//	DescribeConfigs       0–4   topic resources: the configs above, each with
//	                            the topic's value or the server's default
//	AlterConfigs          0–2   topic resources; the request's configs replace
//	                            the topic's (Log.Reconfigure applies them)
//	IncrementalAlterConfigs 0–1 topic resources: SET, DELETE, APPEND and
//	                            SUBTRACT (lists only)
//	DeleteRecords         0–2   Log.SetLogStartOffset (-1: the high watermark)
//	DescribeLogDirs       1–5   the log directory, each partition's size
//	DescribeCluster       0–2   this node
//	DescribeProducers     0     each partition's producer state
//	DescribeTransactions  0     the coordinator's state of each id
//	ListTransactions      0–2   filters: state, producer id, duration, pattern
//	InitProducerId        0–5   Kafka's coordinator rules (txn.go)
//	AddPartitionsToTxn    0–3   (v4+ is the broker-to-broker form)
//	AddOffsetsToTxn       0–4
//	EndTxn                0–5   COMMIT/ABORT markers with Log.AppendAsCoordinator;
//	                            v5: transaction version 2 (the epoch bumped at
//	                            every end)
//	TxnOffsetCommit       0–5   to the GroupHandler
//
// With Config.Groups set, the group APIs are routed to it and advertised
// too: the classic protocol (OffsetCommit 0–9, OffsetFetch 0–9,
// JoinGroup 0–9, Heartbeat 0–4, LeaveGroup 0–5, SyncGroup 0–5,
// DescribeGroups 0–6, ListGroups 0–5, DeleteGroups 0–3, OffsetDelete 0)
// and KIP-848's consumer groups (ConsumerGroupHeartbeat 0–1,
// ConsumerGroupDescribe 0–1, group.version 1 finalized in ApiVersions;
// Kafka's Java consumer with group.protocol=consumer uses them, it does
// not fall back). Without it those APIs are not advertised and
// FindCoordinator for a group answers COORDINATOR_NOT_AVAILABLE.
//
// Any other API or version is answered, never dropped: ApiVersions with
// its v0 response carrying UNSUPPORTED_VERSION and the supported list
// (as Kafka does, so the client retries at a version both know), any
// other request with its response type carrying UNSUPPORTED_VERSION in
// its top-level error code. Only bytes that cannot be a request (a size
// out of bounds, an api key kmsg does not know, a body that does not
// decode) end the connection, as in Kafka.
//
// Out of scope: SASL and TLS (plaintext only: listen on loopback or a
// trusted network), ACLs, quotas, replication (one node: the high
// watermark is the log end, or with Config.Fsync the durable offset),
// share groups. Compacted topics are cleaned by the Cleaner of Config.Log
// (package cleaner's rules).
//
// # Differences from Kafka
//
// interop's TestWireDiff sends the same request scripts to Kafka 4.4 and
// to this server and compares the answers field by field. Besides what
// two brokers cannot share (ids, clocks, hosts, log directory paths,
// config layers: the wirediff.Rules without "allowed"), these are the
// only differences it accepts, each because partlog's answer is the
// better one for a client or because partlog lacks the feature;
// each step that shows one states partlog's answer
// (wirediff.AllowedDifferences):
//
//   - invalid-record-not-unknown: a batch that cannot be decompressed, or
//     names an unknown codec, is answered INVALID_RECORD; Kafka answers
//     UNKNOWN_SERVER_ERROR. Both refuse it; this code says the batch is
//     at fault.
//   - record-offset-deltas: an uncompressed batch whose records' offset
//     deltas are not 0..n-1 is refused (INVALID_RECORD); Kafka stores it
//     (and fails the same batch compressed). A consumer would read such
//     a record at an offset its batch does not hold.
//   - producer-epoch-below-none: a batch without a producer id whose
//     producer epoch is below -1 is refused (INVALID_RECORD); Kafka
//     stores it. Recovery takes such a header for damage and would cut
//     the log there, so the leader refuses what recovery could not keep.
//   - null-records: a produce whose records are null is answered
//     INVALID_RECORD at once; Kafka never answers it.
//   - internal-topics: Metadata and the listings do not show
//     __consumer_offsets or __transaction_state: groups and transactions
//     live in this server's own files (Server state).
//   - partial-batch: a fetch ends with whole batches; Kafka may end a
//     partition's records with the first bytes of a batch cut at the max
//     bytes, which clients discard.
//   - auto-create: Metadata with auto-creation creates the topic before
//     answering; Kafka creates it in the background and answers
//     UNKNOWN_TOPIC_OR_PARTITION meanwhile (the script retries).
//
// # Connections
//
// Each connection reads requests in order and handles them in order, so
// appends happen in request order; responses are written in request
// order by a writer goroutine, each once ready (a produce waiting for its
// sync, a long-poll fetch, a JoinGroup), up to 64 requests ahead.
// Fetched record bytes alias the segment mappings (Log.Read) until the
// response is written; a partition's record bytes of 8 KiB or more are
// written from there, not copied into the response (one writev of the
// encoded pieces and the mapped bytes, fetch_write.go).
//
// A client cannot make the server hold more than its bounds (conn.go):
// a frame of at most Config.MaxRequestBytes (Kafka's
// socket.request.max.bytes, 100 MiB), buffered as its bytes arrive and
// walked before it is decoded, so no array is allocated beyond the bytes
// present and at most Config.MaxRequestEntries entries are (a request
// holding more ends its connection with a log line; Kafka has no such
// bound and would allocate them); a fetch answered once per partition
// and within Config.FetchMaxBytes (Kafka's fetch.max.bytes, 55 MiB),
// waiting on one channel however many partitions it names; a
// connection idle for Config.IdleTimeout (connections.max.idle.ms, 10
// minutes), or whose frame or response stalls that long, closed;
// at most Config.MaxConnections connections (max.connections; by
// default a quarter of the open-file limit), accepting waiting for a
// slot at the bound; accept failures that pass (too many open files)
// retried with a growing pause and logged.
//
// # Durability
//
// Without Fsync an append is acknowledged when it is in the log (page
// cache), like Kafka's default of no fsync per message. With Fsync an
// acks=-1 produce and every transaction marker are acknowledged after
// Log.Sync (group commit: concurrent producers share each fdatasync),
// acks 0 and 1 ask a single flusher goroutine to sync soon, and the high
// watermark, hence what consumers see, is the durable offset.
//
// # Server state
//
// The server keeps its own state in one file of the log directory,
// StateFile (JSON, replaced atomically with the engine's atomic-file
// helper at every change): the cluster id, the end of the reserved
// producer-id block (ids are handed out from a block of 1000 reserved in
// the file before the first of them is used, and never at or below an id
// the logs hold: the allocator starts above every id of the logs'
// producer state at open and is raised by every append of a higher id,
// so no id is handed out twice across restarts or crashes, nor one a
// client wrote with unasked; a client's id above 2^62, which no
// allocator reaches and which would leave this one nothing to hand out,
// is refused with INVALID_RECORD), every transactional id's producer
// id, epoch, timeout, state and partitions, and the topic configs. Own
// files rather than Kafka's internal partitions (__transaction_state):
// the log directory stays what a Kafka broker would load (no internal
// topic a client could see or that verify would have to know), the
// state is small, changes only at transaction boundaries, and is
// read whole at open, where a log would need a compaction story. A
// transaction found in PrepareCommit or PrepareAbort at open (a crash
// between persisting the decision and writing the markers) is completed
// then: its markers are written again, which is harmless where they were
// already written. Ongoing transactions survive a restart and are
// finished by their producer or aborted at their timeout.
//
// # Mirroring
//
// A server can be the destination of a cluster mirror (mirror.go,
// docs/mirror.md §7): StartMirror fetches topics of a source cluster
// (another server, or any Kafka-protocol cluster) and stores their batches
// unchanged through package mirror's state machine; the partitions are
// read-only (produces answered POLICY_VIOLATION) until StopMirror writes
// the MIRROR_PID_RESET barrier. Every partition has a mirror.Partition and
// every client and coordinator append goes through it. A start that would
// cut records a partition holds of its own is refused unless
// MirrorStartRequest.AllowTruncation; the offsets a start cuts are
// logged and answered (MirrorPartitionStatus.Truncated). The admin
// endpoint (admin.go, ServeAdmin; HTTP and JSON) serves `partlog mirror`
// and peers' failback lookups: changes need the token of AdminTokenFile,
// and what a browser sends is refused.
//
// One housekeeping goroutine ticks (Config.Tick, default 1 s): it aborts
// transactions past their timeout (bumping the producer epoch, so the
// old producer is fenced, and writing ABORT markers at it), retries
// transactions whose markers failed, and every minute expires producers,
// applies retention and writes the log directory's checkpoints.
package server
