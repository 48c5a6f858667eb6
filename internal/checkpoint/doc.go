// Package checkpoint reads and writes Kafka's small text files next to the
// logs, byte-compatible with Apache Kafka (docs/formats.md §6,
// recovery.md §1.3.7, §1.5, §1.6):
//
//   - the generic checkpoint format (ParseEntries, AppendEntries), and on
//     top of it recovery-point-offset-checkpoint, log-start-offset-checkpoint
//     and replication-offset-checkpoint (Offsets: `topic partition offset`)
//     and leader-epoch-checkpoint (LeaderEpochs: `epoch startOffset`);
//   - partition.metadata (PartitionMetadata: `version: 0` / `topic_id: …`);
//   - the .kafka_cleanshutdown marker (CleanShutdown: a small JSON object).
//
// # Generic checkpoint format
//
// UTF-8 text; lines end with "\n" when written, and "\n", "\r\n" or "\r"
// are accepted when read:
//
//	<version>      decimal int (0 for every file here)
//	<count>        decimal int: number of entry lines that follow
//	<entry>        count lines; fields separated by one space when written,
//	               split on runs of white space when read
//
// The last line ends with a newline, also when the count line is the last
// line. Reading follows Kafka's tolerances: an empty file, or a file with
// only the version line, holds no entries; otherwise the version must
// match, every entry line must split into the expected number of fields
// (leading white space makes an empty first field and fails; trailing
// white space is dropped, as Java's String.split does) with numeric fields
// that parse, and the number of entry lines must equal count. Numbers are
// decimal with an optional sign and ASCII digits only. Any violation is a
// *CorruptionError (errors.Is(err, ErrCorrupt)) naming the file and line.
// What to do about it is the caller's decision: Kafka treats a bad
// recovery-point or log-start checkpoint as empty, and a bad leader-epoch
// checkpoint as a failed log directory.
//
// # Writing
//
// Checkpoints and partition.metadata are replaced atomically, as Kafka
// does: the new content goes to `<file>.tmp`, which is fsynced and renamed
// over `<file>`, and then the directory is fsynced (WriteFileAtomic).
// Kafka's loader ignores `*.tmp` files and the next write truncates a stale
// one. The clean-shutdown marker is written in place and fsynced, as Kafka
// does; unlike Kafka, the directory is fsynced too, so that the marker's
// creation and removal are durable when the call returns.
//
// # Example
//
//	offsets, err := checkpoint.ReadOffsets(filepath.Join(logDir, checkpoint.RecoveryPointFile))
//	offsets[checkpoint.TopicPartition{Topic: "orders", Partition: 0}] = 1534
//	err = checkpoint.WriteOffsets(filepath.Join(logDir, checkpoint.RecoveryPointFile), offsets)
//
// # Concurrency
//
// Functions are safe for concurrent use on different files. Writers of the
// same file must be serialised by the caller (they share the `.tmp` name).
package checkpoint
