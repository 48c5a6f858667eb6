package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
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
	// LeaderEpochFile holds a partition's leader epochs (partition
	// directory; LeaderEpochs).
	LeaderEpochFile = "leader-epoch-checkpoint"
	// PartitionMetadataFile holds a partition's topic id (partition
	// directory; PartitionMetadata).
	PartitionMetadataFile = "partition.metadata"
	// CleanShutdownFile is the clean-shutdown marker (log directory;
	// CleanShutdown).
	CleanShutdownFile = ".kafka_cleanshutdown"
	// TempSuffix is appended to a file's name while it is being replaced
	// (`recovery-point-offset-checkpoint.tmp`).
	TempSuffix = ".tmp"
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

// WriteFileAtomic replaces path with data the way Kafka replaces checkpoint
// files: write `<path>.tmp` (truncating a stale one), fsync it, rename it
// over path, then fsync the directory. A symbolic link is never written
// through: a link at the temporary name fails the write, one at path is
// replaced by the rename. A crash leaves either the old or the
// new content at path. On failure the temporary file is removed (best
// effort).
func WriteFileAtomic(path string, data []byte) error {
	return WriteFileAtomicFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFileAtomicFunc is WriteFileAtomic with the content written by fill
// (for content too large to hold in memory, such as a copied segment
// tail): a failure of fill, or a crash, leaves no partial file at path.
func WriteFileAtomicFunc(path string, fill func(io.Writer) error) (err error) {
	return writeFileAtomic(path, 0o644, fill)
}

// WritePrivateFileAtomic is WriteFileAtomic for a secret: the file is
// readable and writable by its owner only (0600), from its creation on.
func WritePrivateFileAtomic(path string, data []byte) error {
	return writeFileAtomic(path, 0o600, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

func writeFileAtomic(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	tmp := path + TempSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return fmt.Errorf("partlog/checkpoint: create %s: %w", tmp, err)
	}
	if perm != 0o644 {
		// A stale temporary file keeps its mode through O_TRUNC.
		if err = f.Chmod(perm); err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
			return fmt.Errorf("partlog/checkpoint: chmod %s: %w", tmp, err)
		}
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("partlog/checkpoint: write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("partlog/checkpoint: fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("partlog/checkpoint: close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("partlog/checkpoint: rename %s: %w", tmp, err)
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory so that a rename, creation or removal in it
// survives a power failure.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("partlog/checkpoint: open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("partlog/checkpoint: fsync directory %s: %w", dir, err)
	}
	return nil
}
