package checkpoint

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/partlog/partlog/internal/fsutil"
)

// Kafka format; do not change (formats.md §6.2–§6.5).
const (
	// OffsetsVersion is the version of the offset checkpoints
	// (recovery point, log start, replication).
	OffsetsVersion = 0
	// LeaderEpochsVersion is the version of leader-epoch-checkpoint.
	LeaderEpochsVersion = 0
)

// TopicPartition names a partition in an offset checkpoint.
type TopicPartition struct {
	// Topic is the topic name.
	Topic string
	// Partition is the partition number.
	Partition int32
}

// String returns "topic-partition", the form of a partition directory name.
func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// ParseOffsets parses an offset checkpoint (version 0, entries
// `<topic> <partition> <offset>`). If a partition appears twice, the later
// line wins, as in Kafka. Empty input gives an empty map. Every failure is a
// *CorruptionError.
func ParseOffsets(data []byte) (map[TopicPartition]int64, error) {
	entries, err := ParseEntries(data, OffsetsVersion, 3)
	if err != nil {
		return nil, err
	}
	offsets := make(map[TopicPartition]int64, len(entries))
	for i, f := range entries {
		if f[0] == "" {
			// Only a line with leading white space splits into an empty
			// first field. Java's split would then take "" as the topic
			// when the rest happens to be two numbers; no topic has an
			// empty name, so such a line is malformed (formats.md §6.1).
			return nil, corruptf(i+3, "malformed line: empty topic name")
		}
		partition, err := parseInt(f[1], 32)
		if err != nil {
			return nil, corruptf(i+3, "malformed partition %q", f[1])
		}
		offset, err := parseInt(f[2], 64)
		if err != nil {
			return nil, corruptf(i+3, "malformed offset %q", f[2])
		}
		offsets[TopicPartition{Topic: f[0], Partition: int32(partition)}] = offset
	}
	return offsets, nil
}

// AppendOffsets appends an offset checkpoint holding offsets to dst, one
// `<topic> <partition> <offset>` line per partition, sorted by topic and
// partition (Kafka's order is unspecified; sorting makes the output
// deterministic). A topic that is empty, not UTF-8 or contains white space
// could not be read back and is rejected with ErrInvalidEntry.
func AppendOffsets(dst []byte, offsets map[TopicPartition]int64) ([]byte, error) {
	keys := slices.SortedFunc(maps.Keys(offsets), func(a, b TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	lines := make([]string, 0, len(keys))
	for _, tp := range keys {
		if err := checkTopic(tp.Topic); err != nil {
			return dst, err
		}
		line := make([]byte, 0, len(tp.Topic)+32)
		line = append(line, tp.Topic...)
		line = append(line, ' ')
		line = strconv.AppendInt(line, int64(tp.Partition), 10)
		line = append(line, ' ')
		line = strconv.AppendInt(line, offsets[tp], 10)
		lines = append(lines, string(line))
	}
	return AppendEntries(dst, OffsetsVersion, lines), nil
}

// checkTopic rejects topic names that an offset checkpoint cannot carry.
func checkTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic name", ErrInvalidEntry)
	}
	if !utf8.ValidString(topic) {
		return fmt.Errorf("%w: topic name %q is not UTF-8", ErrInvalidEntry, topic)
	}
	for i := 0; i < len(topic); i++ {
		if isJavaSpace(topic[i]) {
			return fmt.Errorf("%w: topic name %q contains white space", ErrInvalidEntry, topic)
		}
	}
	return nil
}

// ReadOffsets reads an offset checkpoint file. A missing or empty file
// gives an empty map and no error; invalid contents give a
// *CorruptionError naming path.
func ReadOffsets(path string) (map[TopicPartition]int64, error) {
	b, err := readOptional(path)
	if err != nil {
		return nil, err
	}
	offsets, err := ParseOffsets(b)
	return offsets, withPath(err, path)
}

// WriteOffsets atomically replaces the offset checkpoint at path
// (fsutil.WriteFileAtomic).
func WriteOffsets(path string, offsets map[TopicPartition]int64) error {
	b, err := AppendOffsets(nil, offsets)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b)
}

// EpochEntry is one line of leader-epoch-checkpoint: the first offset
// written in a leader epoch.
type EpochEntry struct {
	// Epoch is the leader epoch.
	Epoch int32
	// StartOffset is the first offset written in that epoch.
	StartOffset int64
}

// ParseLeaderEpochs parses leader-epoch-checkpoint (version 0, entries
// `<epoch> <startOffset>`) and returns the entries in file order. It does
// not check that epochs and offsets increase; Kafka's epoch cache enforces
// that when it loads the entries. Every failure is a *CorruptionError.
func ParseLeaderEpochs(data []byte) ([]EpochEntry, error) {
	entries, err := ParseEntries(data, LeaderEpochsVersion, 2)
	if err != nil {
		return nil, err
	}
	out := make([]EpochEntry, 0, len(entries))
	for i, f := range entries {
		epoch, err := parseInt(f[0], 32)
		if err != nil {
			return nil, corruptf(i+3, "malformed epoch %q", f[0])
		}
		start, err := parseInt(f[1], 64)
		if err != nil {
			return nil, corruptf(i+3, "malformed start offset %q", f[1])
		}
		out = append(out, EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	return out, nil
}

// AppendLeaderEpochs appends leader-epoch-checkpoint content for entries,
// in the given order (Kafka writes increasing epochs), to dst.
func AppendLeaderEpochs(dst []byte, entries []EpochEntry) []byte {
	lines := make([]string, 0, len(entries))
	for _, e := range entries {
		lines = append(lines, strconv.FormatInt(int64(e.Epoch), 10)+" "+strconv.FormatInt(e.StartOffset, 10))
	}
	return AppendEntries(dst, LeaderEpochsVersion, lines)
}

// ReadLeaderEpochs reads leader-epoch-checkpoint. A missing or empty file
// gives no entries and no error; invalid contents give a *CorruptionError
// naming path (Kafka takes the whole log directory offline then; the engine
// rebuilds the epochs from the batch headers instead, recovery.md §2.13).
func ReadLeaderEpochs(path string) ([]EpochEntry, error) {
	b, err := readOptional(path)
	if err != nil {
		return nil, err
	}
	entries, err := ParseLeaderEpochs(b)
	return entries, withPath(err, path)
}

// WriteLeaderEpochs atomically replaces leader-epoch-checkpoint at path
// (fsutil.WriteFileAtomic).
func WriteLeaderEpochs(path string, entries []EpochEntry) error {
	return fsutil.WriteFileAtomic(path, AppendLeaderEpochs(nil, entries))
}
