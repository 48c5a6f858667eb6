package checkpoint

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/partlog/partlog/internal/fsutil"
)

// PartitionMetadataVersion is the version Kafka writes in
// partition.metadata. Kafka format; do not change (formats.md §6.6).
const PartitionMetadataVersion = 0

// TopicID is a topic's 128-bit UUID.
type TopicID [16]byte

// String returns Kafka's text form of the id: 22 characters of URL-safe
// base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is the all-zero UUID, which Kafka never
// assigns and rejects in partition.metadata.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// ParseTopicID parses Kafka's text form of a topic id: 22 URL-safe base64
// characters, optionally followed by "==" padding (Java's decoder accepts
// both), decoding to 16 bytes. It does not reject the zero id.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	switch {
	case len(s) == 24 && s[22:] == "==":
		s = s[:22]
	case len(s) != 22:
		return id, fmt.Errorf("partlog/checkpoint: topic id %q is not 22 base64 characters", fsutil.Excerpt(s))
	}
	n, err := base64.RawURLEncoding.Decode(id[:], []byte(s))
	if err != nil || n != len(id) {
		return TopicID{}, fmt.Errorf("partlog/checkpoint: topic id %q is not URL-safe base64", s)
	}
	return id, nil
}

// PartitionMetadata is the content of a partition's partition.metadata.
type PartitionMetadata struct {
	// Version is the file version; Kafka writes 0 and reads any value >= 0.
	Version int32
	// TopicID is the id of the partition's topic; never zero in a valid
	// file.
	TopicID TopicID
}

// colonSpaceRun matches the regex `:\s+` at s[i:], returning its length or 0.
func colonSpaceRun(s string, i int) int {
	if s[i] != ':' {
		return 0
	}
	n := spaceRun(s, i+1)
	if n == 0 {
		return 0
	}
	return 1 + n
}

// ParsePartitionMetadata parses partition.metadata with Kafka's rules: the
// first line, split on `:\s+`, must give two parts, the second an integer
// version >= 0; the second line likewise, the second part a topic id that
// is not zero. As in Kafka, the key names ("version", "topic_id") are not
// checked and lines after the second are ignored. Every failure is a
// *CorruptionError.
func ParsePartitionMetadata(data []byte) (PartitionMetadata, error) {
	var m PartitionMetadata
	if !utf8.Valid(data) {
		return m, corruptf(0, "not valid UTF-8")
	}
	lines := splitLines(string(data))
	if len(lines) < 1 {
		return m, corruptf(1, "missing version line")
	}
	parts := javaSplit(lines[0], colonSpaceRun)
	if len(parts) != 2 {
		return m, corruptf(1, "malformed line %q", lines[0])
	}
	version, err := parseInt(parts[1], 32)
	if err != nil {
		return m, corruptf(1, "malformed line %q", lines[0])
	}
	if version < PartitionMetadataVersion {
		return m, corruptf(1, "unsupported version %d", version)
	}
	if len(lines) < 2 {
		return m, corruptf(2, "missing topic_id line")
	}
	parts = javaSplit(lines[1], colonSpaceRun)
	if len(parts) != 2 {
		return m, corruptf(2, "malformed line %q", lines[1])
	}
	id, err := ParseTopicID(parts[1])
	if err != nil {
		return m, corruptf(2, "invalid topic id %q", parts[1])
	}
	if id.IsZero() {
		return m, corruptf(2, "invalid topic id %q (all zero)", parts[1])
	}
	return PartitionMetadata{Version: int32(version), TopicID: id}, nil
}

// AppendPartitionMetadata appends partition.metadata content to dst exactly
// as Kafka writes it: "version: <v>\ntopic_id: <id>", with no trailing
// newline. A negative version or a zero topic id would not read back and is
// rejected with ErrInvalidEntry.
func AppendPartitionMetadata(dst []byte, m PartitionMetadata) ([]byte, error) {
	if m.Version < 0 {
		return dst, fmt.Errorf("%w: partition.metadata version %d", ErrInvalidEntry, m.Version)
	}
	if m.TopicID.IsZero() {
		return dst, fmt.Errorf("%w: zero topic id", ErrInvalidEntry)
	}
	dst = append(dst, "version: "...)
	dst = strconv.AppendInt(dst, int64(m.Version), 10)
	dst = append(dst, "\ntopic_id: "...)
	return append(dst, m.TopicID.String()...), nil
}

// ReadPartitionMetadata reads partition.metadata. A missing file is an
// error that satisfies errors.Is(err, fs.ErrNotExist); invalid contents give
// a *CorruptionError naming path.
func ReadPartitionMetadata(path string) (PartitionMetadata, error) {
	b, err := readSmall(path)
	if IsCorrupt(err) {
		return PartitionMetadata{}, err
	}
	if err != nil {
		return PartitionMetadata{}, fmt.Errorf("partlog/checkpoint: read: %w", err)
	}
	m, err := ParsePartitionMetadata(b)
	return m, withPath(err, path)
}

// WritePartitionMetadata atomically replaces partition.metadata at path
// (fsutil.WriteFileAtomic), as Kafka does.
func WritePartitionMetadata(path string, m PartitionMetadata) error {
	b, err := AppendPartitionMetadata(nil, m)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b)
}
