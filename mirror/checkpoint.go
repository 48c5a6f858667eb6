package mirror

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/corrupt"
	"github.com/partlog/partlog/internal/crc32c"
	"github.com/partlog/partlog/internal/fsutil"
)

// CheckpointFile is the name of the mirror checkpoint in a partition
// directory (mirror.md §2.4). Format of partlog; versioned; do not change
// without bumping CheckpointVersion.
const CheckpointFile = "mirror.checkpoint"

// CheckpointVersion is the version on the first line of mirror.checkpoint.
const CheckpointVersion = 1

const checkpointMagic = "mirror-checkpoint"

// checkpointKeys are the keys of mirror.checkpoint, in their only valid
// order (mirror.md §2.4). The header line comes first and crc32c last.
var checkpointKeys = [...]string{
	"state", "step", "mirror_name", "source_cluster_id", "topic_id", "partition", "session",
	"align_target_epoch", "align_target_offset", "last_mirror_epoch", "last_mirror_offset",
	"stop_policy", "stop_leader_epoch", "barrier_offset", "updated_ms",
}

// TopicID is a topic's 128-bit UUID, printed as 22 characters of URL-safe
// base64 without padding.
type TopicID = checkpoint.TopicID

// ParseTopicID parses the 22-character text form of a topic id.
func ParseTopicID(s string) (TopicID, error) { return checkpoint.ParseTopicID(s) }

// SessionID numbers the mirror sessions of a partition: it grows by one
// at every LOG_ALIGNMENT and fences appends of an older fetch loop.
type SessionID int64

// Checkpoint is the content of mirror.checkpoint: the authority for the
// mirror state of one partition (the log stays the authority for data and
// producer state). Integers use -1 for "unset".
type Checkpoint struct {
	State State
	Step  Step
	// MirrorName names the mirror link; SourceClusterID is the cluster the
	// session mirrors from. Either may be empty; neither may contain white
	// space or control characters.
	MirrorName      string
	SourceClusterID string
	TopicID         TopicID
	Partition       int32
	Session         SessionID
	// AlignTargetEpoch/AlignTargetOffset: the truncation target resolved
	// by LOG_ALIGNMENT (epoch -1 when the source had no position for us).
	AlignTargetEpoch  int32
	AlignTargetOffset int64
	// LastMirrorEpoch/LastMirrorOffset: LME and LMO, recorded by STOPPING
	// step S3; -1 before.
	LastMirrorEpoch  int32
	LastMirrorOffset int64
	StopPolicy       StopPolicy
	// StopLeaderEpoch is E_stop (S4), BarrierOffset the barrier's offset
	// (S6); -1 before.
	StopLeaderEpoch int32
	BarrierOffset   int64
	// UpdatedMs is the wall-clock time of the write, in milliseconds.
	UpdatedMs int64
}

// newCheckpoint returns a checkpoint with every optional field unset.
func newCheckpoint() Checkpoint {
	return Checkpoint{AlignTargetEpoch: -1, AlignTargetOffset: -1, LastMirrorEpoch: -1,
		LastMirrorOffset: -1, StopLeaderEpoch: -1, BarrierOffset: -1}
}

// ErrCorruptCheckpoint marks every failure to decode mirror.checkpoint;
// the concrete error is a *CheckpointError. It wraps partlog's one
// corruption marker (partlog.ErrCorrupt).
var ErrCorruptCheckpoint = corrupt.Sentinel("partlog/mirror: corrupt mirror.checkpoint")

// CheckpointError says why mirror.checkpoint could not be decoded, and
// where: Path is the file (empty when bytes were decoded directly), Line
// the 1-based line of the problem, 0 when it concerns the whole file (CRC,
// length, encoding). errors.Is(err, ErrCorruptCheckpoint) holds for it.
type CheckpointError = corrupt.Error

// corruptCheckpoint builds a *CheckpointError; string and []byte
// arguments (bad input) are shortened to an excerpt of ~100 bytes.
func corruptCheckpoint(line int, format string, args ...any) *CheckpointError {
	return &CheckpointError{Kind: ErrCorruptCheckpoint, Pos: -1, Line: line, Reason: fmt.Sprintf(format, fsutil.Clip(args)...)}
}

// maxCheckpointSize bounds what ParseCheckpoint accepts; a valid file is
// a few hundred bytes (two strings of at most maxStringLen).
const maxCheckpointSize = 4096

// maxStringLen bounds mirror_name and source_cluster_id.
const maxStringLen = 1024

// validString reports whether s can be written as a checkpoint value.
func validString(s string) bool {
	if len(s) > maxStringLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == 0x85 || r == 0xa0 || r == 0x2028 || r == 0x2029 {
			return false
		}
	}
	return true
}

// AppendCheckpoint appends the encoding of c to dst:
//
//	mirror-checkpoint 1\n
//	<key> <value>\n      for each key of the fixed list, in order
//	crc32c <8 lowercase hex digits>\n
//
// The CRC-32C covers every preceding byte. It fails with ErrInvalidCheckpoint
// for a value that could not be read back.
func AppendCheckpoint(dst []byte, c *Checkpoint) ([]byte, error) {
	if err := c.validate(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = fmt.Appendf(dst, "%s %d\n", checkpointMagic, CheckpointVersion)
	for i, k := range checkpointKeys {
		dst = append(dst, k...)
		dst = append(dst, ' ')
		dst = append(dst, c.value(i)...)
		dst = append(dst, '\n')
	}
	sum := crc32c.Checksum(dst[start:])
	return fmt.Appendf(dst, "crc32c %08x\n", sum), nil
}

// ErrInvalidCheckpoint: AppendCheckpoint was given a Checkpoint whose
// fields cannot be encoded (or would not decode as the same values).
var ErrInvalidCheckpoint = errors.New("partlog/mirror: checkpoint value cannot be written")

func (c *Checkpoint) validate() error {
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrInvalidCheckpoint, what) }
	switch {
	case c.State == StateNone || int(c.State) >= len(stateNames):
		return bad("state " + c.State.String())
	case !validStep(c.State, c.Step):
		return bad("step " + c.Step.String() + " in state " + c.State.String())
	case !validString(c.MirrorName):
		return bad("mirror name")
	case !validString(c.SourceClusterID):
		return bad("source cluster id")
	case c.Partition < 0:
		return bad("negative partition")
	case c.Session < 0:
		return bad("negative session")
	case c.AlignTargetEpoch < -1 || c.LastMirrorEpoch < -1 || c.StopLeaderEpoch < -1:
		return bad("epoch below -1")
	case c.AlignTargetOffset < -1 || c.LastMirrorOffset < -1 || c.BarrierOffset < -1:
		return bad("offset below -1")
	case c.StopPolicy > AbortOpen:
		return bad("stop policy")
	}
	return nil
}

// value returns the text of the i-th key's value.
func (c *Checkpoint) value(i int) string {
	switch checkpointKeys[i] {
	case "state":
		return c.State.String()
	case "step":
		return c.Step.String()
	case "mirror_name":
		return c.MirrorName
	case "source_cluster_id":
		return c.SourceClusterID
	case "topic_id":
		return c.TopicID.String()
	case "partition":
		return strconv.FormatInt(int64(c.Partition), 10)
	case "session":
		return strconv.FormatInt(int64(c.Session), 10)
	case "align_target_epoch":
		return strconv.FormatInt(int64(c.AlignTargetEpoch), 10)
	case "align_target_offset":
		return strconv.FormatInt(c.AlignTargetOffset, 10)
	case "last_mirror_epoch":
		return strconv.FormatInt(int64(c.LastMirrorEpoch), 10)
	case "last_mirror_offset":
		return strconv.FormatInt(c.LastMirrorOffset, 10)
	case "stop_policy":
		return c.StopPolicy.String()
	case "stop_leader_epoch":
		return strconv.FormatInt(int64(c.StopLeaderEpoch), 10)
	case "barrier_offset":
		return strconv.FormatInt(c.BarrierOffset, 10)
	default: // updated_ms
		return strconv.FormatInt(c.UpdatedMs, 10)
	}
}

// parseInt accepts only the canonical decimal form (what FormatInt
// writes), so that every valid file has exactly one encoding.
func parseInt(s string, bits int, min int64) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil || strconv.FormatInt(v, 10) != s || v < min {
		return 0, false
	}
	return v, true
}

// ParseCheckpoint decodes mirror.checkpoint. Every failure is a
// *CheckpointError (errors.Is(err, ErrCorruptCheckpoint)): a wrong header
// or version, a missing, extra or misplaced key, a value of the wrong
// syntax or range, a step that does not belong to the state, trailing
// bytes, or a CRC that does not match.
func ParseCheckpoint(data []byte) (Checkpoint, error) {
	c := newCheckpoint()
	if len(data) > maxCheckpointSize {
		return c, corruptCheckpoint(0, "%d bytes, more than %d", len(data), maxCheckpointSize)
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return c, corruptCheckpoint(0, "does not end with a line feed (truncated?)")
	}
	lines := strings.SplitAfter(string(data[:len(data)-1]), "\n")
	want := 1 + len(checkpointKeys) + 1
	if len(lines) != want {
		return c, corruptCheckpoint(0, "%d lines, want %d", len(lines), want)
	}
	// The CRC first: it proves the rest was written by us.
	crcLine := lines[want-1]
	hexSum, ok := strings.CutPrefix(crcLine, "crc32c ")
	if !ok || len(hexSum) != 8 || strings.ToLower(hexSum) != hexSum {
		return c, corruptCheckpoint(want, "malformed crc32c line %q", crcLine)
	}
	var sumBytes [4]byte
	if _, err := hex.Decode(sumBytes[:], []byte(hexSum)); err != nil {
		return c, corruptCheckpoint(want, "malformed crc32c line %q", crcLine)
	}
	stored := uint32(sumBytes[0])<<24 | uint32(sumBytes[1])<<16 | uint32(sumBytes[2])<<8 | uint32(sumBytes[3])
	covered := len(data) - len(crcLine) - 1
	if got := crc32c.Checksum(data[:covered]); got != stored {
		return c, corruptCheckpoint(0, "crc32c mismatch: stored %08x, computed %08x", stored, got)
	}
	header := strings.TrimSuffix(lines[0], "\n")
	ver, ok := strings.CutPrefix(header, checkpointMagic+" ")
	if !ok {
		return c, corruptCheckpoint(1, "bad header %q", header)
	}
	if v, ok := parseInt(ver, 32, 0); !ok || v != CheckpointVersion {
		return c, corruptCheckpoint(1, "unsupported version %q, want %d", ver, CheckpointVersion)
	}
	for i, k := range checkpointKeys {
		line := strings.TrimSuffix(lines[1+i], "\n")
		n := 2 + i
		v, ok := strings.CutPrefix(line, k+" ")
		if !ok {
			return c, corruptCheckpoint(n, "want key %q, found %q", k, line)
		}
		if err := c.set(k, v); err != "" {
			return c, corruptCheckpoint(n, "%s: %s", k, err)
		}
	}
	if !validStep(c.State, c.Step) {
		return c, corruptCheckpoint(3, "step %s does not belong to state %s", c.Step, c.State)
	}
	return c, nil
}

// set stores one value; it returns why the value is wrong, or "".
func (c *Checkpoint) set(key, v string) string {
	intField := func(bits int, min int64, dst func(int64)) string {
		n, ok := parseInt(v, bits, min)
		if !ok {
			return fmt.Sprintf("bad value %q", v)
		}
		dst(n)
		return ""
	}
	switch key {
	case "state":
		s, ok := parseState(v)
		if !ok {
			return fmt.Sprintf("unknown state %q", v)
		}
		c.State = s
	case "step":
		s, ok := parseStep(v)
		if !ok {
			return fmt.Sprintf("unknown step %q", v)
		}
		c.Step = s
	case "mirror_name", "source_cluster_id":
		if !validString(v) {
			return fmt.Sprintf("bad value %q", v)
		}
		if key == "mirror_name" {
			c.MirrorName = v
		} else {
			c.SourceClusterID = v
		}
	case "topic_id":
		id, err := checkpoint.ParseTopicID(v)
		if err != nil || id.String() != v {
			return fmt.Sprintf("bad topic id %q", v)
		}
		c.TopicID = id
	case "partition":
		return intField(32, 0, func(n int64) { c.Partition = int32(n) })
	case "session":
		return intField(64, 0, func(n int64) { c.Session = SessionID(n) })
	case "align_target_epoch":
		return intField(32, -1, func(n int64) { c.AlignTargetEpoch = int32(n) })
	case "align_target_offset":
		return intField(64, -1, func(n int64) { c.AlignTargetOffset = n })
	case "last_mirror_epoch":
		return intField(32, -1, func(n int64) { c.LastMirrorEpoch = int32(n) })
	case "last_mirror_offset":
		return intField(64, -1, func(n int64) { c.LastMirrorOffset = n })
	case "stop_policy":
		p, ok := parseStopPolicy(v)
		if !ok {
			return fmt.Sprintf("unknown stop policy %q", v)
		}
		c.StopPolicy = p
	case "stop_leader_epoch":
		return intField(32, -1, func(n int64) { c.StopLeaderEpoch = int32(n) })
	case "barrier_offset":
		return intField(64, -1, func(n int64) { c.BarrierOffset = n })
	case "updated_ms":
		return intField(64, -1<<63, func(n int64) { c.UpdatedMs = n })
	}
	return ""
}

// ReadCheckpoint reads dir's mirror.checkpoint. A missing file gives
// found == false and no error; a corrupt one (also one above
// fsutil.SmallFileLimit, refused unread) a *CheckpointError with Path
// set; other errors are I/O errors.
func ReadCheckpoint(dir string) (c Checkpoint, found bool, err error) {
	path := filepath.Join(dir, CheckpointFile)
	data, err := fsutil.ReadSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newCheckpoint(), false, nil
	}
	if pe := (*fs.PathError)(nil); errors.Is(err, fsutil.ErrTooLarge) && errors.As(err, &pe) {
		return newCheckpoint(), true, &CheckpointError{Kind: ErrCorruptCheckpoint, Path: path, Pos: -1, Reason: pe.Err.Error()}
	}
	if err != nil {
		return newCheckpoint(), false, fmt.Errorf("partlog/mirror: read %s: %w", path, err)
	}
	c, err = ParseCheckpoint(data)
	if ce, ok := err.(*CheckpointError); ok {
		ce.Path = path
	}
	return c, true, err
}

// WriteCheckpoint replaces dir's mirror.checkpoint durably: write
// mirror.checkpoint.tmp, fsync, rename, fsync the directory. The write is
// durable when it returns nil.
func WriteCheckpoint(dir string, c *Checkpoint) error {
	data, err := AppendCheckpoint(make([]byte, 0, 512), c)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, CheckpointFile), data)
}
