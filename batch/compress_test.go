package batch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

var allCodecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// compressibleData returns n deterministic bytes that look like record
// payloads: repetitive text with some random noise.
func compressibleData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "key-%d\tvalue-%d-%08x\tuser=%s;", i, r.IntN(1000), r.Uint32(), []string{"alice", "bob", "carol"}[r.IntN(3)])
	}
	return b.Bytes()[:n]
}

// randomData returns n deterministic incompressible bytes.
func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 11))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// mustCompress compresses src with c or fails the test.
func mustCompress(t testing.TB, c Compression, src []byte) []byte {
	t.Helper()
	out, err := AppendCompressed(nil, c, src)
	if err != nil {
		t.Fatalf("AppendCompressed(%s): %v", c, err)
	}
	return out
}

// wantCorrupt fails unless err is a *CorruptionError at position 0.
func wantCorrupt(t testing.TB, err error, what string) *CorruptionError {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	var ce *CorruptionError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("%s: error %v (%T) is not a *CorruptionError", what, err, err)
	}
	if ce.Pos != 0 {
		t.Fatalf("%s: position %d, want 0", what, ce.Pos)
	}
	if ce.Reason == "" {
		t.Fatalf("%s: empty reason", what)
	}
	return ce
}

func TestXXH32KnownValues(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0x02cc5d05},
		{"a", 0x550d7456},
		{"abc", 0x32d153ff},
		{"Nobody inspects the spammish repetition", 0xe2293b2f},
	} {
		if got := xxh32([]byte(tc.in)); got != tc.want {
			t.Errorf("xxh32(%q) = %08x, want %08x", tc.in, got, tc.want)
		}
	}
}

func TestCompressRoundTrip(t *testing.T) {
	inputs := map[string][]byte{
		"empty":         {},
		"one":           {'x'},
		"small":         []byte("hello, kafka hello, kafka hello, kafka"),
		"text-100k":     compressibleData(100_000, 1),
		"text-1MiB":     compressibleData(1<<20, 2),
		"random-1MiB":   randomData(1<<20, 3),
		"zeros-1MiB":    make([]byte, 1<<20),
		"random-32KiB":  randomData(32<<10, 4),
		"random-64KiB1": randomData(64<<10+1, 5),
	}
	for _, c := range allCodecs {
		for name, in := range inputs {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				prefix := []byte("prefix")
				comp, err := AppendCompressed(append([]byte(nil), prefix...), c, in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(comp, prefix) {
					t.Fatal("AppendCompressed clobbered dst")
				}
				comp = comp[len(prefix):]
				out, err := AppendDecompressed(append([]byte(nil), prefix...), c, comp, len(in))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out[:len(prefix)], prefix) || !bytes.Equal(out[len(prefix):], in) {
					t.Fatalf("round trip mismatch: got %d bytes, want %d", len(out)-len(prefix), len(in))
				}
				if len(in) > 0 {
					_, err := AppendDecompressed(nil, c, comp, len(in)-1)
					ce := wantCorrupt(t, err, "limit one below the size")
					if !errors.Is(ce, errLimit) {
						t.Fatalf("limit error does not wrap errLimit: %v", err)
					}
				}
			})
		}
	}
}

// xerialChunks splits xerial-framed snappy into its raw blocks.
func xerialChunks(t *testing.T, b []byte) [][]byte {
	t.Helper()
	if !bytes.Equal(b[:16], xerialHeader[:]) {
		t.Fatalf("header % x", b[:16])
	}
	var chunks [][]byte
	for p := 16; p < len(b); {
		n := int(binary.BigEndian.Uint32(b[p:]))
		chunks = append(chunks, b[p+4:p+4+n])
		p += 4 + n
	}
	return chunks
}

func TestSnappyWriterFraming(t *testing.T) {
	in := compressibleData(100_000, 9)
	comp := mustCompress(t, CompressionSnappy, in)
	chunks := xerialChunks(t, comp)
	if len(chunks) != 4 {
		t.Fatalf("%d chunks for 100000 bytes, want 4 of at most 32 KiB", len(chunks))
	}
	var all []byte
	for i, ch := range chunks {
		dec, err := snappy.Decode(nil, ch)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(32<<10, len(in)-i*(32<<10)); len(dec) != want {
			t.Fatalf("chunk %d holds %d bytes, want %d", i, len(dec), want)
		}
		all = append(all, dec...)
	}
	if !bytes.Equal(all, in) {
		t.Fatal("chunks do not reassemble the input")
	}
	if got := mustCompress(t, CompressionSnappy, nil); !bytes.Equal(got, xerialHeader[:]) {
		t.Fatalf("empty input gives % x, want the bare header", got)
	}
}

func TestSnappyXerialShapes(t *testing.T) {
	a := compressibleData(70_000, 21)
	b := []byte("second stream")
	sa := mustCompress(t, CompressionSnappy, a)
	sb := mustCompress(t, CompressionSnappy, b)
	raw := snappy.Encode(nil, a)

	accept := []struct {
		name string
		in   []byte
		want []byte
	}{
		{"empty input", nil, nil},
		{"header only", xerialHeader[:], nil},
		{"raw block without header", raw, a},
		{"short raw block", snappy.Encode(nil, []byte("hi")), []byte("hi")},
		{"concatenated streams", append(append([]byte(nil), sa...), sb...), append(append([]byte(nil), a...), b...)},
		{"header between chunks", append(append(append([]byte(nil), sa...), xerialHeader[:]...), sb[16:]...), append(append([]byte(nil), a...), b...)},
		{"newer version", append([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 2, 0, 0, 0, 1}, sb[16:]...), b},
	}
	for _, tc := range accept {
		got, err := AppendDecompressed(nil, CompressionSnappy, tc.in, 1<<20)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: got %d bytes, want %d", tc.name, len(got), len(tc.want))
		}
	}

	badVersion := append([]byte(nil), sb...)
	binary.BigEndian.PutUint32(badVersion[12:], 2) // minimum compatible version 2
	negative := append(append([]byte(nil), xerialHeader[:]...), 0xff, 0, 0, 1)
	// A copy with offset 0 is the s2 "repeat" extension; snappy-java
	// rejects it.
	s2Repeat := []byte{8, 0x04, 'a', 0x01, 0x00}
	reject := map[string][]byte{
		"truncated chunk":        sa[:len(sa)-1],
		"truncated chunk length": append(append([]byte(nil), sb...), 0, 0),
		"truncated header":       append(append([]byte(nil), sb...), xerialHeader[:10]...),
		"negative chunk length":  negative,
		"incompatible version":   badVersion,
		"garbage raw block":      []byte("definitely not snappy data at all"),
		"garbage chunk":          append(append([]byte(nil), xerialHeader[:]...), 0, 0, 0, 3, 0xff, 0xff, 0xff),
		"s2 repeat offset":       s2Repeat,
	}
	for name, in := range reject {
		_, err := AppendDecompressed(nil, CompressionSnappy, in, 1<<20)
		wantCorrupt(t, err, name)
	}
}

func TestGzipShapes(t *testing.T) {
	a, b := []byte("first member "), compressibleData(50_000, 3)
	ga, gb := mustCompress(t, CompressionGzip, a), mustCompress(t, CompressionGzip, b)
	both := append(append([]byte(nil), a...), b...)
	concat := append(append([]byte(nil), ga...), gb...)
	for name, in := range map[string][]byte{
		"concatenated members":     concat,
		"trailing garbage ignored": append(append([]byte(nil), concat...), "junk after the stream"...),
	} {
		got, err := AppendDecompressed(nil, CompressionGzip, in, 1<<20)
		if err != nil || !bytes.Equal(got, both) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
	}
	_, err := AppendDecompressed(nil, CompressionGzip, concat, len(both)-1)
	wantCorrupt(t, err, "second member past the limit")

	crcBad := append([]byte(nil), ga...)
	crcBad[len(crcBad)-5] ^= 1
	for name, in := range map[string][]byte{
		"empty":             nil,
		"bad magic":         []byte("not gzip at all, no"),
		"truncated":         ga[:len(ga)-3],
		"crc mismatch":      crcBad,
		"truncated 2nd":     concat[:len(concat)-4],
		"header only":       ga[:10],
		"corrupt deflate 2": append(append([]byte(nil), ga...), 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff),
	} {
		_, err := AppendDecompressed(nil, CompressionGzip, in, 1<<20)
		wantCorrupt(t, err, name)
	}
}

// v2GzipVector is the part of testdata/vectors/v2_gzip.json this file uses.
type v2GzipVector struct {
	Batch struct {
		RecordsSectionBytes      int `json:"records_section_bytes"`
		UncompressedRecordsBytes int `json:"uncompressed_records_bytes"`
	} `json:"batch"`
}

func TestDecompressV2GzipVector(t *testing.T) {
	bin, err := os.ReadFile("testdata/vectors/v2_gzip.bin")
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile("testdata/vectors/v2_gzip.json")
	if err != nil {
		t.Fatal(err)
	}
	var v v2GzipVector
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	section := bin[HeaderSize:]
	if len(section) != v.Batch.RecordsSectionBytes {
		t.Fatalf("records section %d bytes, json says %d", len(section), v.Batch.RecordsSectionBytes)
	}
	out, err := AppendDecompressed(nil, CompressionGzip, section, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != v.Batch.UncompressedRecordsBytes {
		t.Fatalf("inflated to %d bytes, want %d", len(out), v.Batch.UncompressedRecordsBytes)
	}
	for i := range 3 {
		if !bytes.Contains(out, fmt.Appendf(nil, "gk-%d", i)) || !bytes.Contains(out, fmt.Appendf(nil, "gzip-value-%d-", i)) {
			t.Fatalf("record %d not found in the inflated section", i)
		}
	}
	_, err = AppendDecompressed(nil, CompressionGzip, section, v.Batch.UncompressedRecordsBytes-1)
	wantCorrupt(t, err, "limit below the vector size")
}

func TestLZ4WriterHeader(t *testing.T) {
	in := compressibleData(200_000, 5)
	comp := mustCompress(t, CompressionLZ4, in)
	want := []byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82}
	if !bytes.Equal(comp[:7], want) {
		t.Fatalf("frame header % x, want % x", comp[:7], want)
	}
	if !bytes.HasSuffix(comp, []byte{0, 0, 0, 0}) {
		t.Fatal("no end mark")
	}
	// Walk the blocks: four blocks of at most 64 KiB, compressed.
	blocks := 0
	for p := 7; ; blocks++ {
		w := binary.LittleEndian.Uint32(comp[p:])
		if w == 0 {
			if p+4 != len(comp) {
				t.Fatalf("end mark at %d of %d", p, len(comp))
			}
			break
		}
		if w&lz4Uncompressed != 0 {
			t.Fatalf("block %d stored uncompressed", blocks)
		}
		dec := make([]byte, 64<<10)
		n, err := lz4.UncompressBlock(comp[p+4:p+4+int(w)], dec)
		if err != nil {
			t.Fatal(err)
		}
		if wantN := min(64<<10, len(in)-blocks*(64<<10)); n != wantN {
			t.Fatalf("block %d holds %d bytes, want %d", blocks, n, wantN)
		}
		p += 4 + int(w)
	}
	if blocks != 4 {
		t.Fatalf("%d blocks, want 4", blocks)
	}

	// Incompressible input is stored raw.
	rnd := randomData(70_000, 6)
	comp = mustCompress(t, CompressionLZ4, rnd)
	if w := binary.LittleEndian.Uint32(comp[7:]); w != lz4Uncompressed|64<<10 {
		t.Fatalf("first block word %08x, want an uncompressed 64 KiB block", w)
	}
	if got := mustCompress(t, CompressionLZ4, nil); !bytes.Equal(got, append(want, 0, 0, 0, 0)) {
		t.Fatalf("empty input gives % x", got)
	}
}

// lz4Frame builds an LZ4 frame by hand: FLG, BD, optional content size,
// header checksum (computed unless hc >= 0) and the given raw blocks.
func lz4Frame(flg, bd byte, contentSize bool, hc int, blocks ...[]byte) []byte {
	b := []byte{0x04, 0x22, 0x4d, 0x18, flg, bd}
	if contentSize {
		b = binary.LittleEndian.AppendUint64(b, 0)
	}
	if hc >= 0 {
		b = append(b, byte(hc))
	} else {
		b = append(b, byte(xxh32(b[4:])>>8))
	}
	for _, blk := range blocks {
		b = append(b, blk...)
	}
	return b
}

// lz4RawBlock is a block word for n stored bytes followed by the bytes.
func lz4RawBlock(data []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(data))|lz4Uncompressed), data...)
}

func TestLZ4Reader(t *testing.T) {
	payload := []byte("lz4 payload")
	endMark := []byte{0, 0, 0, 0}
	good := lz4Frame(0x60, 0x40, false, -1, lz4RawBlock(payload), endMark)
	if got, err := AppendDecompressed(nil, CompressionLZ4, good, 100); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("hand-made frame: %q, %v", got, err)
	}

	withBlockCksum := lz4Frame(0x70, 0x40, false, -1, lz4RawBlock(payload),
		binary.LittleEndian.AppendUint32(nil, xxh32(payload)), endMark)
	badBlockCksum := lz4Frame(0x70, 0x40, false, -1, lz4RawBlock(payload),
		binary.LittleEndian.AppendUint32(nil, xxh32(payload)+1), endMark)
	withContentCksum := lz4Frame(0x64, 0x40, false, -1, lz4RawBlock(payload), endMark,
		binary.LittleEndian.AppendUint32(nil, xxh32(payload)))
	badContentCksum := lz4Frame(0x64, 0x40, false, -1, lz4RawBlock(payload), endMark, []byte{1, 2, 3, 4})
	// Kafka's magic-0 writer hashed the magic too.
	brokenHC := lz4Frame(0x60, 0x40, false, int(byte(xxh32([]byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x40})>>8)), lz4RawBlock(payload), endMark)
	oversized := lz4Frame(0x60, 0x40, false, -1, lz4RawBlock(make([]byte, 64<<10+1)), endMark)

	accept := map[string][]byte{
		"block checksums":         withBlockCksum,
		"content checksum":        withContentCksum,
		"content size":            lz4Frame(0x68, 0x40, true, -1, lz4RawBlock(payload), endMark),
		"256 KiB blocks":          lz4Frame(0x60, 0x50, false, -1, lz4RawBlock(payload), endMark),
		"4 MiB blocks":            lz4Frame(0x60, 0x70, false, -1, lz4RawBlock(payload), endMark),
		"data after end mark":     append(append([]byte(nil), good...), "ignored"...),
		"compressed bit end mark": lz4Frame(0x60, 0x40, false, -1, lz4RawBlock(payload), []byte{0, 0, 0, 0x80}),
		"two blocks":              lz4Frame(0x60, 0x40, false, -1, lz4RawBlock(payload[:3]), lz4RawBlock(payload[3:]), endMark),
	}
	for name, in := range accept {
		got, err := AppendDecompressed(nil, CompressionLZ4, in, 100)
		if err != nil || !bytes.Equal(got, payload) {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	if _, err := AppendDecompressed(nil, CompressionLZ4, lz4Frame(0x60, 0x40, false, -1, lz4RawBlock(make([]byte, 64<<10)), endMark), 64<<10); err != nil {
		t.Errorf("64 KiB raw block: %v", err)
	}

	reject := map[string][]byte{
		"empty":                  nil,
		"short header":           good[:6],
		"bad magic":              append([]byte{0x03}, good[1:]...),
		"legacy lz4 magic":       append([]byte{0x02, 0x21, 0x4c, 0x18}, good[4:]...),
		"reserved FLG bit 0":     lz4Frame(0x61, 0x40, false, -1, endMark),
		"dict id flag":           lz4Frame(0x62, 0x40, false, -1, endMark),
		"version 0":              lz4Frame(0x20, 0x40, false, -1, endMark),
		"version 2":              lz4Frame(0xa0, 0x40, false, -1, endMark),
		"dependent blocks":       lz4Frame(0x40, 0x40, false, -1, endMark),
		"BD code 3":              lz4Frame(0x60, 0x30, false, -1, endMark),
		"BD code 0":              lz4Frame(0x60, 0x00, false, -1, endMark),
		"BD reserved low bits":   lz4Frame(0x60, 0x41, false, -1, endMark),
		"BD reserved high bit":   lz4Frame(0x60, 0xc0, false, -1, endMark),
		"wrong header checksum":  brokenHC,
		"oversized block":        oversized,
		"oversized compressed":   lz4Frame(0x60, 0x40, false, -1, binary.LittleEndian.AppendUint32(nil, 64<<10+1)),
		"no end mark":            good[:len(good)-4],
		"partial end mark":       good[:len(good)-2],
		"truncated block":        good[:len(good)-6],
		"truncated content size": lz4Frame(0x68, 0x40, false, -1)[:10],
		"bad block checksum":     badBlockCksum,
		"missing block checksum": withBlockCksum[:len(withBlockCksum)-8],
		"bad content checksum":   badContentCksum,
		"missing content cksum":  withContentCksum[:len(withContentCksum)-2],
		"corrupt block":          lz4Frame(0x60, 0x40, false, -1, []byte{3, 0, 0, 0, 0x1f, 0xff, 0xff}, endMark),
	}
	for name, in := range reject {
		_, err := AppendDecompressed(nil, CompressionLZ4, in, 1<<20)
		wantCorrupt(t, err, name)
	}

	// Magic 0 ignores the header checksum byte; everything else stays.
	if got, err := appendDecompressed(nil, CompressionLZ4, brokenHC, 100, true); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("v0 frame with the broken checksum: %q, %v", got, err)
	}
	if _, err := appendDecompressed(nil, CompressionLZ4, lz4Frame(0x40, 0x40, false, 0, endMark), 100, true); err == nil {
		t.Error("v0 reader accepted dependent blocks")
	}
}

// TestLZ4ReadsOtherWriters checks frames from pierrec/lz4's writer with
// block checksums, content checksum and content size, which Kafka's reader
// accepts.
func TestLZ4ReadsOtherWriters(t *testing.T) {
	in := compressibleData(300_000, 8)
	for _, tc := range []struct {
		name string
		opts []lz4.Option
	}{
		{"defaults", nil},
		{"block checksums", []lz4.Option{lz4.BlockChecksumOption(true)}},
		{"content size", []lz4.Option{lz4.SizeOption(uint64(len(in)))}},
		{"no content checksum", []lz4.Option{lz4.ChecksumOption(false)}},
		{"1 MiB blocks", []lz4.Option{lz4.BlockSizeOption(lz4.Block1Mb)}},
		{"4 MiB blocks", []lz4.Option{lz4.BlockSizeOption(lz4.Block4Mb), lz4.BlockChecksumOption(true)}},
	} {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(append([]lz4.Option{lz4.ConcurrencyOption(1)}, tc.opts...)...); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := AppendDecompressed(nil, CompressionLZ4, buf.Bytes(), len(in))
		if err != nil || !bytes.Equal(got, in) {
			t.Errorf("%s (FLG %02x BD %02x): %d bytes, %v", tc.name, buf.Bytes()[4], buf.Bytes()[5], len(got), err)
		}
	}
}

func TestZstdShapes(t *testing.T) {
	a, b := compressibleData(300_000, 31), []byte("tail frame")
	za, zb := mustCompress(t, CompressionZstd, a), mustCompress(t, CompressionZstd, b)
	skippable := append(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0x184D2A53), 5), "hello"...)
	both := append(append([]byte(nil), a...), b...)

	// A streamed frame does not record its content size.
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(a)
	zw.Close()
	streamed := buf.Bytes()

	for name, in := range map[string][]byte{
		"concatenated":     append(append([]byte(nil), za...), zb...),
		"skippable frames": append(append(append(append([]byte(nil), skippable...), za...), skippable...), zb...),
		"streamed + frame": append(append([]byte(nil), streamed...), zb...),
	} {
		got, err := AppendDecompressed(nil, CompressionZstd, in, len(both))
		if err != nil || !bytes.Equal(got, both) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
	}
	if got, err := AppendDecompressed(nil, CompressionZstd, nil, 10); err != nil || len(got) != 0 {
		t.Errorf("empty input: %q, %v", got, err)
	}
	if got, err := AppendDecompressed(nil, CompressionZstd, mustCompress(t, CompressionZstd, nil), 10); err != nil || len(got) != 0 {
		t.Errorf("empty frame: %q, %v", got, err)
	}
	// The streamed frame has no content size, so the limit is enforced
	// while decoding.
	_, err = AppendDecompressed(nil, CompressionZstd, streamed, len(a)-1)
	if ce := wantCorrupt(t, err, "streamed frame past the limit"); !errors.Is(ce, errLimit) {
		t.Errorf("not a limit error: %v", err)
	}
	_, err = AppendDecompressed(nil, CompressionZstd, append(append([]byte(nil), za...), zb...), len(both)-1)
	wantCorrupt(t, err, "second frame past the limit")

	badCksum := append([]byte(nil), zb...)
	badCksum[len(badCksum)-1] ^= 0xff
	for name, in := range map[string][]byte{
		"garbage":             []byte("this is not zstd"),
		"trailing garbage":    append(append([]byte(nil), za...), "junk"...),
		"truncated":           za[:len(za)-3],
		"truncated skippable": skippable[:10],
		"checksum mismatch":   badCksum,
		"header only":         za[:6],
	} {
		_, err := AppendDecompressed(nil, CompressionZstd, in, 1<<20)
		wantCorrupt(t, err, name)
	}
}

// TestDecompressionBomb checks that small inputs that inflate far past the
// limit fail quickly without allocating much more than the limit.
func TestDecompressionBomb(t *testing.T) {
	const inflated = 64 << 20
	const limit = 1 << 20
	zeros := make([]byte, inflated)
	bombs := map[string]struct {
		c   Compression
		src []byte
	}{}
	for _, c := range []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		bombs[c.String()] = struct {
			c   Compression
			src []byte
		}{c, mustCompress(t, c, zeros)}
	}
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	zw.Write(zeros)
	zw.Close()
	bombs["zstd-streamed"] = struct {
		c   Compression
		src []byte
	}{CompressionZstd, buf.Bytes()}
	bombs["snappy-raw-claim"] = struct {
		c   Compression
		src []byte
	}{CompressionSnappy, binary.AppendUvarint(nil, 1<<31)}
	zeros = nil

	for name, b := range bombs {
		t.Run(name, func(t *testing.T) {
			if len(b.src) > inflated/10 {
				t.Fatalf("bomb of %d bytes is not small", len(b.src))
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			out, err := AppendDecompressed(nil, b.c, b.src, limit)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			ce := wantCorrupt(t, err, "bomb")
			if !errors.Is(ce, errLimit) {
				t.Fatalf("not a limit error: %v", err)
			}
			if len(out) != 0 {
				t.Fatalf("dst grew to %d bytes on error", len(out))
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 6*limit {
				t.Errorf("allocated %d bytes for a %d-byte limit", alloc, limit)
			}
			if elapsed > 2*time.Second {
				t.Errorf("took %v", elapsed)
			}
		})
	}
}

func TestDecompressMisc(t *testing.T) {
	for _, c := range []Compression{-1, 5, 7, 100} {
		_, err := AppendDecompressed(nil, c, []byte("x"), 10)
		wantCorrupt(t, err, "codec "+c.String())
		if _, err := AppendCompressed(nil, c, []byte("x")); err == nil {
			t.Errorf("AppendCompressed accepted codec %d", c)
		}
	}
	if got, err := AppendDecompressed([]byte("a"), CompressionNone, []byte("bc"), 2); err != nil || string(got) != "abc" {
		t.Errorf("none: %q, %v", got, err)
	}
	got, err := AppendDecompressed([]byte("a"), CompressionNone, []byte("bcd"), 2)
	wantCorrupt(t, err, "none past the limit")
	if string(got) != "a" {
		t.Errorf("dst changed on error: %q", got)
	}
	// On error dst keeps its length even if decoding had started.
	comp := mustCompress(t, CompressionLZ4, compressibleData(200_000, 1))
	got, err = AppendDecompressed([]byte("keep"), CompressionLZ4, comp[:len(comp)-4], 1<<20)
	wantCorrupt(t, err, "lz4 without end mark")
	if string(got) != "keep" {
		t.Errorf("dst changed on error: %q", got)
	}
	// A huge limit does not overflow.
	for _, c := range allCodecs {
		got, err := AppendDecompressed([]byte("pre"), c, mustCompress(t, c, []byte("data")), math.MaxInt)
		if err != nil || string(got) != "predata" {
			t.Errorf("%s with MaxInt limit: %q, %v", c, got, err)
		}
	}
	// A negative limit behaves as 0.
	if _, err := AppendDecompressed(nil, CompressionGzip, mustCompress(t, CompressionGzip, []byte("x")), -5); err == nil {
		t.Error("negative limit accepted output")
	}
}

func TestDecompressConcurrent(t *testing.T) {
	inputs := make(map[Compression][]byte)
	data := compressibleData(200_000, 77)
	for _, c := range allCodecs {
		inputs[c] = mustCompress(t, c, data)
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var err error
			for i := range 20 {
				c := allCodecs[(g+i)%len(allCodecs)]
				var out []byte
				out, err = AppendDecompressed(nil, c, inputs[c], len(data))
				if err == nil && !bytes.Equal(out, data) {
					err = fmt.Errorf("%s: mismatch", c)
				}
				if err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func FuzzDecompress(f *testing.F) {
	sample := []byte("key-0 value-0 key-1 value-1 key-1 value-1 hello hello hello")
	for _, c := range allCodecs {
		comp, err := AppendCompressed(nil, c, sample)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(c), uint32(1<<16), comp)
		f.Add(uint8(c), uint32(10), comp)
	}
	if bin, err := os.ReadFile("testdata/vectors/v2_gzip.bin"); err == nil && len(bin) > HeaderSize {
		f.Add(uint8(CompressionGzip), uint32(1<<16), bin[HeaderSize:])
	}
	if bin, err := os.ReadFile("testdata/legacy_v1_gzip.bin"); err == nil {
		if m, err := ParseLegacy(bin); err == nil {
			f.Add(uint8(CompressionGzip), uint32(1<<16), m.Value())
		}
	}
	f.Add(uint8(CompressionSnappy), uint32(1<<16), snappy.Encode(nil, sample))
	f.Add(uint8(CompressionLZ4|8), uint32(1<<16), mustCompress(f, CompressionLZ4, sample))
	f.Add(uint8(5), uint32(100), []byte("x"))

	f.Fuzz(func(t *testing.T, codec uint8, limit uint32, data []byte) {
		c := Compression(codec & 7)
		v0 := codec&8 != 0
		lim := int(limit % (4 << 20))
		prefix := []byte("pre")
		out, err := appendDecompressed(append([]byte(nil), prefix...), c, data, lim, v0)
		if !bytes.Equal(out[:len(prefix)], prefix) {
			t.Fatal("prefix clobbered")
		}
		if len(out)-len(prefix) > lim {
			t.Fatalf("%d bytes out, limit %d", len(out)-len(prefix), lim)
		}
		if err != nil {
			var ce *CorruptionError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Pos != 0 {
				t.Fatalf("error %v (%T) is not a position-0 *CorruptionError", err, err)
			}
			if len(out) != len(prefix) {
				t.Fatal("dst grew on error")
			}
			return
		}
		if !c.Valid() {
			t.Fatalf("codec %d accepted", c)
		}
		// What decodes must survive our own round trip.
		plain := out[len(prefix):]
		if len(plain) > 1<<16 {
			return
		}
		comp, err := AppendCompressed(nil, c, plain)
		if err != nil {
			t.Fatal(err)
		}
		again, err := AppendDecompressed(nil, c, comp, len(plain))
		if err != nil || !bytes.Equal(again, plain) {
			t.Fatalf("re-compressed output does not round-trip: %v", err)
		}
	})
}

func benchmarkDecompress(b *testing.B, c Compression, data []byte) {
	comp := mustCompress(b, c, data)
	dst := make([]byte, 0, len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ReportMetric(float64(len(comp))/float64(len(data)), "ratio")
	for b.Loop() {
		out, err := AppendDecompressed(dst[:0], c, comp, len(data))
		if err != nil || len(out) != len(data) {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecompress(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		data := compressibleData(size, 99)
		for _, c := range allCodecs[1:] {
			b.Run(fmt.Sprintf("%s/%dKiB", c, size>>10), func(b *testing.B) {
				benchmarkDecompress(b, c, data)
			})
		}
	}
}

func BenchmarkCompress(b *testing.B) {
	data := compressibleData(1<<20, 98)
	for _, c := range allCodecs[1:] {
		b.Run(c.String(), func(b *testing.B) {
			dst := make([]byte, 0, 2<<20)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := AppendCompressed(dst[:0], c, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGzipOptionalHeaderFields checks a member with header fields the JDK
// does not write (name, comment, extra); readers must not depend on them.
func TestGzipOptionalHeaderFields(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Name, zw.Comment, zw.Extra = "name", "comment", []byte{1, 2, 3, 4}
	zw.Write([]byte("payload"))
	zw.Close()
	got, err := AppendDecompressed(nil, CompressionGzip, buf.Bytes(), 100)
	if err != nil || string(got) != "payload" {
		t.Fatalf("%q, %v", got, err)
	}
}
