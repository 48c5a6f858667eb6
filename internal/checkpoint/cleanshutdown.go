package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/partlog/partlog/internal/fsutil"
)

// Kafka format; do not change (formats.md §6.7).
const (
	// CleanShutdownVersion is the version Kafka writes in the marker.
	CleanShutdownVersion = 0
	// NoBrokerEpoch is the broker epoch reported for a marker that does
	// not carry one (older brokers wrote an empty file).
	NoBrokerEpoch = -1
)

// CleanShutdown is the content of the .kafka_cleanshutdown marker. For
// recovery only the marker's existence matters; the broker epoch is used
// for broker registration.
type CleanShutdown struct {
	// Version is the marker version (0).
	Version int32
	// BrokerEpoch is the broker epoch at shutdown, or NoBrokerEpoch.
	BrokerEpoch int64
}

// ParseCleanShutdown parses the marker's JSON, `{"version":0,"brokerEpoch":
// <long>}`. Unknown fields are ignored, as Kafka does; a missing or null
// field takes its default (version 0, NoBrokerEpoch); an empty (or
// all-white-space) file is the marker of an older broker and gives the
// defaults. Field names are case-sensitive and values must be JSON
// integers in range (Jackson would also coerce strings and fractions; we do
// not). Every failure is a *CorruptionError.
func ParseCleanShutdown(data []byte) (CleanShutdown, error) {
	m := CleanShutdown{Version: CleanShutdownVersion, BrokerEpoch: NoBrokerEpoch}
	if len(bytes.TrimSpace(data)) == 0 {
		return m, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return m, corruptf(0, "not a JSON object")
	}
	if raw, ok := fields["version"]; ok && string(raw) != "null" {
		v, err := jsonInt(raw, 32)
		if err != nil {
			return m, corruptf(0, "version %s: %v", string(raw), err)
		}
		m.Version = int32(v)
	}
	if raw, ok := fields["brokerEpoch"]; ok && string(raw) != "null" {
		v, err := jsonInt(raw, 64)
		if err != nil {
			return m, corruptf(0, "brokerEpoch %s: %v", string(raw), err)
		}
		m.BrokerEpoch = v
	}
	return m, nil
}

// errNotInteger reports a JSON value that is not an integer in range.
var errNotInteger = errors.New("not an integer in range")

// jsonInt parses a raw JSON value that must be an integer number.
func jsonInt(raw json.RawMessage, bits int) (int64, error) {
	v, err := strconv.ParseInt(string(raw), 10, bits)
	if err != nil {
		return 0, errNotInteger
	}
	return v, nil
}

// AppendCleanShutdown appends the marker's JSON to dst exactly as Kafka
// writes it: `{"version":<v>,"brokerEpoch":<e>}`, no white space, no
// trailing newline.
func AppendCleanShutdown(dst []byte, m CleanShutdown) []byte {
	dst = append(dst, `{"version":`...)
	dst = strconv.AppendInt(dst, int64(m.Version), 10)
	dst = append(dst, `,"brokerEpoch":`...)
	dst = strconv.AppendInt(dst, m.BrokerEpoch, 10)
	return append(dst, '}')
}

// ReadCleanShutdown reads the marker at path. A missing marker is an error
// that satisfies errors.Is(err, fs.ErrNotExist); use CleanShutdownExists to
// test for presence. Invalid contents give a *CorruptionError naming path;
// Kafka only logs such a marker and still counts the shutdown as clean.
func ReadCleanShutdown(path string) (CleanShutdown, error) {
	b, err := readSmall(path)
	if IsCorrupt(err) {
		return CleanShutdown{}, err
	}
	if err != nil {
		return CleanShutdown{}, fmt.Errorf("partlog/checkpoint: read: %w", err)
	}
	m, err := ParseCleanShutdown(b)
	return m, withPath(err, path)
}

// CleanShutdownExists reports whether the marker exists at path.
func CleanShutdownExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("partlog/checkpoint: stat: %w", err)
}

// WriteCleanShutdown writes the marker (version 0, brokerEpoch) at path in
// place and fsyncs it, as Kafka does, and then fsyncs the directory (Kafka
// does not) so that the marker is durable when the call returns. It must
// be the last write of a clean shutdown.
func WriteCleanShutdown(path string, brokerEpoch int64) error {
	data := AppendCleanShutdown(nil, CleanShutdown{Version: CleanShutdownVersion, BrokerEpoch: brokerEpoch})
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("partlog/checkpoint: create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("partlog/checkpoint: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("partlog/checkpoint: fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("partlog/checkpoint: close %s: %w", path, err)
	}
	return fsutil.SyncDir(filepath.Dir(path))
}

// RemoveCleanShutdown deletes the marker at path (a missing marker is not
// an error) and fsyncs the directory. Kafka deletes the marker before it
// loads anything, so that a crash during loading counts as unclean; the
// directory fsync makes sure a power failure cannot bring the marker back.
func RemoveCleanShutdown(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("partlog/checkpoint: remove: %w", err)
	}
	return fsutil.SyncDir(filepath.Dir(path))
}
