package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"unicode/utf8"
)

// File names Kafka uses. Kafka format; do not change (formats.md §6,
// recovery.md §1.1–§1.2).
const (
	// RecoveryPointFile holds every partition's recovery point (log
	// directory; Offsets).
	RecoveryPointFile = "recovery-point-offset-checkpoint"
	// LogStartOffsetFile holds the log start offset of partitions whose
	// start is above their first segment's base offset (log directory;
	// Offsets).
	LogStartOffsetFile = "log-start-offset-checkpoint"
	// ReplicationOffsetFile holds every partition's high watermark (log
	// directory; Offsets).
	ReplicationOffsetFile = "replication-offset-checkpoint"
	// CleanerOffsetFile holds the first dirty offset of the compacted
	// partitions the log cleaner has cleaned (log directory; Offsets).
	CleanerOffsetFile = "cleaner-offset-checkpoint"
	// LeaderEpochFile holds a partition's leader epochs (partition
	// directory; LeaderEpochs).
	LeaderEpochFile = "leader-epoch-checkpoint"
	// PartitionMetadataFile holds a partition's topic id (partition
	// directory; PartitionMetadata).
	PartitionMetadataFile = "partition.metadata"
	// CleanShutdownFile is the clean-shutdown marker (log directory;
	// CleanShutdown).
	CleanShutdownFile = ".kafka_cleanshutdown"
)

// ParseEntries parses the generic checkpoint format (formats.md §6.1) and
// returns the fields of each entry line. version is the version the file
// must carry; fields is the number of white-space separated fields every
// entry line must have. An empty input, or one with only the version line,
// gives no entries and no error. Every failure is a *CorruptionError.
func ParseEntries(data []byte, version, fields int) ([][]string, error) {
	if !utf8.Valid(data) {
		return nil, corruptf(0, "not valid UTF-8")
	}
	lines := splitLines(string(data))
	if len(lines) == 0 {
		return nil, nil
	}
	v, err := parseInt(lines[0], 32)
	if err != nil {
		return nil, corruptf(1, "malformed version line %q", lines[0])
	}
	if v != int64(version) {
		return nil, corruptf(1, "unsupported version %d, want %d", v, version)
	}
	if len(lines) == 1 {
		return nil, nil
	}
	count, err := parseInt(lines[1], 32)
	if err != nil {
		return nil, corruptf(2, "malformed count line %q", lines[1])
	}
	if count < 0 {
		return nil, corruptf(2, "negative entry count %d", count)
	}
	body := lines[2:]
	entries := make([][]string, 0, min(int(count), len(body)))
	for i, line := range body {
		f := splitFields(line)
		if len(f) != fields {
			return nil, corruptf(i+3, "malformed line %q: %d fields, want %d", line, len(f), fields)
		}
		entries = append(entries, f)
	}
	if int64(len(entries)) != count {
		return nil, corruptf(0, "expected %d entries, found %d", count, len(entries))
	}
	return entries, nil
}

// AppendEntries appends a checkpoint file with the given version and entry
// lines (each without its line terminator) to dst, exactly as Kafka writes
// it: version, count and every entry on its own line, each ending in "\n".
// The caller is responsible for entries that read back: no line breaks
// inside an entry, fields separated by single spaces.
func AppendEntries(dst []byte, version int, entries []string) []byte {
	dst = strconv.AppendInt(dst, int64(version), 10)
	dst = append(dst, '\n')
	dst = strconv.AppendInt(dst, int64(len(entries)), 10)
	dst = append(dst, '\n')
	for _, e := range entries {
		dst = append(dst, e...)
		dst = append(dst, '\n')
	}
	return dst
}

// parseInt parses a decimal integer as Java's Integer.parseInt and
// Long.parseLong do: an optional sign, then digits, nothing else (no
// spaces). Unlike Java, only ASCII digits are accepted.
func parseInt(s string, bits int) (int64, error) {
	return strconv.ParseInt(s, 10, bits)
}

// splitLines splits s into lines the way Java's BufferedReader.readLine
// does: a line ends at "\n", "\r" or "\r\n"; a final line without a
// terminator counts, an empty remainder does not.
func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			lines = append(lines, s[start:i])
			start = i + 1
		case '\r':
			lines = append(lines, s[start:i])
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// isJavaSpace reports whether c is in Java's regex class \s:
// [ \t\n\x0B\f\r].
func isJavaSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// spaceRun returns the length of the run of white space at s[i:].
func spaceRun(s string, i int) int {
	n := 0
	for i+n < len(s) && isJavaSpace(s[i+n]) {
		n++
	}
	return n
}

// splitFields splits a line on runs of white space like Java's
// line.split("\\s+").
func splitFields(line string) []string {
	return javaSplit(line, spaceRun)
}

// javaSplit splits s like Java's String.split(regex) for a regex that never
// matches the empty string; match returns the length of the match starting
// at s[i], or 0. As in Java: without any match the result is [s]; a match
// at the start yields a leading empty field; trailing empty fields are
// dropped.
func javaSplit(s string, match func(s string, i int) int) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); {
		if n := match(s, i); n > 0 {
			parts = append(parts, s[start:i])
			i += n
			start = i
			continue
		}
		i++
	}
	if parts == nil {
		return []string{s}
	}
	parts = append(parts, s[start:])
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// readOptional reads path; a missing file reads as empty, which the
// generic format treats as "no entries". A file above
// fsutil.SmallFileLimit is a *CorruptionError, refused unread.
func readOptional(path string) ([]byte, error) {
	b, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if IsCorrupt(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("partlog/checkpoint: read: %w", err)
	}
	return b, nil
}
