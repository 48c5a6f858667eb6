package batch

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// legacyVector mirrors testdata/legacy_*.json.
type legacyVector struct {
	Name      string `json:"name"`
	File      string `json:"file"`
	Kind      string `json:"kind"`
	SizeBytes int    `json:"size_bytes"`
	Legacy    struct {
		Offset        int64   `json:"offset"`
		MessageSize   int     `json:"message_size"`
		CRC           uint32  `json:"crc"`
		Magic         int8    `json:"magic"`
		Attributes    int8    `json:"attributes"`
		Compression   string  `json:"compression"`
		TimestampType string  `json:"timestamp_type"`
		Timestamp     int64   `json:"timestamp"`
		KeyHex        *string `json:"key_hex"`
		ValueHex      *string `json:"value_hex"`
		InnerMessages []struct {
			Offset     int64   `json:"offset"`
			Magic      int8    `json:"magic"`
			Attributes int8    `json:"attributes"`
			Timestamp  int64   `json:"timestamp"`
			CRC        uint32  `json:"crc"`
			KeyHex     *string `json:"key_hex"`
			ValueHex   *string `json:"value_hex"`
		} `json:"inner_messages"`
	} `json:"legacy"`
	ExpectedDumpLines []string `json:"expected_dump_lines"`
}

// legacyHex decodes an optional hex string of a vector (nil = null).
func legacyHex(t *testing.T, s *string) []byte {
	t.Helper()
	if s == nil {
		return nil
	}
	b, err := hex.DecodeString(*s)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{}, b...)
}

func sameNullable(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// legacyDumpLines renders what kafka-dump-log --deep-iteration
// --print-data-log prints for a legacy entry at position 0 (§7.2).
func legacyDumpLines(t *testing.T, m LegacyMessage) []string {
	t.Helper()
	lines := []string{fmt.Sprintf("offset: %d position: 0 %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t",
		m.Offset(), m.TimestampType(), m.Timestamp(), m.Size(), m.Magic(), m.Compression(), m.CRC(), m.Valid())}
	inner, err := m.AppendInner(nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inner {
		r := in.Message
		line := fmt.Sprintf("| offset: %d %s: %d keySize: %d valueSize: %d isValid: %t crc: %d}",
			in.Offset, m.TimestampType(), in.Timestamp, r.KeySize(), r.ValueSize(), r.Valid(), r.CRC())
		if k := r.Key(); k != nil {
			line += " key: " + string(k)
		}
		if v := r.Value(); v != nil {
			line += " payload: " + string(v)
		}
		lines = append(lines, line)
	}
	return lines
}

func TestLegacyVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/legacy_*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("found %d legacy vectors, want 3", len(files))
	}
	for _, jf := range files {
		t.Run(filepath.Base(jf), func(t *testing.T) {
			js, err := os.ReadFile(jf)
			if err != nil {
				t.Fatal(err)
			}
			var v legacyVector
			if err := json.Unmarshal(js, &v); err != nil {
				t.Fatal(err)
			}
			bin, err := os.ReadFile(filepath.Join("testdata", v.File))
			if err != nil {
				t.Fatal(err)
			}
			want := v.Legacy
			m, err := ParseLegacy(bin)
			if err != nil {
				t.Fatal(err)
			}
			if len(m) != v.SizeBytes || m.Size() != v.SizeBytes || m.Size() != LogOverhead+want.MessageSize {
				t.Errorf("size %d (len %d), want %d", m.Size(), len(m), v.SizeBytes)
			}
			if m.Offset() != want.Offset {
				t.Errorf("offset %d, want %d", m.Offset(), want.Offset)
			}
			if m.CRC() != want.CRC || m.ComputeCRC() != want.CRC || !m.Valid() {
				t.Errorf("crc stored %d computed %d valid %t, want %d", m.CRC(), m.ComputeCRC(), m.Valid(), want.CRC)
			}
			if m.Magic() != want.Magic || m.Attributes() != want.Attributes {
				t.Errorf("magic %d attributes %d, want %d %d", m.Magic(), m.Attributes(), want.Magic, want.Attributes)
			}
			if m.Compression().String() != want.Compression {
				t.Errorf("compression %s, want %s", m.Compression(), want.Compression)
			}
			if m.TimestampType().String() != want.TimestampType || m.Timestamp() != want.Timestamp {
				t.Errorf("timestamp %s %d, want %s %d", m.TimestampType(), m.Timestamp(), want.TimestampType, want.Timestamp)
			}
			key, value := legacyHex(t, want.KeyHex), legacyHex(t, want.ValueHex)
			if !sameNullable(m.Key(), key) || !sameNullable(m.Value(), value) {
				t.Errorf("key %x value %x, want %x %x", m.Key(), m.Value(), key, value)
			}
			if m.KeySize() != int32(len(key)) && !(key == nil && m.KeySize() == -1) {
				t.Errorf("key size %d", m.KeySize())
			}
			if m.ValueSize() != int32(len(value)) && !(value == nil && m.ValueSize() == -1) {
				t.Errorf("value size %d", m.ValueSize())
			}

			inner, err := m.AppendInner(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if m.Compression() == CompressionNone {
				if len(inner) != 1 || inner[0].Offset != m.Offset() || inner[0].Timestamp != m.Timestamp() || !bytes.Equal(inner[0].Message, m) {
					t.Errorf("uncompressed message gives %+v", inner)
				}
			} else {
				if len(inner) != len(want.InnerMessages) {
					t.Fatalf("%d inner messages, want %d", len(inner), len(want.InnerMessages))
				}
				for i, w := range want.InnerMessages {
					in := inner[i]
					r := in.Message
					if in.Offset != w.Offset || r.Magic() != w.Magic || r.Attributes() != w.Attributes ||
						in.Timestamp != w.Timestamp || r.CRC() != w.CRC || !r.Valid() {
						t.Errorf("inner %d: offset %d magic %d attrs %d ts %d crc %d valid %t, want %+v",
							i, in.Offset, r.Magic(), r.Attributes(), in.Timestamp, r.CRC(), r.Valid(), w)
					}
					if !sameNullable(r.Key(), legacyHex(t, w.KeyHex)) || !sameNullable(r.Value(), legacyHex(t, w.ValueHex)) {
						t.Errorf("inner %d: key %x value %x", i, r.Key(), r.Value())
					}
				}
			}

			if got := legacyDumpLines(t, m); strings.Join(got, "\n") != strings.Join(v.ExpectedDumpLines, "\n") {
				t.Errorf("dump lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(v.ExpectedDumpLines, "\n"))
			}

			// Trailing bytes after the entry are not part of it.
			m2, err := ParseLegacy(append(append([]byte(nil), bin...), 1, 2, 3))
			if err != nil || !bytes.Equal(m2, bin) {
				t.Errorf("with trailing bytes: %d bytes, %v", len(m2), err)
			}
		})
	}
}

// buildLegacy encodes one legacy entry with a correct CRC; nil key or
// value are null.
func buildLegacy(offset int64, magic, attrs int8, ts int64, key, value []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(offset))
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, byte(magic), byte(attrs))
	if magic == 1 {
		b = binary.BigEndian.AppendUint64(b, uint64(ts))
	}
	for _, f := range [][]byte{key, value} {
		if f == nil {
			b = binary.BigEndian.AppendUint32(b, 0xffffffff)
		} else {
			b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[12:], ChecksumIEEE(b[16:]))
	return b
}

// buildWrapper compresses the concatenated inner entries into a wrapper.
func buildWrapper(t testing.TB, offset int64, magic, attrs int8, ts int64, c Compression, inner ...[]byte) []byte {
	t.Helper()
	set := bytes.Join(inner, nil)
	value, err := AppendCompressed(nil, c, set)
	if err != nil {
		t.Fatal(err)
	}
	return buildLegacy(offset, magic, attrs|int8(c), ts, nil, value)
}

func TestLegacyWrappers(t *testing.T) {
	const t0 = 1700000000000
	inner1 := [][]byte{
		buildLegacy(0, 1, 0, t0, []byte("k0"), []byte("v0")),
		buildLegacy(1, 1, 0, t0+5, nil, []byte("v1")),
		buildLegacy(2, 1, 0, t0+2, []byte("k2"), nil),
	}
	for _, c := range []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4} {
		t.Run("v1/"+c.String(), func(t *testing.T) {
			m, err := ParseLegacy(buildWrapper(t, 100, 1, 0, t0+5, c, inner1...))
			if err != nil {
				t.Fatal(err)
			}
			prefix := []LegacyInner{{Offset: -7}}
			got, err := m.AppendInner(prefix, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if got[0].Offset != -7 {
				t.Fatal("prefix clobbered")
			}
			got = got[1:]
			if len(got) != 3 {
				t.Fatalf("%d inner messages", len(got))
			}
			for i, in := range got {
				if in.Offset != int64(98+i) {
					t.Errorf("inner %d offset %d, want %d", i, in.Offset, 98+i)
				}
				if in.Message.Offset() != int64(i) {
					t.Errorf("inner %d stored offset %d", i, in.Message.Offset())
				}
				if !bytes.Equal(in.Message, inner1[i]) || !in.Message.Valid() {
					t.Errorf("inner %d bytes differ", i)
				}
			}
			if got[1].Timestamp != t0+5 || got[2].Timestamp != t0+2 {
				t.Errorf("CreateTime timestamps %d %d", got[1].Timestamp, got[2].Timestamp)
			}

			// LogAppendTime: every inner message reports the wrapper's time.
			m, _ = ParseLegacy(buildWrapper(t, 100, 1, AttrTimestampType, t0+99, c, inner1...))
			got, err = m.AppendInner(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range got {
				if in.Timestamp != t0+99 {
					t.Errorf("LogAppendTime inner %d timestamp %d", i, in.Timestamp)
				}
			}

			// Wrapper offset 0: base 0.
			m, _ = ParseLegacy(buildWrapper(t, 0, 1, 0, t0, c, inner1...))
			if got, err = m.AppendInner(nil, 1<<20); err != nil || got[0].Offset != 0 || got[2].Offset != 2 {
				t.Errorf("wrapper offset 0: %+v, %v", got, err)
			}
			// Wrapper offset below the last relative offset.
			m, _ = ParseLegacy(buildWrapper(t, 1, 1, 0, t0, c, inner1...))
			if got, err := m.AppendInner(prefix, 1<<20); err == nil || len(got) != 1 {
				t.Errorf("wrapper offset 1 < 2 accepted: %d, %v", len(got), err)
			} else {
				wantCorrupt(t, err, "wrapper offset below last inner")
			}
			// Limit on the decompressed set.
			m, _ = ParseLegacy(buildWrapper(t, 100, 1, 0, t0, c, inner1...))
			setLen := len(bytes.Join(inner1, nil))
			if _, err := m.AppendInner(nil, setLen); err != nil {
				t.Errorf("limit equal to the set: %v", err)
			}
			_, err = m.AppendInner(nil, setLen-1)
			if ce := wantCorrupt(t, err, "limit below the set"); !errors.Is(ce, errLimit) {
				t.Errorf("not a limit error: %v", err)
			}
		})
	}

	inner0 := [][]byte{
		buildLegacy(50, 0, 0, 0, []byte("a"), []byte("x")),
		buildLegacy(51, 0, 0, 0, []byte("b"), []byte("y")),
	}
	for _, c := range []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4} {
		t.Run("v0/"+c.String(), func(t *testing.T) {
			m, err := ParseLegacy(buildWrapper(t, 51, 0, 0, 0, c, inner0...))
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.AppendInner(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Offset != 50 || got[1].Offset != 51 || got[0].Timestamp != -1 || got[1].Timestamp != -1 {
				t.Errorf("v0 inner %+v", got)
			}
		})
	}

	t.Run("v0 lz4 broken header checksum", func(t *testing.T) {
		value := mustCompress(t, CompressionLZ4, bytes.Join(inner0, nil))
		broken := byte(xxh32(value[:6]) >> 8)
		if broken == value[6] {
			t.Fatal("broken and correct checksums coincide")
		}
		value[6] = broken
		m, err := ParseLegacy(buildLegacy(51, 0, int8(CompressionLZ4), 0, nil, value))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := m.AppendInner(nil, 1<<20); err != nil || len(got) != 2 {
			t.Errorf("v0: %d, %v", len(got), err)
		}
		m, _ = ParseLegacy(buildLegacy(51, 1, int8(CompressionLZ4), t0, nil, value))
		_, err = m.AppendInner(nil, 1<<20)
		wantCorrupt(t, err, "v1 wrapper with the magic-0 header checksum")
	})
}

func TestLegacyWrapperErrors(t *testing.T) {
	const t0 = 1700000000000
	plain := buildLegacy(0, 1, 0, t0, nil, []byte("v"))
	nested := buildWrapper(t, 0, 1, 0, t0, CompressionGzip, plain)
	gz := func(b []byte) []byte { return mustCompress(t, CompressionGzip, b) }
	magic2 := append([]byte(nil), plain...)
	magic2[legacyOffMagic] = 2
	cases := map[string][]byte{
		"empty inner set":   buildWrapper(t, 5, 1, 0, t0, CompressionGzip),
		"null value":        buildLegacy(5, 1, int8(CompressionGzip), t0, nil, nil),
		"zstd wrapper":      buildWrapper(t, 0, 1, 0, t0, CompressionZstd, plain),
		"codec 5":           buildLegacy(0, 1, 5, t0, nil, gz(plain)),
		"nested":            buildWrapper(t, 0, 1, 0, t0, CompressionGzip, nested),
		"garbage value":     buildLegacy(0, 1, int8(CompressionGzip), t0, nil, []byte("not gzip")),
		"truncated inner":   buildLegacy(0, 1, int8(CompressionGzip), t0, nil, gz(plain[:len(plain)-1])),
		"trailing bytes":    buildLegacy(0, 1, int8(CompressionGzip), t0, nil, gz(append(append([]byte(nil), plain...), 0, 0))),
		"inner magic 2":     buildLegacy(0, 1, int8(CompressionGzip), t0, nil, gz(magic2)),
		"v0 zstd wrapper":   buildWrapper(t, 0, 0, 0, 0, CompressionZstd, buildLegacy(0, 0, 0, 0, nil, nil)),
		"empty lz4 wrapper": buildWrapper(t, 0, 0, 0, 0, CompressionLZ4),
	}
	for name, b := range cases {
		m, err := ParseLegacy(b)
		if err != nil {
			t.Fatalf("%s: ParseLegacy: %v", name, err)
		}
		prefix := []LegacyInner{{Offset: 1}}
		got, err := m.AppendInner(prefix, 1<<20)
		wantCorrupt(t, err, name)
		if len(got) != 1 {
			t.Errorf("%s: dst grew to %d on error", name, len(got))
		}
	}
}

func TestParseLegacyRejects(t *testing.T) {
	v0 := buildLegacy(0, 0, 0, 0, []byte("k"), []byte("value"))
	v1 := buildLegacy(0, 1, 0, 1, nil, nil)
	set := func(b []byte, off int, v uint32) []byte {
		b = append([]byte(nil), b...)
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	cases := map[string][]byte{
		"empty":            nil,
		"11 bytes":         v0[:11],
		"size 13":          set(v0, 8, 13),
		"negative size":    set(v0, 8, 0xfffffff0),
		"truncated":        v0[:len(v0)-1],
		"v1 size 21":       append(set(v1, 8, 21), 0),
		"magic 2":          func() []byte { b := append([]byte(nil), v0...); b[16] = 2; return b }(),
		"magic -1":         func() []byte { b := append([]byte(nil), v0...); b[16] = 0xff; return b }(),
		"key length -2":    set(v0, 18, 0xfffffffe),
		"key past end":     set(v0, 18, 100),
		"huge key":         set(v0, 18, 0x7fffffff),
		"value past end":   set(v0, 23, 6),
		"value length -2":  set(v0, 23, 0xfffffffe),
		"bytes after":      set(v0, 23, 4),
		"v1 key -5":        set(v1, 26, 0xfffffffb),
		"v1 null but size": set(set(v1, 8, 23), 0, 0),
	}
	for name, b := range cases {
		m, err := ParseLegacy(b)
		wantCorrupt(t, err, name)
		if m != nil {
			t.Errorf("%s: returned %d bytes with the error", name, len(m))
		}
	}
	for name, b := range map[string][]byte{"v0": v0, "v1": v1} {
		if _, err := ParseLegacy(b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLegacyAccessors(t *testing.T) {
	m, err := ParseLegacy(buildLegacy(42, 1, AttrTimestampType, 777, []byte{}, []byte("v")))
	if err != nil {
		t.Fatal(err)
	}
	if m.Key() == nil || len(m.Key()) != 0 || m.KeySize() != 0 {
		t.Errorf("empty key reported as %v (size %d)", m.Key(), m.KeySize())
	}
	if m.TimestampType() != LogAppendTime || m.Timestamp() != 777 || m.Offset() != 42 {
		t.Errorf("got %s %d offset %d", m.TimestampType(), m.Timestamp(), m.Offset())
	}
	// Appending to an accessor's result must not overwrite the entry.
	mk, err := ParseLegacy(buildLegacy(1, 0, 0, 0, []byte("kk"), []byte("v")))
	if err != nil {
		t.Fatal(err)
	}
	_ = append(mk.Key(), 'X', 'X', 'X', 'X')
	if mk.ValueSize() != 1 || string(mk.Value()) != "v" || !mk.Valid() {
		t.Errorf("value clobbered: %q", mk.Value())
	}
	// A CRC mismatch is not a parse error.
	b := append([]byte(nil), m...)
	b[len(b)-1] ^= 1
	bad, err := ParseLegacy(b)
	if err != nil {
		t.Fatal(err)
	}
	if bad.Valid() || bad.CRC() == bad.ComputeCRC() {
		t.Error("corrupted message reported valid")
	}
	// Magic 0 ignores the timestamp-type bit.
	m0, err := ParseLegacy(buildLegacy(1, 0, AttrTimestampType, 0, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if m0.TimestampType() != NoTimestampType || m0.Timestamp() != NoTimestamp || m0.Key() != nil || m0.Value() != nil ||
		m0.KeySize() != -1 || m0.ValueSize() != -1 || m0.Size() != 26 || !m0.Valid() {
		t.Errorf("magic 0 null message: %s %d size %d", m0.TimestampType(), m0.Timestamp(), m0.Size())
	}
}

func FuzzLegacy(f *testing.F) {
	files, _ := filepath.Glob("testdata/legacy_*.bin")
	for _, fn := range files {
		if b, err := os.ReadFile(fn); err == nil {
			f.Add(b)
		}
	}
	const t0 = 1700000000000
	inner := buildLegacy(0, 1, 0, t0, []byte("k"), []byte("v"))
	inner0 := buildLegacy(7, 0, 0, 0, nil, []byte("v"))
	f.Add(buildWrapper(f, 3, 1, 0, t0, CompressionSnappy, inner, inner))
	f.Add(buildWrapper(f, 3, 1, AttrTimestampType, t0, CompressionLZ4, inner))
	f.Add(buildWrapper(f, 7, 0, 0, 0, CompressionLZ4, inner0))
	f.Add(buildWrapper(f, 7, 0, 0, 0, CompressionGzip, inner0))
	f.Add(buildLegacy(0, 0, 0, 0, nil, nil))

	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseLegacy(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || m != nil {
				t.Fatalf("bad failure: %v, %d bytes", err, len(m))
			}
			return
		}
		checkLegacyReparse(t, m)
		inner, err := m.AppendInner(nil, 1<<20)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || len(inner) != 0 {
				t.Fatalf("bad AppendInner failure: %v", err)
			}
			return
		}
		if len(inner) == 0 {
			t.Fatal("no messages and no error")
		}
		for _, in := range inner {
			if in.Message.Compression() != CompressionNone {
				t.Fatal("compressed inner message accepted")
			}
			checkLegacyReparse(t, in.Message)
		}
	})
}

// checkLegacyReparse parses a copy of m and compares every accessor.
func checkLegacyReparse(t *testing.T, m LegacyMessage) {
	t.Helper()
	if m.Size() != len(m) {
		t.Fatalf("Size %d, length %d", m.Size(), len(m))
	}
	c, err := ParseLegacy(append([]byte(nil), m...))
	if err != nil {
		t.Fatalf("re-parse: %v", err)
	}
	same := bytes.Equal(c, m) && c.Offset() == m.Offset() && c.CRC() == m.CRC() &&
		c.ComputeCRC() == m.ComputeCRC() && c.Valid() == m.Valid() && c.Magic() == m.Magic() &&
		c.Attributes() == m.Attributes() && c.Compression() == m.Compression() &&
		c.TimestampType() == m.TimestampType() && c.Timestamp() == m.Timestamp() &&
		c.KeySize() == m.KeySize() && c.ValueSize() == m.ValueSize() &&
		sameNullable(c.Key(), m.Key()) && sameNullable(c.Value(), m.Value())
	if !same {
		t.Fatal("re-parsed message differs")
	}
	if int(max(m.KeySize(), 0))+int(max(m.ValueSize(), 0)) > len(m) {
		t.Fatal("key and value larger than the entry")
	}
}
