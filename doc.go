// Package partlog stores Kafka partition logs: a Go broker embeds it as
// its data plane, and a tool uses it to read or repair the directories
// Apache Kafka writes. The files are Kafka's, byte for byte (20-digit
// named segments, each a .log of v2 record batches with its .index,
// .timeindex and .txnindex; producer snapshots; leader-epoch and
// directory checkpoints), so a directory moves between partlog and Kafka
// either way.
//
// A Log is one partition directory, a Dir a whole log directory (Kafka's
// log.dirs entry):
//
//	l, err := partlog.Open("/data/orders-0", nil) // nil: Kafka's defaults; recovers after a crash
//	info, err := l.AppendAsLeader(produceRequestBytes, leaderEpoch)
//	err = l.Sync(ctx, info.LastOffset+1)           // acks=all: wait until durable
//	view, err := l.Read(offset, 1<<20, l.HighWatermark())
//	// ... send view.Records: whole batches, as stored ...
//	view.Release()                                 // every view, once
//	err = l.Close()
//
// OpenDir opens a log directory with its lock and checkpoints and every
// <topic>-<n> partition in it; Dir.Create and Dir.Delete add and remove
// partitions as Kafka does. Package batch reads the batches of a view
// (batch.NewIterator) and the records of each (View.RecordData, then
// View.Records; see its examples).
//
// What a broker needs beside appends and reads is here too: Offsets (log
// start, high watermark, last stable offset, log end and recovery point in
// one reading), WaitLogEndOffset and WaitHighWatermark (long polls),
// OffsetForTimestamp (ListOffsets), EndOffsetForEpoch and TruncateAt (a
// follower's truncation), DeleteOldSegments and Size (retention), Compact
// (compacted topics) and KafkaErrorCode, the Kafka error code of every
// error returned.
//
// Using a Log: one goroutine appends at a time (appends of several
// goroutines are serialised); any number read concurrently. A view pins
// the segment it was read from until it is released. Appends are durable
// once Sync or Flush returns, as with Kafka's default of no fsync per
// append; a failed flush fails the log (ErrFailed: reopen it). Corrupt
// files give errors matching ErrCorrupt; data below the recovery point of
// a cleanly shut down partition is never cut by Open (ErrFlushedDamage).
//
// The repository's docs/ describe the formats (formats.md), opening and
// recovery (recovery.md), producer state (producer-state.md), mirroring
// (mirror.md) and each option beside Kafka's configuration name
// (options.md); "§" references in the documentation point there. How the
// engine works inside (its invariants, locks and the designs it rejected)
// is in ARCHITECTURE.md.
package partlog
