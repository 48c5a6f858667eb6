package partlog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/partlog/partlog/batch"
)

// CompressionType is Kafka's compression.type topic config: the codec a
// leader stores client batches in (Options.CompressionType).
// CompressionProducer, the zero value and Kafka's default, keeps every
// batch as its producer compressed it, zero-copy; any other recompresses
// a client batch whose codec differs (Kafka's LogValidator), which costs
// a decompression, a compression and a CRC per batch. Followers' and
// mirrors' batches are always kept as they are.
type CompressionType int8

// Compression types, in Kafka's names.
const (
	CompressionProducer CompressionType = iota
	CompressionUncompressed
	CompressionGzip
	CompressionSnappy
	CompressionLZ4
	CompressionZstd
)

var compressionNames = [...]string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}

// String returns Kafka's name of c.
func (c CompressionType) String() string {
	if c < 0 || int(c) >= len(compressionNames) {
		return fmt.Sprintf("CompressionType(%d)", int8(c))
	}
	return compressionNames[c]
}

// ParseCompressionType reads compression.type as Kafka spells it (any
// case, as Kafka's validator lowers it).
func ParseCompressionType(s string) (CompressionType, error) {
	for i, n := range compressionNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return CompressionType(i), nil
		}
	}
	return 0, fmt.Errorf("partlog: unknown compression type %q (one of %s)", s, strings.Join(compressionNames[:], ", "))
}

// codec returns the batch codec c stores, and false for
// CompressionProducer.
func (c CompressionType) codec() (batch.Compression, bool) {
	if c <= CompressionProducer {
		return 0, false
	}
	return batch.Compression(c - CompressionUncompressed), true
}

// recompressLocked returns records with every client batch whose codec
// is not the topic's recompressed (Options.CompressionType), in
// l.recompressBuf, or records itself when none needs it. A batch it
// cannot take whole (a bad length or CRC, records that do not
// decompress, a control batch, one over MaxBatchBytes as it came) is
// left as it is, for validate to refuse and name as without
// recompression; validate then also refuses a recompressed batch over
// MaxBatchBytes, as Kafka checks the size again after recompressing.
// Caller holds appendMu.
func (l *Log) recompressLocked(records []byte) ([]byte, error) {
	c, ok := l.opts.CompressionType.codec()
	if !ok {
		return records, nil
	}
	need := false
	for b := records; len(b) >= batch.HeaderSize; {
		n := batch.View(b).Size()
		if n < batch.HeaderSize || n > len(b) {
			break
		}
		if v := batch.View(b[:n]); v.Compression() != c && !v.IsControl() {
			need = true
			break
		}
		b = b[n:]
	}
	if !need {
		return records, nil
	}
	out := l.recompressBuf[:0]
	limit := int(l.opts.MaxBatchBytes) * 64
	b := records
	for len(b) >= batch.HeaderSize {
		n := batch.View(b).Size()
		if n < batch.HeaderSize || n > len(b) {
			break
		}
		if v, err := batch.Check(b[:n]); err != nil || v.Compression() == c || v.IsControl() || int64(n) > l.opts.MaxBatchBytes {
			out = append(out, b[:n]...)
		} else if grown, err := l.recompressor.AppendRecompressed(out, v, c, limit); err == nil {
			out = grown
		} else if errors.Is(err, batch.ErrCorrupt) {
			out = append(out, b[:n]...) // records that do not decompress: validate names them
		} else {
			return nil, fmt.Errorf("%w: recompressed with %s: %w", ErrRecordTooLarge, c, err)
		}
		b = b[n:]
	}
	out = append(out, b...) // a partial tail, for validate to name
	l.recompressBuf = out
	return out, nil
}
