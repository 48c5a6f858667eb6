package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/snapshot"
)

// This file dumps producer-state snapshots as kafka-dump-log does
// (formats.md §7.5). A corrupt snapshot prints Kafka's exception message on
// stderr and makes the exit code 4; a file that cannot be read is an
// operational error (exit 8).

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
	if ce.Offset == crcPos && len(data) >= snapshot.HeaderSize {
		stored := binary.BigEndian.Uint32(data[crcPos:])
		computed := batch.Checksum(data[entriesPos:])
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

// dumpSnapshot prints a .snapshot file, one line per producer in file
// order; the batch metadata part only for a producer that has a batch.
func (o *dumpOptions) dumpSnapshot(w *bufio.Writer, stderr io.Writer, path string) (bool, error) {
	entries, data, corrupt, err := readSnapshotFile(path)
	if err != nil {
		return false, err
	}
	if corrupt != nil {
		w.Flush()
		fmt.Fprintln(stderr, kafkaSnapshotError(data, corrupt))
		return true, nil
	}
	for i := range entries {
		e := &entries[i]
		fmt.Fprintf(w, "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d",
			e.ProducerID, e.ProducerEpoch, e.CoordinatorEpoch, optionalLong(e.CurrentTxnFirstOffset), e.Timestamp)
		if e.HasBatchMetadata() {
			fmt.Fprintf(w, " firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d",
				firstSequence(e), e.LastSequence, e.LastOffset, e.OffsetDelta, e.Timestamp)
		}
		w.WriteByte('\n')
	}
	return false, nil
}
