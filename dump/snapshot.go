package dump

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/crc32c"
	"github.com/partlog/partlog/snapshot"
)

// This file reads producer-state snapshots as kafka-dump-log does
// (formats.md §7.5). A corrupt snapshot is a "corrupt" problem worded as
// Kafka's exception message; a file that cannot be read is an
// operational error.

// readSnapshotFile reads and decodes a .snapshot file. A decoding failure
// is returned as a *snapshot.CorruptionError together with the file bytes,
// so the caller can word it as Kafka does; an I/O failure is returned as err.
func readSnapshotFile(path string) (entries []snapshot.Entry, data []byte, corrupt *snapshot.CorruptionError, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	entries, derr := snapshot.Decode(data)
	if derr != nil {
		if !errors.As(derr, &corrupt) {
			return nil, nil, nil, derr
		}
		return nil, data, corrupt, nil
	}
	return entries, data, nil, nil
}

// kafkaSnapshotError words a decoding failure as Kafka's
// ProducerStateManager.readSnapshot does (the CorruptSnapshotException
// message kafka-dump-log prints). partlog rejects trailing bytes after the
// last entry, which Kafka ignores; that case is worded as a schema failure.
func kafkaSnapshotError(data []byte, ce *snapshot.CorruptionError) string {
	const crcPos, entriesPos = 2, 6
	if len(data) >= 2 {
		if v := int16(binary.BigEndian.Uint16(data)); v != snapshot.Version {
			return fmt.Sprintf("Snapshot contained an unknown file version %d", v)
		}
	}
	if ce.Pos == crcPos && len(data) >= snapshot.HeaderSize {
		stored := binary.BigEndian.Uint32(data[crcPos:])
		computed := crc32c.Checksum(data[entriesPos:])
		return fmt.Sprintf("Snapshot is corrupt (CRC is no longer valid). Stored crc: %d. Computed crc: %d", stored, computed)
	}
	return "Snapshot failed schema validation: " + ce.Reason
}

// optionalLong renders a Java OptionalLong: empty for a negative value.
func optionalLong(v int64) string {
	if v < 0 {
		return "OptionalLong.empty"
	}
	return "OptionalLong[" + strconv.FormatInt(v, 10) + "]"
}

// firstSequence is the first sequence of an entry's batch, Kafka's
// decrementSequence(lastSequence, offsetDelta).
func firstSequence(e *snapshot.Entry) int32 {
	return batch.DecrementSequence(e.LastSequence, e.OffsetDelta)
}

// readSnapshot reads a .snapshot file, its producers in file order.
func readSnapshot(path string, f *File) error {
	entries, data, corrupt, err := readSnapshotFile(path)
	if err != nil {
		return err
	}
	f.Producers = make([]Producer, 0, len(entries))
	if corrupt != nil {
		f.SnapshotError = kafkaSnapshotError(data, corrupt)
		f.Problems = append(f.Problems, Problem{Position: corrupt.Pos, Kind: "corrupt",
			Detail: f.SnapshotError + " (" + corrupt.Reason + ")"})
		return nil
	}
	for i := range entries {
		e := &entries[i]
		p := Producer{
			ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch, LastSequence: e.LastSequence,
			LastOffset: e.LastOffset, OffsetDelta: e.OffsetDelta, Timestamp: e.Timestamp,
			CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnFirstOffset: e.CurrentTxnFirstOffset,
		}
		if e.HasBatchMetadata() {
			fs := firstSequence(e)
			p.FirstSequence = &fs
		}
		f.Producers = append(f.Producers, p)
	}
	return nil
}
