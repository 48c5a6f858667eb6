package snapshot

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/partlog/partlog/internal/crc32c"
)

// Kafka format; do not change (formats.md §5.2).
const (
	// Version is the only snapshot version Kafka reads and writes.
	Version = 1
	// HeaderSize is the size of version + crc + entryCount.
	HeaderSize = 10
	// EntrySize is the size of one producer entry.
	EntrySize = 46
	// MaxEntries is the largest entry count the int32 count field holds.
	MaxEntries = math.MaxInt32
)

// Byte positions inside the header and inside one entry. Kafka format; do
// not change (formats.md §5.2).
const (
	versionPos = 0
	crcPos     = 2
	countPos   = 6

	producerIDPos            = 0
	producerEpochPos         = 8
	lastSequencePos          = 10
	lastOffsetPos            = 14
	offsetDeltaPos           = 22
	timestampPos             = 26
	coordinatorEpochPos      = 34
	currentTxnFirstOffsetPos = 38
)

// Entry is one producer's persisted state. The field order here is chosen
// to pack the struct into 48 bytes (a 1M-producer snapshot decodes into one
// 48 MB slice); the file order is the one in the package documentation.
type Entry struct {
	// ProducerID is the producer id.
	ProducerID int64
	// LastOffset is the last offset of the producer's last retained data
	// batch, or -1 if the producer has no batch metadata (for example it
	// only wrote a transaction marker). Kafka restores batch metadata only
	// when LastOffset >= 0.
	LastOffset int64
	// Timestamp is the producer's last timestamp: the max timestamp of its
	// last batch or the timestamp of its last transaction marker,
	// whichever came last. On load it is also the restored batch's
	// timestamp.
	Timestamp int64
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, or -1 if none is open.
	CurrentTxnFirstOffset int64
	// LastSequence is the last sequence number of the last retained batch,
	// or -1 if none.
	LastSequence int32
	// OffsetDelta is lastOffset - firstOffset of that batch, 0 if none.
	OffsetDelta int32
	// CoordinatorEpoch is the epoch of the last transaction coordinator
	// seen, or -1 if none.
	CoordinatorEpoch int32
	// ProducerEpoch is the producer's current epoch.
	ProducerEpoch int16
}

// HasBatchMetadata reports whether the entry carries a last batch
// (LastOffset >= 0), which is the rule Kafka applies on load.
func (e *Entry) HasBatchMetadata() bool { return e.LastOffset >= 0 }

// HasOpenTransaction reports whether the entry has an open transaction
// (CurrentTxnFirstOffset >= 0), which is the rule Kafka applies on load.
func (e *Entry) HasOpenTransaction() bool { return e.CurrentTxnFirstOffset >= 0 }

// FileSize returns the size in bytes of a snapshot file with n entries.
func FileSize(n int) int64 { return HeaderSize + EntrySize*int64(n) }

// Encode appends the snapshot file for entries, in the given order, to dst
// and returns the extended slice. The result is byte-identical to what
// Kafka writes for the same entries in the same order.
//
// Encode panics if len(entries) > MaxEntries (the count would not fit its
// int32 field); Write checks this and returns an error instead.
func Encode(dst []byte, entries []Entry) []byte {
	n := len(entries)
	if n > MaxEntries {
		panic(fmt.Sprintf("partlog/snapshot: Encode of %d entries exceeds the int32 count", n))
	}
	size := HeaderSize + EntrySize*n
	start := len(dst)
	dst = slices.Grow(dst, size)[:start+size]
	out := dst[start:]

	putHeader(out, n)
	putEntries(out[HeaderSize:], entries)
	// Kafka computes the CRC with the field zeroed and covers everything
	// after it; since the CRC field lies before the covered range, storing
	// it last is equivalent.
	binary.BigEndian.PutUint32(out[crcPos:], crc32c.Checksum(out[countPos:]))
	return dst
}

// Decode parses a whole snapshot file. It checks, in Kafka's order, the
// version, the entry count against the file size, and the CRC-32C, and
// returns the entries in file order. The result does not alias b.
//
// Every failure is a *CorruptionError (errors.Is(err, ErrCorrupt)); Decode
// never panics, whatever b holds. A zero-entry file is valid and yields an
// empty, non-nil slice.
func Decode(b []byte) ([]Entry, error) {
	count, err := checkHeader(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	stored := binary.BigEndian.Uint32(b[crcPos:])
	if computed := crc32c.Checksum(b[countPos:]); computed != stored {
		return nil, crcMismatch(stored, computed)
	}
	entries := make([]Entry, count)
	getEntries(entries, b[HeaderSize:])
	return entries, nil
}

// checkHeader validates the header in hdr (the first bytes of a file of
// fileLen bytes; hdr may be shorter than HeaderSize only if the file is)
// against the file length, in Kafka's order, and returns the entry count.
func checkHeader(hdr []byte, fileLen int64) (int, error) {
	be := binary.BigEndian
	if fileLen < 2 {
		return 0, corruptf(fileLen, "file is %d bytes, too short for the version field", fileLen)
	}
	if v := int16(be.Uint16(hdr[versionPos:])); v != Version {
		return 0, corruptf(versionPos, "unknown file version %d", v)
	}
	if fileLen < HeaderSize {
		return 0, corruptf(fileLen, "file is %d bytes, too short for the %d-byte header", fileLen, HeaderSize)
	}
	count := int32(be.Uint32(hdr[countPos:]))
	if count < 0 {
		return 0, corruptf(countPos, "negative entry count %d", count)
	}
	body := fileLen - HeaderSize
	need := EntrySize * int64(count)
	if need > body {
		return 0, corruptf(fileLen, "entry count %d needs %d bytes after the header, file has %d", count, need, body)
	}
	if need < body {
		return 0, corruptf(HeaderSize+need, "%d trailing bytes after %d entries", body-need, count)
	}
	return int(count), nil
}

func crcMismatch(stored, computed uint32) *CorruptionError {
	return corruptf(crcPos, "crc mismatch (stored 0x%08x, computed 0x%08x)", stored, computed)
}

// putHeader writes the version and the count of n entries to out[:10] and
// zeroes the CRC field.
func putHeader(out []byte, n int) {
	be := binary.BigEndian
	be.PutUint16(out[versionPos:], Version)
	be.PutUint32(out[crcPos:], 0)
	be.PutUint32(out[countPos:], uint32(n))
}

// putEntries encodes entries into p, which holds exactly
// EntrySize*len(entries) bytes.
func putEntries(p []byte, entries []Entry) {
	be := binary.BigEndian
	for i := range entries {
		e := &entries[i]
		q := p[:EntrySize:EntrySize]
		be.PutUint64(q[producerIDPos:], uint64(e.ProducerID))
		be.PutUint16(q[producerEpochPos:], uint16(e.ProducerEpoch))
		be.PutUint32(q[lastSequencePos:], uint32(e.LastSequence))
		be.PutUint64(q[lastOffsetPos:], uint64(e.LastOffset))
		be.PutUint32(q[offsetDeltaPos:], uint32(e.OffsetDelta))
		be.PutUint64(q[timestampPos:], uint64(e.Timestamp))
		be.PutUint32(q[coordinatorEpochPos:], uint32(e.CoordinatorEpoch))
		be.PutUint64(q[currentTxnFirstOffsetPos:], uint64(e.CurrentTxnFirstOffset))
		p = p[EntrySize:]
	}
}

// getEntries decodes len(dst) entries from p, which holds at least
// EntrySize*len(dst) bytes.
func getEntries(dst []Entry, p []byte) {
	be := binary.BigEndian
	for i := range dst {
		q := p[:EntrySize:EntrySize]
		dst[i] = Entry{
			ProducerID:            int64(be.Uint64(q[producerIDPos:])),
			ProducerEpoch:         int16(be.Uint16(q[producerEpochPos:])),
			LastSequence:          int32(be.Uint32(q[lastSequencePos:])),
			LastOffset:            int64(be.Uint64(q[lastOffsetPos:])),
			OffsetDelta:           int32(be.Uint32(q[offsetDeltaPos:])),
			Timestamp:             int64(be.Uint64(q[timestampPos:])),
			CoordinatorEpoch:      int32(be.Uint32(q[coordinatorEpochPos:])),
			CurrentTxnFirstOffset: int64(be.Uint64(q[currentTxnFirstOffsetPos:])),
		}
		p = p[EntrySize:]
	}
}
