package partlog

import (
	"fmt"
	"math"
	"time"

	"github.com/partlog/partlog/cleaner"
)

// Options configure a Log. A nil *Options, or a zero field, means Kafka's
// default for that setting; docs/options.md lists every field against
// Kafka's configuration name, default and support.
type Options struct {
	// SegmentBytes is the size at which the active segment rolls
	// (segment.bytes). Default 1 GiB. The active segment's file is this
	// long (a hole past its data) but reserves disk only in steps ahead of
	// its data (see ReserveMaxBytes), and is mapped over 1 MiB while it
	// fits there (a reopened one over its data), then at the whole
	// SegmentBytes; the file is trimmed to its data on roll and close.
	SegmentBytes int64
	// SegmentBytes and the four fields after it are the ones every append
	// reads: together at the start they lie on one of the Log's hot lines
	// (TestLogAppendLines); keep them first.

	// WritePath chooses how appended bytes reach the page cache: stores
	// into the segment's shared mapping, or pwritev of the caller's bytes
	// (the stamped header from a scratch buffer, then the rest of each
	// batch: no copy in user space either way, no CRC computed). Reads
	// use the mapping in every case. Default WriteAuto.
	WritePath WritePath
	// SegmentMs rolls a segment whose first batch is older than this
	// (segment.ms). Default 7 days. Negative disables time-based rolling.
	SegmentMs int64
	// MaxBatchBytes is the largest batch a leader accepts
	// (max.message.bytes). Default 1 MiB + 12.
	MaxBatchBytes int64
	// The small fields below sit in the padding after MaxBatchBytes (a
	// Log embeds its Options: TestLogColdApart). A leader always walks
	// the records of a client's batch, as Kafka's LogValidator does
	// (recordRules).

	// CleanShutdown says the log directory's .kafka_cleanshutdown marker
	// was present: the directory is trusted as closed cleanly (only the
	// active segment's tail is validated). Default false: recovery runs
	// from RecoveryPoint on at every Open. OpenDir sets it.
	CleanShutdown bool
	// Strict makes Open fail with ErrNeedsRecovery instead of repairing
	// a directory.
	Strict bool
	// MessageTimestampType is CreateTime (the default: the producer's
	// timestamps are kept and the append is zero-copy) or LogAppendTime
	// (message.timestamp.type): see AppendAsLeader.
	MessageTimestampType TimestampType
	// CleanupPolicy is cleanup.policy: Delete (the default: retention by
	// DeleteOldSegments), Compact (the log cleaner keeps the last record
	// of each key; DeleteOldSegments then only deletes segments below the
	// log start) or CompactDelete (both).
	CleanupPolicy CleanupPolicy
	// CompressionType is compression.type: CompressionProducer (the
	// default: batches stored as the producer compressed them) or the
	// codec a leader recompresses client batches to (see CompressionType).
	CompressionType CompressionType
	// ReserveMaxBytes bounds the steps by which the active segment's disk
	// reservation grows. The .log is extended with fallocate ahead of the
	// write position (so a full disk is the error of an append, never a
	// SIGBUS): a new segment reserves 256 KiB, a cleanly reopened one
	// nothing beyond its data, and each extension reserves the append plus
	// a step that doubles when the previous step was used up within a
	// second and halves otherwise, from 256 KiB up to ReserveMaxBytes. Its
	// indexes grow the same way from one page, doubling up to 1 MiB at a
	// time. An idle partition therefore reserves at most ~264 KiB beyond
	// its data, a busy one at most ReserveMaxBytes, and a busy partition
	// makes one fallocate call per ReserveMaxBytes appended. Default
	// 16 MiB; negative reserves the whole SegmentBytes at segment creation
	// (and indexes still grow in steps).
	ReserveMaxBytes int64
	// SegmentJitterMs is subtracted, drawn uniformly per segment, from
	// SegmentMs (segment.jitter.ms). Default 0.
	SegmentJitterMs int64
	// MaxIndexBytes is the preallocated size of the offset and time
	// indexes of the active segment (segment.index.bytes). Default 10 MiB.
	MaxIndexBytes int64
	// IndexIntervalBytes is the number of bytes appended between offset
	// index entries (index.interval.bytes). Default 4096. Smaller values
	// make reads seek faster and indexes fill (and segments roll) sooner.
	// IndexEveryAppend (any negative value) is Kafka's 0: every append
	// but the first of a segment gets an entry. (The zero value means
	// the default here, unlike Kafka's index.interval.bytes=0; see
	// docs/options.md for every option against Kafka's names.)
	IndexIntervalBytes int64
	// LogStartOffset is the log start offset a caller persisted (Kafka
	// keeps it in the log directory's log-start-offset-checkpoint); Open
	// uses max(LogStartOffset, first segment's base offset). Default 0.
	LogStartOffset int64
	// PrefaultBytes is the largest window of the active segment kept
	// populated ahead of the write position, so appends store into
	// resident pages; a partition's window is about a second of its own
	// append rate, within this bound and its share of the budget.
	// The work runs on the process's shared prefault pool (one worker per
	// CPU, started on demand, within a process-wide budget of 256 MiB of
	// populated, not yet written pages), and only for partitions that are
	// appending through the mapping: an idle partition populates nothing,
	// and one that stopped appending for 10 s gives its pages ahead and
	// its share of the budget back (the pages stay in the page cache).
	// Default 8 MiB; negative disables it.
	PrefaultBytes int64
	// RecoveryPoint is the partition's recovery-point-offset-checkpoint
	// value; recovery validates from the segment holding it. Default 0:
	// the whole log is validated.
	RecoveryPoint int64
	// ProducerIDExpirationMs is how long a producer with no open
	// transaction is remembered after its last write
	// (producer.id.expiration.ms). Default 86 400 000 (1 day).
	ProducerIDExpirationMs int64
	// HighWatermark is the partition's replication-offset-checkpoint
	// value; Open restores the high watermark from it, clamped to
	// [log start, log end]. Default 0 (the log start offset). OpenDir
	// sets it.
	HighWatermark int64
	// TopicID is the expected topic id (partition.metadata). When not
	// zero, Open fails with ErrInconsistentTopicID if the directory's
	// partition.metadata names another id. Default: no check.
	TopicID TopicID
	// RetentionMs deletes sealed segments whose largest timestamp is
	// older than this (retention.ms), in DeleteOldSegments. Default 7
	// days; negative keeps segments forever.
	RetentionMs int64
	// RetentionBytes deletes the oldest sealed segments while the log is
	// larger than this (retention.bytes), in DeleteOldSegments. Default
	// (0) and negative: no size limit (Kafka's -1).
	RetentionBytes int64
	// FileDeleteDelayMs is how long the files of a deleted segment (or
	// a deleted partition directory) stay renamed with their .deleted
	// (-delete) suffix before they are removed (file.delete.delay.ms).
	// Default 60 000; negative removes them at once.
	FileDeleteDelayMs int64
	// MessageTimestampBeforeMaxMs and MessageTimestampAfterMaxMs bound
	// how far a CreateTime batch's timestamps may lie before or after
	// the leader's clock (message.timestamp.before.max.ms /
	// after.max.ms); a batch outside fails with ErrInvalidTimestamp.
	// Default (0) and negative: unbounded (Kafka's Long.MAX_VALUE).
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	// MappingCache bounds the mappings of sealed segments across logs.
	// Default: DefaultMappingCache(), shared by the process.
	MappingCache *MappingCache
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: a compacted
	// log is cleaned when its dirty section is more than this fraction of
	// its cleanable bytes. Default 0.5. CleanAnyDirt (any negative value)
	// is Kafka's 0: clean whenever something is dirty.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms: segments holding a
	// record newer than this are not cleaned. Default 0.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: a compacted log whose
	// oldest dirty segment is older than this is cleaned whatever its
	// dirty ratio. Default (0): unbounded (Kafka's Long.MAX_VALUE).
	MaxCompactionLagMs int64
	// DeleteRetentionMs is delete.retention.ms: how long the cleaner keeps
	// tombstones and transaction markers after it first found them
	// removable. Default 86 400 000 (1 day); negative is Kafka's 0.
	DeleteRetentionMs int64
	// Cleaner runs the cleanings of compacted logs on workers shared by
	// every log that uses it. Default: DefaultCleaner(), shared by the
	// process.
	Cleaner *Cleaner
	// FirstDirtyOffset is the partition's cleaner-offset-checkpoint entry
	// (where its next cleaning starts reading new keys; OpenDir sets it).
	// Default (0): none, the log start.
	FirstDirtyOffset int64
	// Now is the clock (time-based rolling). Default time.Now.
	Now func() time.Time
}

// WritePath says how appends hand their bytes to the page cache (see
// Options.WritePath).
type WritePath int

const (
	// WriteAuto writes with pwritev while the log's appends are being
	// made durable (a Flush or Sync in the last 1024 appends) and for
	// appends of 32 KiB or more, and stores into the mapping otherwise.
	// A flush after stores into a shared mapping costs more than one
	// after pwritev of the same bytes (written-back mapped pages are
	// write-protected and fault again on the next store, and populated
	// pages ahead of the writer are dirty zeros every fdatasync writes
	// out), and large stores pay page faults that pwritev does not; for
	// small appends that are not synced the stores avoid a syscall per
	// batch. One exception: after a Sync whose caller was alone in Sync
	// (one appender syncing each append), appends below 16 KiB store,
	// which measured faster there than pwritev (see loneWriteMinBytes).
	// BenchmarkWritePath in bench/ measures the three.
	WriteAuto WritePath = iota
	// WriteMapped always stores into the mapping.
	WriteMapped
	// WritePwrite always writes with pwritev.
	WritePwrite
)

// String names the write path.
func (p WritePath) String() string {
	switch p {
	case WriteAuto:
		return "auto"
	case WriteMapped:
		return "mapped"
	case WritePwrite:
		return "pwrite"
	}
	return fmt.Sprintf("WritePath(%d)", int(p))
}

// Defaults of Options (Kafka's, recovery.md §3.6).
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * 60 * 60 * 1000
	DefaultMaxIndexBytes      = 10 << 20
	DefaultIndexIntervalBytes = 4096
	DefaultMaxBatchBytes      = 1<<20 + 12
	DefaultPrefaultBytes      = 8 << 20
	DefaultRetentionMs        = 7 * 24 * 60 * 60 * 1000
	DefaultFileDeleteDelayMs  = 60_000
	// IndexEveryAppend is the IndexIntervalBytes that indexes every append
	// (Kafka's index.interval.bytes = 0).
	IndexEveryAppend = -1
	// CleanAnyDirt is the MinCleanableDirtyRatio of Kafka's
	// min.cleanable.dirty.ratio = 0.
	CleanAnyDirt = -1
)

// Zero stands for Kafka's value 0 in the fields whose zero value means
// the default: RetentionMs (every sealed segment is past retention),
// RetentionBytes (every sealed segment is over the limit), MaxBatchBytes
// (every batch is too large), MessageTimestampBeforeMaxMs and
// MessageTimestampAfterMaxMs (only timestamps at the leader's clock are
// accepted) and FileDeleteDelayMs (files are removed at once). Effective
// keeps it; docs/options.md maps every field.
const Zero int64 = math.MinInt64

// zeroOr is the value of a field that may hold Zero: 0 for Zero.
func zeroOr(v int64) int64 {
	if v == Zero {
		return 0
	}
	return v
}

// CleanupPolicy is Kafka's cleanup.policy (see Options.CleanupPolicy).
type CleanupPolicy = cleaner.Policy

// Cleanup policies.
const (
	Delete        = cleaner.Delete
	Compact       = cleaner.Compact
	CompactDelete = cleaner.CompactDelete
)

// ParseCleanupPolicy reads cleanup.policy as Kafka lists it ("delete",
// "compact", "compact,delete").
func ParseCleanupPolicy(s string) (CleanupPolicy, error) { return cleaner.ParsePolicy(s) }

// withDefaults returns a copy of o (nil allowed) with defaults filled in.
func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.SegmentBytes == 0 {
		r.SegmentBytes = DefaultSegmentBytes
	}
	if r.SegmentMs == 0 {
		r.SegmentMs = DefaultSegmentMs
	}
	if r.MaxIndexBytes == 0 {
		r.MaxIndexBytes = DefaultMaxIndexBytes
	}
	switch {
	case r.IndexIntervalBytes == 0:
		r.IndexIntervalBytes = DefaultIndexIntervalBytes
	case r.IndexIntervalBytes < 0:
		r.IndexIntervalBytes = 0
	}
	if r.MaxBatchBytes == 0 {
		r.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if r.PrefaultBytes == 0 {
		r.PrefaultBytes = DefaultPrefaultBytes
	}
	if r.RetentionMs == 0 {
		r.RetentionMs = DefaultRetentionMs
	}
	if r.FileDeleteDelayMs == 0 {
		r.FileDeleteDelayMs = DefaultFileDeleteDelayMs
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.CleanupPolicy == 0 {
		r.CleanupPolicy = Delete
	}
	switch {
	case r.MinCleanableDirtyRatio == 0:
		r.MinCleanableDirtyRatio = cleaner.DefaultMinCleanableRatio
	case r.MinCleanableDirtyRatio < 0:
		r.MinCleanableDirtyRatio = 0
	}
	if r.MaxCompactionLagMs == 0 {
		r.MaxCompactionLagMs = cleaner.DefaultMaxCompactionLag
	}
	switch {
	case r.DeleteRetentionMs == 0:
		r.DeleteRetentionMs = cleaner.DefaultDeleteRetentionMs
	case r.DeleteRetentionMs < 0:
		r.DeleteRetentionMs = 0
	}
	return r
}

// Validate returns why Open would refuse o (defaults filled in first):
// the settings Kafka refuses.
func (o *Options) Validate() error {
	e := o.withDefaults()
	return e.validate()
}

// validate rejects settings Kafka would reject.
func (o *Options) validate() error {
	switch {
	case o.SegmentBytes < 14 || o.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("partlog: SegmentBytes %d outside [14, 2^31-1]", o.SegmentBytes)
	case o.MaxIndexBytes < 12:
		return fmt.Errorf("partlog: MaxIndexBytes %d below one time-index entry", o.MaxIndexBytes)
	case o.LogStartOffset < 0:
		return fmt.Errorf("partlog: negative LogStartOffset %d", o.LogStartOffset)
	case o.SegmentJitterMs < 0:
		return fmt.Errorf("partlog: negative SegmentJitterMs %d", o.SegmentJitterMs)
	case o.MessageTimestampType != CreateTime && o.MessageTimestampType != LogAppendTime:
		return fmt.Errorf("partlog: unknown MessageTimestampType %d", o.MessageTimestampType)
	case o.HighWatermark < 0:
		return fmt.Errorf("partlog: negative HighWatermark %d", o.HighWatermark)
	case o.MaxBatchBytes < 0 && o.MaxBatchBytes != Zero:
		return fmt.Errorf("partlog: negative MaxBatchBytes %d", o.MaxBatchBytes)
	case o.WritePath < WriteAuto || o.WritePath > WritePwrite:
		return fmt.Errorf("partlog: unknown WritePath %d", o.WritePath)
	case o.CompressionType < CompressionProducer || o.CompressionType > CompressionZstd:
		return fmt.Errorf("partlog: unknown CompressionType %d", o.CompressionType)
	case o.CleanupPolicy&^cleaner.CompactDelete != 0:
		return fmt.Errorf("partlog: unknown CleanupPolicy %d", o.CleanupPolicy)
	}
	c := o.cleanerConfig()
	return c.Validate()
}

// Effective returns the options a Log opened with o runs with: a copy of o
// with every zero field replaced by its default (a nil o: every default).
func (o *Options) Effective() Options { return o.withDefaults() }
