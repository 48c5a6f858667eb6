package recovery

import (
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"time"

	"github.com/partlog/partlog/segment"
)

// Options says what Run knows about the directory and how it may change it.
type Options struct {
	// Clean is true when the log directory's .kafka_cleanshutdown marker
	// was present when loading began.
	Clean bool
	// RecoveryPoint is the partition's value from
	// recovery-point-offset-checkpoint, -1 when it has none (every segment
	// is then recovered, as with 0).
	RecoveryPoint int64
	// LogStartOffset is the partition's value from
	// log-start-offset-checkpoint, 0 when it has none.
	LogStartOffset int64
	// Segment supplies SegmentBytes, MaxIndexBytes and IndexIntervalBytes;
	// IndexIntervalBytes drives the index rebuild (recovery.md §2.6) and
	// must be the log's setting (0 indexes every batch but the first; a
	// negative value means Kafka's 4096). Zero SegmentBytes and
	// MaxIndexBytes take Kafka's defaults.
	Segment segment.Config
	// Entries, if set, is the directory's listing, just read by the caller
	// (a log's open lists it to tell a new partition, NewEntries): Load
	// starts from it instead of listing the directory again.
	Entries []fs.DirEntry
	// DryRun computes the Report and changes nothing on disk: every file
	// stays byte-identical and no file or directory is created.
	DryRun bool
	// Quarantine, when set, is a directory that receives every byte Run
	// removes (cut tails, dropped segments, replaced indexes and
	// snapshots, removed leftovers) before it is removed. It is created
	// on first use. "" deletes as Kafka does.
	Quarantine string
	// Parallelism is the number of segments validated at once; 0 means
	// runtime.GOMAXPROCS(0).
	Parallelism int
	// ProducerIDExpirationMs is producer.id.expiration.ms for the producer
	// state rebuild; 0 means one day.
	ProducerIDExpirationMs int64
	// Now is the clock used for producer expiration; nil means time.Now.
	Now func() time.Time
	// CheckSnapshots reads every producer snapshot of the directory, not
	// only the one the replay starts from: a corrupt one is a problem and
	// is discarded (the CLI sets it; an open reads only what it needs).
	CheckSnapshots bool
	// Full validates every segment from byte 0, whatever the recovery
	// point and the clean-shutdown marker say; damage found in a segment
	// that would otherwise have been trusted is corrupt-flushed.
	Full bool
	// RefuseFlushedCut makes a Run that would cut data below the recovery
	// point (class corrupt-flushed) change nothing at all: the Report is
	// the plan (as under DryRun) with Refused set. Without it the cut is
	// made, as Kafka makes it (recovery.md §2.8).
	RefuseFlushedCut bool
	// KeepFlushed is RefuseFlushedCut for a cut only: a repair whose cut
	// lies below the recovery point changes nothing and sets Refused,
	// while damage left as it is in a segment wholly below the recovery
	// point (CutFlushed unset) does not stop the other repairs. A log's
	// clean open sets it: Kafka trusts a cleanly shut down directory and
	// would cut nothing of it.
	KeepFlushed bool
	// CutFlushed cuts damage found in a segment wholly below the recovery
	// point (with the clean-shutdown marker: any segment followed by data)
	// as damage elsewhere is cut. Without it such a segment is left as it
	// is and the damage reported (class corrupt-flushed): Kafka never scans
	// those segments, so its load would not cut them either (recovery.md
	// E2). The CLI's recover --apply --force sets it.
	CutFlushed bool
	// OpenActive, with Clean and without DryRun, opens the last segment's
	// files for appending before checking them (segment.OpenPending) and,
	// when it is kept as it is, returns it in Loaded.Active as the active
	// segment, with the tail the check found: a log's clean reopen opens,
	// reads and checks each file once. The checks are the same.
	OpenActive bool

	// hooks are test seams (I/O error injection, crash points).
	hooks *hooks
}

// hooks lets tests inject failures. Every field may be nil.
type hooks struct {
	// open is called before a .log, index or snapshot file is opened for
	// reading; a non-nil error is returned as the open's error.
	open func(path string) error
	// write is called before a replacement file is created; a non-nil
	// error is returned as the create's error.
	write func(path string) error
	// copy is called after each write into a quarantine copy (the file
	// then holds some bytes); a non-nil error fails that write, as a full
	// disk would.
	copy func(path string) error
	// step is called after each step that changes the directory; a
	// non-nil error stops Run there, as a crash would.
	step func(name string) error
}

func (o *Options) withDefaults() Options {
	c := *o
	if c.Segment.SegmentBytes <= 0 {
		c.Segment.SegmentBytes = 1 << 30
	}
	if c.Segment.MaxIndexBytes <= 0 {
		c.Segment.MaxIndexBytes = 10 << 20
	}
	if c.Segment.IndexIntervalBytes < 0 {
		c.Segment.IndexIntervalBytes = 4096
	}
	if c.Parallelism <= 0 {
		c.Parallelism = runtime.GOMAXPROCS(0)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Status values of Report.Status.
const (
	// StatusOK: no problem was found. Under DryRun, Changes may still list
	// routine normalisation (the steps Kafka's own load takes: an index
	// rebuilt, a snapshot written at the log end, epoch entries past the
	// log end dropped); without DryRun, nothing was changed.
	StatusOK = "ok"
	// StatusRepaired: Run changed the directory (Changes lists how) and
	// no problem is left.
	StatusRepaired = "repaired"
	// StatusProblems: Problems is not empty and, unless Run repaired
	// them, something is left to do: every problem under DryRun, an
	// ignored foreign file, or a refused cut (Refused).
	StatusProblems = "problems"
)

// Classes of a cut (recovery.md §2.8).
const (
	// ClassTornTail is an incomplete final write in the unflushed region
	// of the last segment holding data.
	ClassTornTail = "torn-tail"
	// ClassZeroTail is a torn tail made only of zero bytes (preallocation).
	ClassZeroTail = "zero-tail"
	// ClassCorruptUnflushed is invalid data in the unflushed region that is
	// not a torn tail: a structurally valid batch follows it, or a header
	// field outside the CRC breaks the rules.
	ClassCorruptUnflushed = "corrupt-unflushed"
	// ClassCorruptFlushed is invalid data below the recovery point's
	// position, outside the page that holds it.
	ClassCorruptFlushed = "corrupt-flushed"
)

// Report is the outcome of Run. Its JSON form is a contract with the CLI.
type Report struct {
	// Dir is the partition directory.
	Dir string `json:"dir"`
	// CleanShutdown echoes Options.Clean.
	CleanShutdown bool `json:"cleanShutdown"`
	// LogStartOffset is max(checkpoint, first segment base) after Run.
	LogStartOffset int64 `json:"logStartOffset"`
	// LogEndOffset is the LEO computed from validated data.
	LogEndOffset int64 `json:"logEndOffset"`
	// RecoveryPoint is the RP the log must use (never above the LEO).
	RecoveryPoint int64 `json:"recoveryPoint"`
	// Segments lists the segments that remain, oldest first.
	Segments []SegmentReport `json:"segments"`
	// Truncation describes the cut, or is nil when nothing was cut.
	Truncation *Truncation `json:"truncation"`
	// IndexesRebuilt lists the base offsets of segments whose offset,
	// time or transaction index was (or would be) rewritten or created.
	IndexesRebuilt []int64 `json:"indexesRebuilt"`
	// Producers is the number of producer entries at the LEO.
	Producers int `json:"producers"`
	// LastStableOffset is the LSO with the high watermark at the LEO.
	LastStableOffset int64 `json:"lastStableOffset"`
	// Barriers are the offsets of the mirroring barriers met in replay.
	Barriers []int64 `json:"barriers"`
	// Problems lists the damage found, repaired or not: each names the
	// file and, where it has one, the byte position. The cause of a
	// truncation is always among them, at the cut's position.
	Problems []Problem `json:"problems"`
	// Changes lists every file Run writes, creates, truncates, renames or
	// removes (under DryRun: would), each with its reason, in the order
	// they are made.
	Changes []Change `json:"changes"`
	// Notes are informational findings that are neither damage nor a
	// change (a full recovery for want of a recovery point, ...).
	Notes []Problem `json:"notes"`
	// Refused is set when Options.RefuseFlushedCut stopped a repair that
	// would have cut data below the recovery point: nothing was changed,
	// and the rest of the Report is the plan.
	Refused string `json:"refused,omitempty"`
	// Quarantine is the quarantine directory when something was placed in
	// it, else nil.
	Quarantine *string `json:"quarantine"`
	// RemovedFiles are the base names of the files removed (or that would
	// be removed under DryRun).
	RemovedFiles []string `json:"removedFiles"`
	// SnapshotsUsed is the offset of the snapshot the producer state was
	// loaded from, or nil when it was rebuilt from the log start.
	SnapshotsUsed *int64 `json:"snapshotsUsed"`
	// SnapshotsDiscarded are the offsets of snapshots found corrupt,
	// beyond the LEO, at or below the log start, or stray.
	SnapshotsDiscarded []int64 `json:"snapshotsDiscarded"`
	// Epochs is the leader-epoch list after Run.
	Epochs []EpochReport `json:"epochs"`
	// Status is StatusOK, StatusRepaired or StatusProblems.
	Status string `json:"status"`

	// Salvage summarises the structurally valid batches found after a
	// corrupt-unflushed cut (also given as a "salvage" problem).
	Salvage *Salvage `json:"-"`
	// changed records that the directory was (or would be) changed.
	changed bool
}

// SegmentReport is one remaining segment.
type SegmentReport struct {
	// BaseOffset is the segment's base offset.
	BaseOffset int64 `json:"baseOffset"`
	// SizeBytes is the length of its .log after Run.
	SizeBytes int64 `json:"sizeBytes"`
	// Batches is the number of batches counted (validated segments) or -1
	// for a trusted segment that was not scanned.
	Batches int `json:"batches"`
	// LastOffset is the last offset of the segment, or -1 when it is
	// empty or was not scanned.
	LastOffset int64 `json:"lastOffset"`
}

// Truncation describes where the log was cut.
type Truncation struct {
	// SegmentBaseOffset is the segment that was cut.
	SegmentBaseOffset int64 `json:"segmentBaseOffset"`
	// Position is the byte position of the cut in its .log.
	Position int64 `json:"position"`
	// Offset is the first offset removed: the LEO after the cut.
	Offset int64 `json:"offset"`
	// BytesRemoved counts the .log bytes removed, later segments included.
	BytesRemoved int64 `json:"bytesRemoved"`
	// Reason says why the batch at Position was rejected.
	Reason string `json:"reason"`
	// Class is one of the Class* constants.
	Class string `json:"class"`
}

// Salvage counts the valid-looking batches lost with a cut.
type Salvage struct {
	// Batches is the number of valid-looking batches.
	Batches int
	// FirstOffset and LastOffset bound their offsets.
	FirstOffset, LastOffset int64
	// Bytes is their total size.
	Bytes int64
}

// Problem is one finding.
type Problem struct {
	// File is the base name of the file concerned ("" for the directory).
	File string `json:"file"`
	// Position is a byte position in File, or -1.
	Position int64 `json:"position"`
	// Kind is a short keyword (see doc.go).
	Kind string `json:"kind"`
	// Detail is a human-readable description.
	Detail string `json:"detail"`
}

// Actions of a Change.
const (
	ActionCreate   = "create"   // a new file
	ActionWrite    = "write"    // an existing file replaced by new content
	ActionTruncate = "truncate" // an existing file cut to a shorter length
	ActionRename   = "rename"   // an existing file renamed to Change.To
	ActionRemove   = "remove"   // an existing file removed
)

// Change is one file Run changes (or would change, under DryRun).
type Change struct {
	// File is the base name of the file in the partition directory.
	File string `json:"file"`
	// Action is one of the Action* constants.
	Action string `json:"action"`
	// Kind is the keyword of the step that makes the change (the problem
	// kinds of doc.go).
	Kind string `json:"kind"`
	// Reason says why, in words.
	Reason string `json:"reason"`
	// To is the new name of a renamed file.
	To string `json:"to,omitempty"`
	// Saved is the base name, in the quarantine directory, of the copy of
	// the old bytes (the removed tail of a truncated file); "" when no
	// quarantine is set or the file did not exist.
	Saved string `json:"saved,omitempty"`
}

// EpochReport is one leader-epoch entry.
type EpochReport struct {
	// Epoch is the leader epoch.
	Epoch int32 `json:"epoch"`
	// StartOffset is the first offset written in it.
	StartOffset int64 `json:"startOffset"`
}

// Problem kinds.
const (
	kindFullRecovery     = "full-recovery"
	kindForeignName      = "foreign-name"
	kindLeftover         = "leftover"
	kindOrphanIndex      = "orphan-index"
	kindSwap             = "swap"
	kindIndex            = "index"
	kindCleanMarker      = "clean-marker-inconsistent"
	kindLostTrim         = "lost-trim"
	kindCut              = "cut"
	kindFlushedDamage    = "corrupt-flushed"
	kindSalvage          = "salvage"
	kindOverlap          = "overlap"
	kindGap              = "gap"
	kindSnapshot         = "snapshot"
	kindEpochCheckpoint  = "epoch-checkpoint"
	kindLogStart         = "log-start-beyond-end"
	kindProducerReplay   = "producer-replay"
	kindSegmentDropped   = "segment-dropped"
	kindSegmentCreated   = "segment-created"
	kindEpochDecrease    = "epoch-decrease"
	kindReplayIncomplete = "replay-incomplete"
	kindProducerSnapshot = "producer-snapshot"
	kindEpochs           = "epochs"
	kindMetadataLog      = "metadata-log"
	kindRefused          = "refused"
)

func (r *Report) problem(file string, pos int64, kind, format string, args ...any) {
	r.Problems = append(r.Problems, Problem{File: file, Position: pos, Kind: kind, Detail: sprintf(format, args...)})
}

// note records an informational finding.
func (r *Report) note(file string, kind, format string, args ...any) {
	r.noteAt(file, -1, kind, format, args...)
}

// noteAt records an informational finding at a byte position of file.
func (r *Report) noteAt(file string, pos int64, kind, format string, args ...any) {
	r.Notes = append(r.Notes, Problem{File: file, Position: pos, Kind: kind, Detail: sprintf(format, args...)})
}

// change records a change to file.
func (r *Report) change(c Change) {
	r.changed = true
	r.Changes = append(r.Changes, c)
}

// leftUndone reports whether a problem stays after a repair: an ignored
// foreign file, missing offsets and batches the producer replay could not
// apply are reported and never changed.
func leftUndone(p Problem) bool {
	switch p.Kind {
	case kindForeignName, kindProducerReplay, kindReplayIncomplete, kindRefused, kindFlushedDamage:
		return true
	}
	return false
}

// finish sets the status: "problems" when a problem is left (every problem
// under DryRun), else "repaired" when Run changed the directory, else "ok".
func (r *Report) finish(dryRun bool) {
	left := false
	for _, p := range r.Problems {
		if dryRun || leftUndone(p) {
			left = true
		}
	}
	switch {
	case left || (len(r.Problems) > 0 && !r.changed):
		r.Status = StatusProblems
	case r.changed && !dryRun:
		r.Status = StatusRepaired
	default:
		r.Status = StatusOK
	}
}

// Summary is a one-line description of the report for error messages:
// the status, the cut if any, and the first problems.
func (r *Report) Summary() string {
	var b strings.Builder
	b.WriteString(r.Status)
	if t := r.Truncation; t != nil {
		fmt.Fprintf(&b, "; %s in segment %d at position %d (offset %d, %d bytes): %s",
			t.Class, t.SegmentBaseOffset, t.Position, t.Offset, t.BytesRemoved, t.Reason)
	}
	if n := len(r.Changes); n > 0 {
		fmt.Fprintf(&b, "; %d file changes", n)
	}
	if r.Refused != "" {
		fmt.Fprintf(&b, "; refused: %s", r.Refused)
	}
	for i, p := range r.Problems {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more problems", len(r.Problems)-3)
			break
		}
		fmt.Fprintf(&b, "; %s %s: %s", p.Kind, p.File, p.Detail)
	}
	return b.String()
}
