package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// errLimit is wrapped by the *CorruptionError returned when decompressed
// output would grow past the caller's limit.
var errLimit = errors.New("decompression size guard")

// AppendDecompressed appends the decompressed form of src, compressed with
// codec c using the framing Kafka uses for magic 1 and 2 (formats.md
// §1.10), to dst and returns the extended slice. It stops with an error
// as soon as more than limit bytes would be appended, and never allocates
// much more than limit. Every error is a *CorruptionError at position 0
// (the caller re-bases it) wrapping the codec's error; on error dst is
// returned unchanged.
func AppendDecompressed(dst []byte, c Compression, src []byte, limit int) ([]byte, error) {
	return appendDecompressed(dst, c, src, limit, false)
}

// appendDecompressed is AppendDecompressed with the legacy magic-0 LZ4
// quirk: when lz4V0 is set the LZ4 header checksum byte is not checked
// (Kafka computed it over the wrong bytes for magic 0, §1.10.4).
func appendDecompressed(dst []byte, c Compression, src []byte, limit int, lz4V0 bool) ([]byte, error) {
	n := len(dst)
	limit = max(0, min(limit, math.MaxInt-n))
	var out []byte
	var err error
	switch c {
	case CompressionNone:
		if len(src) > limit {
			return dst, limitErr(c, limit)
		}
		return append(dst, src...), nil
	case CompressionGzip:
		out, err = appendGunzip(dst, src, limit)
	case CompressionSnappy:
		out, err = appendUnsnappy(dst, src, limit)
	case CompressionLZ4:
		out, err = appendUnLZ4(dst, src, limit, lz4V0)
	case CompressionZstd:
		out, err = appendUnzstd(dst, src, limit)
	default:
		return dst, corruptf(0, "unknown compression codec id %d", c)
	}
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

// AppendCompressed appends src compressed with codec c, in the framing
// Kafka writes (formats.md §1.10), to dst and returns the extended slice:
// a gzip member, xerial snappy-java framing with 32 KiB chunks, an LZ4
// frame with independent 64 KiB blocks and no checksums, or a single zstd
// frame. CompressionNone appends src as is.
func AppendCompressed(dst []byte, c Compression, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		return appendGzip(dst, src)
	case CompressionSnappy:
		return appendSnappy(dst, src), nil
	case CompressionLZ4:
		return appendLZ4(dst, src), nil
	case CompressionZstd:
		return appendZstd(dst, src)
	default:
		return dst, fmt.Errorf("partlog/batch: cannot compress with unknown codec id %d", c)
	}
}

// codecErr builds the *CorruptionError for a failed decompression.
func codecErr(c Compression, reason string, err error) *CorruptionError {
	return &CorruptionError{Kind: ErrCorrupt, Reason: c.String() + ": " + reason, Err: err}
}

// limitErr builds the *CorruptionError for output that exceeds limit.
func limitErr(c Compression, limit int) *CorruptionError {
	return &CorruptionError{Kind: ErrCorrupt,
		Reason: fmt.Sprintf("%s: output exceeds the %d-byte limit", c, limit),
		Err:    errLimit,
	}
}

// growCapped makes room for at least need more bytes after len(b) while
// keeping the capacity at most maxCap (need must fit below maxCap). Growth
// is geometric so that repeated calls copy little.
func growCapped(b []byte, need, maxCap int) []byte {
	if cap(b)-len(b) >= need {
		return b
	}
	want := len(b) + need
	c := 2 * cap(b)
	if c < want {
		c = want
	}
	if c < 512 {
		c = 512
	}
	if c > maxCap {
		c = maxCap
	}
	if c < want {
		c = want
	}
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// readAllLimited appends everything r yields to dst. It fails with a limit
// error if more than limit bytes would be appended; reading errors are
// returned as they are. hint is the expected output size.
func readAllLimited(dst []byte, r io.Reader, limit, hint int, c Compression) ([]byte, error) {
	end := len(dst) + limit
	hint = max(hint, 512)
	for idle := 0; idle < 100; {
		var free []byte
		if len(dst) == end {
			// At the limit: any further byte is one too many.
			var one [1]byte
			free = one[:]
		} else {
			if len(dst) == cap(dst) {
				dst = growCapped(dst, min(hint, end-len(dst)), end)
			}
			free = dst[len(dst):min(cap(dst), end)]
		}
		k, err := r.Read(free)
		if k > 0 {
			if len(dst) == end {
				return dst, limitErr(c, limit)
			}
			dst = dst[:len(dst)+k]
			idle = 0
		} else {
			idle++
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, io.ErrNoProgress
}

// ---- gzip ------------------------------------------------------------

var gzipReaders sync.Pool // *gzip.Reader

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
	return w
}}

// appendGunzip inflates one or more concatenated gzip members. As the
// JDK's GZIPInputStream does, bytes after a member that do not start a
// valid gzip header end the stream and are ignored.
func appendGunzip(dst, src []byte, limit int) ([]byte, error) {
	br := bytes.NewReader(src)
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(br)
		if err != nil {
			return dst, codecErr(CompressionGzip, "invalid header", err)
		}
	} else if err = zr.Reset(br); err != nil {
		gzipReaders.Put(zr)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return dst, codecErr(CompressionGzip, "invalid header", err)
	}
	defer func() {
		// Drop the reference to src before pooling.
		_ = zr.Reset(eofReader{})
		gzipReaders.Put(zr)
	}()
	start := len(dst)
	for {
		zr.Multistream(false)
		dst, err = readAllLimited(dst, zr, limit-(len(dst)-start), 4*len(src), CompressionGzip)
		if err != nil {
			var ce *CorruptionError
			if errors.As(err, &ce) {
				return dst, err
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return dst, codecErr(CompressionGzip, "invalid stream", err)
		}
		if br.Len() == 0 {
			return dst, nil
		}
		if zr.Reset(br) != nil {
			// Trailing bytes that are not another member.
			return dst, nil
		}
	}
}

// eofReader is an empty io.Reader that pooled readers are parked on.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// appendWriter is an io.Writer that appends to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func appendGzip(dst, src []byte) ([]byte, error) {
	zw := gzipWriters.Get().(*gzip.Writer)
	aw := &appendWriter{b: dst}
	zw.Reset(aw)
	_, err := zw.Write(src)
	if err == nil {
		err = zw.Close()
	}
	zw.Reset(io.Discard)
	gzipWriters.Put(zw)
	if err != nil {
		return dst, err
	}
	return aw.b, nil
}

// ---- snappy (xerial snappy-java framing) -------------------------------

// xerialHeader is the 16-byte snappy-java stream header: magic, version 1,
// minimum compatible version 1.
var xerialHeader = [16]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// xerialChunk is the amount of uncompressed data per snappy block,
// snappy-java's default block size.
const xerialChunk = 32 << 10

func hasXerialMagic(b []byte) bool {
	return len(b) >= 16 && bytes.Equal(b[:8], xerialHeader[:8])
}

// appendUnsnappy decodes xerial-framed snappy: a stream header followed by
// length-prefixed raw blocks, possibly several such streams concatenated,
// or (without the header) the whole input as one raw block.
func appendUnsnappy(dst, src []byte, limit int) ([]byte, error) {
	if len(src) == 0 {
		return dst, nil
	}
	end := len(dst) + limit
	if !hasXerialMagic(src) {
		return appendSnappyBlock(dst, src, end, limit)
	}
	pos := 0
	for pos < len(src) {
		if len(src)-pos < 4 {
			return dst, codecErr(CompressionSnappy, fmt.Sprintf("truncated chunk length at byte %d", pos), io.ErrUnexpectedEOF)
		}
		if src[pos] == xerialHeader[0] && bytes.Equal(src[pos:pos+4], xerialHeader[:4]) {
			// A (new) stream header where a chunk length is expected.
			if len(src)-pos < 16 {
				return dst, codecErr(CompressionSnappy, fmt.Sprintf("truncated stream header at byte %d", pos), io.ErrUnexpectedEOF)
			}
			h := src[pos : pos+16]
			if !bytes.Equal(h[:8], xerialHeader[:8]) {
				return dst, codecErr(CompressionSnappy, fmt.Sprintf("bad stream header magic at byte %d", pos), nil)
			}
			version := int32(binary.BigEndian.Uint32(h[8:]))
			compat := int32(binary.BigEndian.Uint32(h[12:]))
			if version < 1 || compat > 1 {
				return dst, codecErr(CompressionSnappy, fmt.Sprintf("unsupported stream version %d (minimum compatible %d) at byte %d", version, compat, pos), nil)
			}
			pos += 16
			continue
		}
		n := int32(binary.BigEndian.Uint32(src[pos:]))
		if n < 0 {
			return dst, codecErr(CompressionSnappy, fmt.Sprintf("negative chunk length %d at byte %d", n, pos), nil)
		}
		pos += 4
		if int(n) > len(src)-pos {
			return dst, codecErr(CompressionSnappy, fmt.Sprintf("chunk of %d bytes at byte %d runs past the end (%d bytes left)", n, pos-4, len(src)-pos), io.ErrUnexpectedEOF)
		}
		var err error
		dst, err = appendSnappyBlock(dst, src[pos:pos+int(n)], end, limit)
		if err != nil {
			return dst, err
		}
		pos += int(n)
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block, refusing to write past
// end. It uses the strict decoder: snappy-java rejects the s2 extensions
// that snappy.Decode would accept.
func appendSnappyBlock(dst, block []byte, end, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, codecErr(CompressionSnappy, "invalid block length", err)
	}
	if n > end-len(dst) {
		return dst, limitErr(CompressionSnappy, limit)
	}
	dst = growCapped(dst, n, end)
	into := dst[len(dst) : len(dst)+n]
	out, err := snappy.DecodeStrict(into, block)
	if err != nil {
		return dst, codecErr(CompressionSnappy, "invalid block", err)
	}
	if len(out) != n || (n > 0 && &out[0] != &into[0]) {
		return dst, codecErr(CompressionSnappy, "block length mismatch", snappy.ErrCorrupt)
	}
	return dst[:len(dst)+n], nil
}

func appendSnappy(dst, src []byte) []byte {
	dst = append(dst, xerialHeader[:]...)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialChunk)]
		src = src[len(chunk):]
		p := len(dst)
		bound := snappy.MaxEncodedLen(len(chunk))
		dst = growCapped(dst, 4+bound, math.MaxInt)
		enc := snappy.Encode(dst[p+4:p+4+bound], chunk)
		binary.BigEndian.PutUint32(dst[p:p+4], uint32(len(enc)))
		dst = dst[:p+4+len(enc)]
	}
	return dst
}

// ---- lz4 -------------------------------------------------------------

const (
	lz4FrameMagic      = 0x184D2204
	lz4Uncompressed    = 0x80000000
	lz4FlgVersionMask  = 0xC0
	lz4FlgVersion1     = 0x40
	lz4FlgIndependent  = 0x20
	lz4FlgBlockCksum   = 0x10
	lz4FlgContentSize  = 0x08
	lz4FlgContentCksum = 0x04
	lz4FlgReserved     = 0x03
	lz4BDReserved      = 0x8F
	lz4WriteBlock      = 64 << 10
	lz4WriteFLG        = lz4FlgVersion1 | lz4FlgIndependent // 0x60
	lz4WriteBD         = 4 << 4                             // 0x40: 64 KiB blocks
)

var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// lz4Scratch holds buffers used to find out whether a block that did not
// fit below the limit was corrupt or merely too large.
var lz4Scratch sync.Pool // *[]byte

// appendUnLZ4 decodes an LZ4 frame under Kafka's restrictions (§1.10.4).
// With v0 set the header checksum byte is ignored.
func appendUnLZ4(dst, src []byte, limit int, v0 bool) ([]byte, error) {
	const c = CompressionLZ4
	if len(src) < 7 {
		return dst, codecErr(c, fmt.Sprintf("frame header needs 7 bytes, have %d", len(src)), io.ErrUnexpectedEOF)
	}
	if m := binary.LittleEndian.Uint32(src); m != lz4FrameMagic {
		return dst, codecErr(c, fmt.Sprintf("bad frame magic 0x%08x", m), nil)
	}
	flg, bd := src[4], src[5]
	if flg&lz4FlgReserved != 0 {
		return dst, codecErr(c, fmt.Sprintf("reserved FLG bits set (FLG 0x%02x)", flg), nil)
	}
	if flg&lz4FlgVersionMask != lz4FlgVersion1 {
		return dst, codecErr(c, fmt.Sprintf("unsupported frame version %d (FLG 0x%02x)", flg>>6, flg), nil)
	}
	if flg&lz4FlgIndependent == 0 {
		return dst, codecErr(c, "dependent block stream is unsupported", nil)
	}
	if bd&lz4BDReserved != 0 {
		return dst, codecErr(c, fmt.Sprintf("reserved BD bits set (BD 0x%02x)", bd), nil)
	}
	code := int(bd >> 4 & 7)
	if code < 4 {
		return dst, codecErr(c, fmt.Sprintf("unsupported block size code %d (BD 0x%02x)", code, bd), nil)
	}
	maxBlock := 1 << (8 + 2*code)
	pos := 6
	if flg&lz4FlgContentSize != 0 {
		pos += 8
	}
	if len(src) < pos+1 {
		return dst, codecErr(c, "truncated frame header", io.ErrUnexpectedEOF)
	}
	if !v0 {
		want := byte(xxh32(src[4:pos]) >> 8)
		if src[pos] != want {
			return dst, codecErr(c, fmt.Sprintf("header checksum 0x%02x, expected 0x%02x", src[pos], want), nil)
		}
	}
	pos++

	start := len(dst)
	end := start + limit
	for {
		if len(src)-pos < 4 {
			return dst, codecErr(c, fmt.Sprintf("stream ends at byte %d without an end mark", len(src)), io.ErrUnexpectedEOF)
		}
		word := binary.LittleEndian.Uint32(src[pos:])
		pos += 4
		size := int(word &^ lz4Uncompressed)
		if size == 0 {
			if flg&lz4FlgContentCksum != 0 {
				if len(src)-pos < 4 {
					return dst, codecErr(c, "truncated content checksum", io.ErrUnexpectedEOF)
				}
				stored := binary.LittleEndian.Uint32(src[pos:])
				if got := xxh32(dst[start:]); got != stored {
					return dst, codecErr(c, fmt.Sprintf("content checksum 0x%08x, computed 0x%08x", stored, got), nil)
				}
			}
			return dst, nil
		}
		if size > maxBlock {
			return dst, codecErr(c, fmt.Sprintf("block of %d bytes exceeds the %d-byte maximum", size, maxBlock), nil)
		}
		if len(src)-pos < size {
			return dst, codecErr(c, fmt.Sprintf("block of %d bytes at byte %d runs past the end", size, pos-4), io.ErrUnexpectedEOF)
		}
		block := src[pos : pos+size]
		pos += size
		if flg&lz4FlgBlockCksum != 0 {
			if len(src)-pos < 4 {
				return dst, codecErr(c, "truncated block checksum", io.ErrUnexpectedEOF)
			}
			stored := binary.LittleEndian.Uint32(src[pos:])
			pos += 4
			if got := xxh32(block); got != stored {
				return dst, codecErr(c, fmt.Sprintf("block checksum 0x%08x, computed 0x%08x", stored, got), nil)
			}
		}
		room := end - len(dst)
		if word&lz4Uncompressed != 0 {
			if size > room {
				return dst, limitErr(c, limit)
			}
			dst = append(growCapped(dst, size, end), block...)
			continue
		}
		room = min(room, maxBlock)
		dst = growCapped(dst, room, end)
		k, err := lz4.UncompressBlock(block, dst[len(dst):len(dst)+room])
		if err != nil {
			if room < maxBlock {
				return dst, lz4Overflow(block, maxBlock, limit)
			}
			return dst, codecErr(c, "invalid block", err)
		}
		dst = dst[:len(dst)+k]
	}
}

// lz4Overflow tells apart a block that decodes to more than the space left
// under the limit (a limit error) from a corrupt block.
func lz4Overflow(block []byte, maxBlock, limit int) error {
	bp, _ := lz4Scratch.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	if cap(*bp) < maxBlock {
		*bp = make([]byte, maxBlock)
	}
	_, err := lz4.UncompressBlock(block, (*bp)[:maxBlock])
	lz4Scratch.Put(bp)
	if err != nil {
		return codecErr(CompressionLZ4, "invalid block", err)
	}
	return limitErr(CompressionLZ4, limit)
}

// lz4HeaderChecksum is the HC byte of the frames appendLZ4 writes.
var lz4HeaderChecksum = byte(xxh32([]byte{lz4WriteFLG, lz4WriteBD}) >> 8)

func appendLZ4(dst, src []byte) []byte {
	dst = append(dst, 0x04, 0x22, 0x4D, 0x18, lz4WriteFLG, lz4WriteBD, lz4HeaderChecksum)
	comp := lz4Compressors.Get().(*lz4.Compressor)
	for len(src) > 0 {
		chunk := src[:min(len(src), lz4WriteBlock)]
		src = src[len(chunk):]
		p := len(dst)
		bound := lz4.CompressBlockBound(len(chunk))
		dst = growCapped(dst, 4+bound, math.MaxInt)
		k, err := comp.CompressBlock(chunk, dst[p+4:p+4+bound])
		if err != nil || k <= 0 || k >= len(chunk) {
			binary.LittleEndian.PutUint32(dst[p:p+4], uint32(len(chunk))|lz4Uncompressed)
			dst = append(dst[:p+4], chunk...)
			continue
		}
		binary.LittleEndian.PutUint32(dst[p:p+4], uint32(k))
		dst = dst[:p+4+k]
	}
	lz4Compressors.Put(comp)
	return append(dst, 0, 0, 0, 0)
}

// xxHash32 primes.
const (
	xxPrime1 uint32 = 2654435761
	xxPrime2 uint32 = 2246822519
	xxPrime3 uint32 = 3266489917
	xxPrime4 uint32 = 668265263
	xxPrime5 uint32 = 374761393
)

func xxRound(acc, lane uint32) uint32 {
	return bits.RotateLeft32(acc+lane*xxPrime2, 13) * xxPrime1
}

// xxh32 is the 32-bit xxHash of b with seed 0, the checksum of the LZ4
// frame format.
func xxh32(b []byte) uint32 {
	n := uint32(len(b))
	var seed, h uint32
	if len(b) >= 16 {
		v1 := seed + xxPrime1 + xxPrime2
		v2 := seed + xxPrime2
		v3 := seed
		v4 := seed - xxPrime1
		for len(b) >= 16 {
			v1 = xxRound(v1, binary.LittleEndian.Uint32(b[0:]))
			v2 = xxRound(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = xxRound(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = xxRound(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) +
			bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = xxPrime5
	}
	h += n
	for len(b) >= 4 {
		h = bits.RotateLeft32(h+binary.LittleEndian.Uint32(b)*xxPrime3, 17) * xxPrime4
		b = b[4:]
	}
	for _, x := range b {
		h = bits.RotateLeft32(h+uint32(x)*xxPrime5, 11) * xxPrime1
	}
	h ^= h >> 15
	h *= xxPrime2
	h ^= h >> 13
	h *= xxPrime3
	h ^= h >> 16
	return h
}

// ---- zstd ------------------------------------------------------------

const (
	zstdFrameMagic     = 0xFD2FB528
	zstdSkippableMask  = 0xFFFFFFF0
	zstdSkippableMagic = 0x184D2A50
	zstdMaxBlock       = 128 << 10
	// zstdMaxWindow matches libzstd's default decoder window limit
	// (window log 27), which is what zstd-jni applies for Kafka.
	zstdMaxWindow = 1 << 27
)

type zstdDecoders struct {
	free   *zstd.Decoder // output bounded by the caller
	capped *zstd.Decoder // output bounded by cap(dst)
}

// zstdDec returns the shared decoders. DecodeAll is safe for concurrent
// use and decodes straight into the destination slice, so memory use
// follows the output size rather than the declared window size.
var zstdDec = sync.OnceValues(func() (zstdDecoders, error) {
	opts := []zstd.DOption{
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
	}
	free, err := zstd.NewReader(nil, opts...)
	if err != nil {
		return zstdDecoders{}, err
	}
	capped, err := zstd.NewReader(nil, append(opts, zstd.WithDecodeAllCapLimit(true))...)
	if err != nil {
		return zstdDecoders{}, err
	}
	return zstdDecoders{free: free, capped: capped}, nil
})

var zstdEnc = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithZeroFrames(true),
		zstd.WithEncoderCRC(true))
})

// zstdFrame is what zstdNextFrame learned about one frame.
type zstdFrame struct {
	size      int   // bytes of input the frame occupies
	skippable bool  // a skippable frame (no output)
	bound     int64 // upper bound of the frame's output
	fcs       int64 // declared content size, -1 if absent
}

// zstdNextFrame walks the frame at the start of b without decoding it,
// to find where it ends and how much it can produce at most.
func zstdNextFrame(b []byte) (zstdFrame, error) {
	if len(b) < 4 {
		return zstdFrame{}, fmt.Errorf("truncated frame magic (%d bytes)", len(b))
	}
	magic := binary.LittleEndian.Uint32(b)
	if magic&zstdSkippableMask == zstdSkippableMagic {
		if len(b) < 8 {
			return zstdFrame{}, errors.New("truncated skippable frame header")
		}
		n := uint64(binary.LittleEndian.Uint32(b[4:]))
		if n > uint64(len(b)-8) {
			return zstdFrame{}, fmt.Errorf("skippable frame of %d bytes runs past the end", n)
		}
		return zstdFrame{size: 8 + int(n), skippable: true}, nil
	}
	if magic != zstdFrameMagic {
		return zstdFrame{}, fmt.Errorf("bad frame magic 0x%08x", magic)
	}
	if len(b) < 5 {
		return zstdFrame{}, errors.New("truncated frame header")
	}
	fhd := b[4]
	single := fhd&0x20 != 0
	hasCksum := fhd&0x04 != 0
	dictSize := [4]int{0, 1, 2, 4}[fhd&3]
	fcsSize := [4]int{0, 2, 4, 8}[fhd>>6]
	if fcsSize == 0 && single {
		fcsSize = 1
	}
	pos := 5
	var window uint64
	if !single {
		if len(b) < pos+1 {
			return zstdFrame{}, errors.New("truncated window descriptor")
		}
		wd := b[pos]
		pos++
		base := uint64(1) << (10 + wd>>3)
		window = base + base/8*uint64(wd&7)
	}
	pos += dictSize
	if len(b) < pos+fcsSize {
		return zstdFrame{}, errors.New("truncated frame header")
	}
	fcs := int64(-1)
	switch fcsSize {
	case 1:
		fcs = int64(b[pos])
	case 2:
		fcs = int64(binary.LittleEndian.Uint16(b[pos:])) + 256
	case 4:
		fcs = int64(binary.LittleEndian.Uint32(b[pos:]))
	case 8:
		v := binary.LittleEndian.Uint64(b[pos:])
		if v > 1<<62 {
			return zstdFrame{}, fmt.Errorf("frame content size %d too large", v)
		}
		fcs = int64(v)
	}
	pos += fcsSize
	if single {
		window = uint64(fcs)
	}
	blockMax := int64(zstdMaxBlock)
	if window < uint64(blockMax) {
		blockMax = int64(window)
	}
	var bound int64
	for {
		if len(b)-pos < 3 {
			return zstdFrame{}, errors.New("truncated block header")
		}
		h := uint32(b[pos]) | uint32(b[pos+1])<<8 | uint32(b[pos+2])<<16
		pos += 3
		last := h&1 != 0
		size := int(h >> 3)
		switch h >> 1 & 3 {
		case 0: // raw
			bound += int64(size)
		case 1: // RLE: one byte repeated size times
			bound += int64(size)
			size = 1
		case 2:
			bound += blockMax
		default:
			return zstdFrame{}, errors.New("reserved block type")
		}
		if len(b)-pos < size {
			return zstdFrame{}, errors.New("block runs past the end")
		}
		pos += size
		if last {
			break
		}
	}
	if hasCksum {
		if len(b)-pos < 4 {
			return zstdFrame{}, errors.New("truncated content checksum")
		}
		pos += 4
	}
	if fcs >= 0 && fcs < bound {
		bound = fcs
	}
	return zstdFrame{size: pos, bound: bound, fcs: fcs}, nil
}

// appendUnzstd decodes a sequence of zstd frames (skippable frames are
// skipped), checking each frame's possible output against the limit
// before decoding it.
func appendUnzstd(dst, src []byte, limit int) ([]byte, error) {
	const c = CompressionZstd
	decs, err := zstdDec()
	if err != nil {
		return dst, codecErr(c, "decoder unavailable", err)
	}
	end := len(dst) + limit
	pos := 0
	for pos < len(src) {
		f, err := zstdNextFrame(src[pos:])
		if err != nil {
			return dst, codecErr(c, fmt.Sprintf("invalid frame at byte %d", pos), err)
		}
		frame := src[pos : pos+f.size]
		pos += f.size
		if f.skippable {
			continue
		}
		room := end - len(dst)
		if f.fcs > int64(room) {
			return dst, limitErr(c, limit)
		}
		var out []byte
		if f.bound <= int64(room) {
			out, err = decs.free.DecodeAll(frame, dst)
		} else {
			// The frame might inflate past the limit: decode into exactly
			// the space that is left and let the decoder stop there.
			dst = growCapped(dst, room, end)
			out, err = decs.capped.DecodeAll(frame, dst[:len(dst):end])
			if zstdOutOfSpace(err) {
				return dst, limitErr(c, limit)
			}
		}
		if err != nil {
			return dst, codecErr(c, fmt.Sprintf("invalid frame at byte %d", pos-f.size), err)
		}
		if len(out) > end {
			return dst, limitErr(c, limit)
		}
		dst = out
	}
	return dst, nil
}

// zstdOutOfSpace reports whether a decode bounded by cap(dst) stopped for
// lack of space. Sequence execution reports that as an oversized block
// rather than as ErrDecoderSizeExceeded.
func zstdOutOfSpace(err error) bool {
	return err != nil && (errors.Is(err, zstd.ErrDecoderSizeExceeded) ||
		strings.Contains(err.Error(), "bigger than max block size"))
}

func appendZstd(dst, src []byte) ([]byte, error) {
	enc, err := zstdEnc()
	if err != nil {
		return dst, err
	}
	return enc.EncodeAll(src, dst), nil
}
