// Package recovery opens a partition directory that may not have been
// closed cleanly, checks it, and repairs it so that the Log can load it as
// a cleanly closed directory. It is the one code path behind both
// partlog.Open (unclean opens) and the CLI's verify (Options.DryRun) and
// recover commands. The contract is docs/recovery.md §2 with the
// engine deviations of §2.14; byte layouts are in docs/formats.md.
//
//	rep, err := recovery.Run(dir, recovery.Options{RecoveryPoint: rp, LogStartOffset: ls, Segment: cfg})
//	if err != nil { ... }        // an I/O error: nothing was cut
//	// rep.LogEndOffset, rep.RecoveryPoint, rep.Truncation, rep.Status ...
//
// # Steps and invariants
//
// Run performs these steps in order. Each is idempotent, and each that
// changes the directory finishes (files fsynced, directory fsynced) before
// the next begins, so a crash at any point converges on the next Run to the
// state an uninterrupted Run would have left (§8 J1), and a second Run finds
// nothing to do (J2).
//
//  1. Leftovers. `.deleted` files are removed; `.cleaned`/`.swap` sets are
//     rolled back or finished by the replacement protocol (recovery.md
//     §1.5, formats.md §4.2), after validating each `.log.swap` (an invalid
//     one is rolled back while its originals exist); our temporary files
//     (`<segment file>.tmp`, `<offset>.snapshot.tmp`) and orphan index files
//     are removed. Non-canonical names (`5.log`, `foo.log`) and directories
//     are reported and never loaded, created or deleted; Kafka's checkpoint
//     temporaries are left alone.
//  2. Recovery range. Unclean: the segment holding the recovery point and
//     every later one (all when there is no recovery point). Every other
//     segment is trusted only after its indexes pass index Sanity, its last
//     offset-index entry points to a batch inside the data, its first batch
//     belongs to it, and its batches from the last index entry end exactly
//     at the end of the file; a segment failing any of this is recovered
//     too (for the active segment of a clean directory this is reported as
//     "clean-marker-inconsistent"). A missing index is rebuilt; an empty
//     segment's missing indexes are created.
//  3. Validation. The segments to recover are scanned in parallel
//     (Options.Parallelism workers) from byte 0 through a read-only mapping
//     with faults turned into errors; batch.Iterator's checks are completed
//     by the structural rules of §7.1 (base offset ≥ segment base, offsets
//     strictly increasing, last offset − base within int32). A batch whose
//     leader epoch is below its predecessor's is kept, as Kafka keeps it,
//     and noted (epoch-decrease); the epoch cache is then rebuilt from the
//     headers. No claimed
//     length is ever allocated. Then, in offset order, segment boundaries
//     are checked (overlaps, wrongly named segments; a decreasing epoch
//     across segments is noted likewise). The cut is the first failure in
//     offset order.
//  4. Classification (table below) and the salvage summary.
//  5. Apply (skipped under DryRun). Later segments are removed first,
//     newest first, then the cut segment's .log is truncated at the cut
//     (files are trimmed to their data), then the offset and time indexes
//     of every recovered segment are rebuilt with Kafka's per-batch rule
//     and written beside + renamed over, only when they differ. An I/O
//     error fails the Run naming the file and never causes a cut.
//  6. Producer state. Snapshots beyond the LEO, at or below the log start,
//     and stray ones are discarded; the newest valid snapshot at or below
//     min(recovery point, LEO, first recovered segment) is loaded (corrupt
//     ones are discarded and older ones tried); every batch from there to
//     the LEO is replayed with origin Replay, barriers included; the
//     .txnindex of every recovered segment is rebuilt from the aborted
//     transactions completed in the replay; a snapshot is written at the
//     LEO unless an identical one is there. There is no "clean and no
//     snapshot ⇒ no producers" shortcut.
//  7. Leader epochs. leader-epoch-checkpoint is loaded (a malformed or
//     missing one is rebuilt from the batch headers), new epochs of
//     recovered segments are added, entries at or above the LEO dropped,
//     entries at or below the log start collapsed, and the file rewritten
//     atomically when that changed it.
//  8. Offsets. LogStart = max(checkpoint, first base). If the LEO is below
//     it, every segment is removed, an empty segment is created at LogStart,
//     epochs are cleared and producer state is empty; with no segment at
//     all an empty segment is created at LogStart. RecoveryPoint is the LEO
//     after a clean open that cut nothing, else min(checkpoint, LEO) (never
//     advanced by recovery), and at least LogStart.
//
// # Classification of a cut (recovery.md §2.8)
//
//	class              the invalid region...
//	torn-tail          is in the last segment holding data, at or after the
//	                   recovery point's page, and no structurally valid batch
//	                   follows it (short remainder, length past the end, bad
//	                   CRC of the final batch)
//	zero-tail          is a torn tail of zero bytes only (preallocation): a
//	                   note, not a problem (no offset is lost), its
//	                   quarantine copy sparse
//	corrupt-unflushed  is followed by a structurally valid batch (found by a
//	                   bounded resynchronisation scan for length, magic 2 and
//	                   CRC-32C; reported as a "salvage" problem, never
//	                   re-admitted), or breaks a structural rule, or lies in
//	                   a segment followed by data
//	corrupt-flushed    lies below the recovery point's position, outside the
//	                   page that holds it (unclean runs; the position is
//	                   found past the damage by resynchronising on the
//	                   next structurally valid batch), or in a segment
//	                   wholly below the recovery point's segment, or (Full
//	                   with a clean-shutdown marker) in a segment followed
//	                   by data
//
// Run cuts corrupt-flushed data as Kafka does, unless
// Options.RefuseFlushedCut: then it changes nothing and sets
// Report.Refused (the CLI's recover --apply without --force), or
// Options.KeepFlushed: then it stops before changing any segment and
// sets Report.Refused (a log's clean open). With a clean-shutdown marker
// the last segment's data below the recovery point is flushed too (the
// close synced it), so a corrupt first batch there is corrupt-flushed.
//
// The metadata log (__cluster_metadata-0) is always recovered in full,
// from recovery point 0 with the clean-shutdown marker ignored, as Kafka
// opens it. Options.Full validates every segment.
//
// Zeros after the data of a segment that is followed by data are a lost
// trim: they are cut and reported ("lost-trim") without dropping the
// segments after it. An overlap keeps the later segment and cuts the earlier
// one before it (§7.6); an empty segment below its predecessor's end is
// replaced by one at that end (§7.8); a segment whose first batch lies below
// its base is dropped with its successors (§7.7).
//
// # DryRun and Quarantine
//
// DryRun computes the same Report the repair would produce and changes
// nothing: every file stays byte-identical and no file or directory is
// created. Its status is "problems" exactly when Problems is not empty.
//
// # Problems, changes and notes
//
// Report.Problems is damage: each names the file and the byte position
// where it has one, and the cause of any cut is among them at the cut's
// position. Report.Changes lists every file Run writes, creates, truncates,
// renames or removes, with the reason; many are the routine steps of
// Kafka's own load (a missing index rebuilt, leftovers and orphan indexes
// removed, a replacement completed, stray snapshots removed, a snapshot
// written at the log end, leader-epoch entries past the log end dropped),
// which are not problems. Report.Notes inform (full-recovery,
// metadata-log, producer-snapshot: the snapshot at the log end could not
// be written, the disk being full).
//
// With Quarantine set, the old bytes of every change are first placed in
// that directory (Change.Saved names them): removed files are moved there,
// a cut tail is copied as `<name>.tail@<position>`, a replaced index,
// snapshot or checkpoint as `<name>.replaced`, a renamed file under its
// old name. Without it, files are deleted as Kafka does.
//
// # Kinds
//
// Problems: foreign-name, index, clean-marker-inconsistent, lost-trim, cut,
// corrupt-flushed, salvage, overlap, gap, snapshot (corrupt), swap (invalid
// replacement), orphan-index (no .deleted sibling: the data is missing),
// epoch-checkpoint, log-start-beyond-end, producer-replay,
// replay-incomplete, segment-dropped, refused. Changes: leftover,
// orphan-index, swap, index, cut, segment-dropped, segment-created,
// snapshot, producer-snapshot, epochs. Notes: full-recovery, metadata-log,
// epoch-decrease.
//
// # Concurrency
//
// Run must be the only user of the directory while it runs (the Log holds
// the directory lock). Separate directories may be recovered concurrently.
package recovery
