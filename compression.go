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
// l.recompressBuf, or records itself when none needs it. When any batch
// would be refused as it came (a bad length or CRC, a control batch, one
// over MaxBatchBytes, records that do not decompress), nothing is
// recompressed: validate refuses and names it, at its position in the
// client's request, exactly as without recompression. validate then
// applies the leader's rules to the recompressed batches (a rule's error
// names a batch's position among them) and refuses one over
// MaxBatchBytes, as Kafka checks the size again after recompressing.
// Caller holds appendMu.
func (l *Log) recompressLocked(records []byte) ([]byte, error) {
	c, ok := l.opts.CompressionType.codec()
	if !ok {
		return records, nil
	}
	// The headers' codecs first: an append already in the topic's codec
	// (the steady state of a producer configured like its topic) goes to
	// validate as it came, its CRCs checked there once.
	need := false
	for b := records; len(b) >= batch.HeaderSize && !need; {
		n := batch.View(b).Size()
		need = batch.View(b).Compression() != c
		if n < batch.HeaderSize || n > len(b) {
			break
		}
		b = b[n:]
	}
	if !need {
		return records, nil
	}
	for b := records; len(b) > 0; {
		if len(b) < batch.HeaderSize {
			return records, nil
		}
		n := batch.View(b).Size()
		if n < batch.HeaderSize || n > len(b) || int64(n) > l.opts.MaxBatchBytes {
			return records, nil
		}
		if v, err := batch.Check(b[:n]); err != nil || v.IsControl() {
			return records, nil
		}
		b = b[n:]
	}
	out := l.recompressBuf[:0]
	limit := int(l.opts.MaxBatchBytes) * 64
	for b := records; len(b) > 0; {
		n := batch.View(b).Size()
		v := batch.View(b[:n])
		if v.Compression() == c {
			out = append(out, v...)
		} else {
			var err error
			if out, err = l.recompressor.AppendRecompressed(out, v, c, limit); errors.Is(err, batch.ErrCorrupt) {
				l.recompressBuf = out
				return records, nil // records that do not decompress: validate names them
			} else if errors.Is(err, batch.ErrBuild) {
				return nil, fmt.Errorf("%w: batch at %d recompressed with %s: %w", ErrRecordTooLarge, len(records)-len(b), c, err)
			} else if err != nil {
				return nil, fmt.Errorf("partlog: recompress the batch at %d with %s: %w", len(records)-len(b), c, err)
			}
		}
		b = b[n:]
	}
	l.recompressBuf = out
	return out, nil
}
