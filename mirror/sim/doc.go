// Package sim is an in-process simulator of Kafka cluster mirroring on
// partlog logs (docs/mirror.md §4, §6): several clusters (A, B, C,
// D), each a set of partition logs on disk with its own PID allocator
// starting at the same id (so producer ids collide across clusters),
// idempotent and transactional producers whose every answer is recorded,
// read_committed and read_uncommitted consumers that hide control
// batches, a mirror fetch loop that copies raw batch bytes from a source
// Log.Read into the destination's mirror append, and the stop procedure.
//
// A Strategy selects how producer state is kept apart across clusters:
// Barrier (the design: a MIRROR_PID_RESET barrier at every stop, batches
// copied byte for byte), None (no barrier), and the dropped rewriting
// designs Negation (D1), IdempotentNegation (D2) and BitField (D3), which
// rewrite the producer id of every mirrored batch and recompute its CRC.
//
// With Barrier, every partition runs through package mirror (alignment,
// fetch appends, client appends and its crash-safe stop with
// TRUNCATE_LSO). The comparison strategies need a stop without a barrier,
// which package mirror never does (I6), so the simulator implements that
// stop on the Log itself: truncate to the last stable offset, flush,
// raise the leader epoch to max(local, LME)+1, and accept producers.
//
// Each Topology is a scenario of mirror.md §4; Run executes one under one
// strategy and returns a Result: the three silent-corruption cases of
// mirror.md §1.2 (found by replaying every replica's log and noticing
// batches applied to an entry another producer wrote), lost, duplicated
// and never-committed records (producers' acknowledgements against what
// read_committed consumers read on every node), and whether every
// replica's producer state equals a fresh replay of its own log.
package sim
