// Package mirror is the destination side of cluster mirroring for one
// partition (docs/mirror.md): the mirror state machine, the append
// rules per origin, the mirror.checkpoint file, LOG_ALIGNMENT, MIRRORING
// with epoch fencing, and the STOPPING procedure that writes the
// MIRROR_PID_RESET barrier before the partition becomes writable. It is a
// client of the root package: the Log stores bytes and producer state
// (and applies barriers); this package decides who may append when.
//
//	l, _ := partlog.Open(dir, opts)
//	p, _ := mirror.Open(l, mirror.Options{LeaderEpoch: e}) // finishes interrupted procedures
//	s, _ := p.Start(mirror.StartRequest{SourceClusterID: "A", SourcePosition: pos, SourceLeaderEpoch: se})
//	_, err := p.AppendMirror(s, fetchedBytes) // MIRRORING only, this session only
//	res, _ := p.Stop(ctx, mirror.TruncateLSO) // barrier durable, then writable
//	_, err = p.AppendClient(produceBytes, res.StopLeaderEpoch)
//
// Concurrency: a Partition is safe for concurrent use. One mutex
// serializes its appends and state changes (so a stop waits for an
// in-flight mirror append, and none lands after S1); State, Session,
// Checkpoint and LastMirrorPosition read a published copy and never wait.
// Lock order: Partition.mu, then the Log's own locks.
//
// # States (mirror.md §2.2)
//
//	(none) ──Start──▶ LOG_ALIGNMENT ──▶ [EPOCH_FENCING] ──▶ MIRRORING ◀──────┐
//	   ▲                   │                  ▲                 │  │  ▲         │
//	   │                   │                  └── epoch ────────┘  │  └─Resume──PAUSED ◀── PAUSING ◀─Pause─┘
//	   │                   ▼                                       ▼
//	 STOPPED ◀── S7 ── STOPPING ◀──────── Stop (from any read-only state but ULE_RECOVERY)
//	   │
//	   └──Start (new session)──▶ LOG_ALIGNMENT
//
//	FAILED: from any state (bad fetched batch, I/O error, corrupt checkpoint,
//	position lost); leaves by Start, Stop, or Resume when it failed while
//	mirroring with the log intact. ULE_RECOVERY is never entered (FAILED).
//
// Read-only (Client and Coordinator appends refused with ErrReadOnly):
// every state but (none) and STOPPED. Mirror appends: MIRRORING and the
// current session only. Replication (AppendFollower): every state.
//
// # LOG_ALIGNMENT (mirror.md §2.5)
//
//  1. checkpoint LOG_ALIGNMENT / INTENT, session+1, the new source
//  2. target := 0 without a source position, else min(LMO, LEO, first
//     local offset with an epoch above LME), lowered to its batch start
//  3. checkpoint POSITION_RESOLVED with the target
//  4. Log.TruncateTo(target), Log.Flush, checkpoint TRUNCATED
//  5. EPOCH_FENCING (local epoch := source epoch + 10) when the source
//     epoch is above local-3; then MIRRORING
//
// # STOPPING (mirror.md §2.7): each step durable before the next
//
//	step  action                                        durable before the next step
//	S0    checkpoint STOPPING / INTENT, policy          checkpoint (tmp, fsync, rename, dir fsync)
//	S1    fence the fetcher (under the partition lock)  in memory
//	S2    HW := LEO; TRUNCATE_LSO: TruncateTo(LSO)      Log.Flush; checkpoint TRUNCATED (TRUNCATE_LSO)
//	S3    LMO := LEO, LME := latest cached epoch        Log.Sync(LMO), then checkpoint POSITION_RECORDED
//	S4    E_stop := max(local, LME, latest) + 1         checkpoint EPOCH_BUMPED, stop_leader_epoch
//	S5    ABORT per open transaction at E_stop          Log.Sync(LEO), then checkpoint ABORTS_WRITTEN
//	S6    barrier at E_stop (unless one is at >= LMO)   Log.Sync(LEO), then checkpoint BARRIER_WRITTEN, barrier_offset
//	S7    checkpoint STOPPED                            then Client/Coordinator appends are accepted
//
// # mirror.checkpoint (format of partlog; versioned)
//
// UTF-8 text, LF line ends, one "key value" pair per line, exactly these
// keys in this order, integers in canonical decimal (-1 = unset), names
// without white space (an empty name is "key " with nothing after the
// space), then a CRC-32C (Castagnoli) in 8 lowercase hex digits over all
// preceding bytes:
//
//	mirror-checkpoint 1
//	state STOPPING                          LOG_ALIGNMENT|EPOCH_FENCING|ULE_RECOVERY|MIRRORING|PAUSING|
//	                                        PAUSED|STOPPING|STOPPED|FAILED (PREPARING, LOG_TRUNCATION read
//	                                        as LOG_ALIGNMENT)
//	step POSITION_RECORDED                  - | INTENT POSITION_RESOLVED TRUNCATED (LOG_ALIGNMENT) |
//	                                        INTENT TRUNCATED POSITION_RECORDED EPOCH_BUMPED ABORTS_WRITTEN
//	                                        BARRIER_WRITTEN (STOPPING)
//	mirror_name dr-link
//	source_cluster_id ERERESIiIiIzMzMzRERERA
//	topic_id ASNFZ4mrze8P7cuph2VDIQ         22 URL-safe base64 characters
//	partition 0
//	session 4
//	align_target_epoch -1
//	align_target_offset 0
//	last_mirror_epoch 3                     LME (S3)
//	last_mirror_offset 3                    LMO (S3)
//	stop_policy ABORT_OPEN                  TRUNCATE_LSO | ABORT_OPEN
//	stop_leader_epoch -1                    E_stop (S4)
//	barrier_offset -1                       (S6)
//	updated_ms 1700000000000
//	crc32c da08566a
//
// A file with a wrong CRC, header, version, key order or value is corrupt:
// the partition opens FAILED and read-only with a *CheckpointError as the
// reason, and the file is left as it is until an operator starts or stops
// a session. Decisions beyond the spec: the new source and mirror name
// are written already at INTENT (so a restart can redo step 2), and
// FAILED keeps the other fields (so a stop from FAILED reuses a recorded
// position). The raised local leader epoch is not in the file (the format
// has no field for it): Options.LeaderEpoch gives it back after a restart.
//
// # Crash points and recovery (mirror.md §2.8; Open does this)
//
//	checkpoint on disk                 recovery by Open
//	missing                            ordinary partition
//	corrupt                            FAILED, read-only, file kept
//	LOG_ALIGNMENT / INTENT             with Options.LookupPosition: redo from step 2; else stay
//	                                   read-only until Start with the same source continues
//	LOG_ALIGNMENT / POSITION_RESOLVED  truncate to the recorded target (idempotent), then on
//	LOG_ALIGNMENT / TRUNCATED          MIRRORING (fencing at the first fetched batch needing it)
//	EPOCH_FENCING                      MIRRORING
//	MIRRORING, PAUSED, FAILED          unchanged (a lost unflushed tail is fetched again)
//	PAUSING                            PAUSED
//	ULE_RECOVERY                       FAILED
//	STOPPING / INTENT                  redo S2-S7 (no fetcher exists after a restart)
//	STOPPING / TRUNCATED               redo S3-S7
//	STOPPING / POSITION_RECORDED       keep LMO/LME; LEO < LMO: FAILED (ErrPositionLost); else S4-S7
//	STOPPING / EPOCH_BUMPED            reuse E_stop; ABORT only the transactions the recovered
//	                                   producer state still has open; S6, S7
//	STOPPING / ABORTS_WRITTEN          a barrier at >= LMO in the log is reused; else S6; S7
//	STOPPING / BARRIER_WRITTEN         S7
//	STOPPED                            writable; producer state as rebuilt from the log
//
// The tests crash at every point of this table (and between each append
// of S5/S6 and its fsync) through an unexported hook, on two disk images:
// the page cache survived, or only what was fsynced.
package mirror
