package dump

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file is a small interpreter for Kafka's message schemas (the JSON
// files Kafka generates its record classes from): it decodes the bytes of a
// message at a given version into field values and prints them as Kafka's
// generated JSON converters do (fields in schema order, a tagged field only
// when it differs from its default, a field only in the versions that have
// it). The decoders of `dump --offsets-decoder`, `--transaction-log-decoder`
// and `--cluster-metadata-decoder` describe their records with it.
//
// Decoding never panics: every read is bounds-checked, array lengths are
// checked against the bytes left, and nesting is bounded by the schemas.

// kType is the wire type of a schema field.
type kType uint8

const (
	kInt8 kType = iota
	kInt16
	kInt32
	kInt64
	kUint16
	kUint32
	kBool
	kFloat64
	kString
	kBytes
	kUUID
	kArray  // of elem, or of structs when fields is set
	kStruct // a struct field, or the element of a kArray of structs
)

// versions is an inclusive version range; hi < 0 means open-ended ("N+").
// The zero value holds no version.
type versions struct {
	lo, hi int16
	ok     bool
}

func since(v int16) versions        { return versions{lo: v, hi: -1, ok: true} }
func between(lo, hi int16) versions { return versions{lo: lo, hi: hi, ok: true} }

func (r versions) has(v int16) bool {
	return r.ok && v >= r.lo && (r.hi < 0 || v <= r.hi)
}

// kField is one field of a schema.
type kField struct {
	name     string // as the JSON converter names it (lower camel case)
	typ      kType
	elem     kType    // element type of a kArray of primitives
	fields   []kField // fields of a struct, or of the elements of a kArray
	ver      versions
	nullable versions
	tagged   versions // versions in which the field is tagged (never if not)
	tag      uint32
	// def is the default value of a tagged field: an int, bool or
	// float64; nil means 0/false, or null for a nullable string, bytes or
	// array (an empty one when not nullable).
	def any
}

// kSchema is a message (or a struct inside one).
type kSchema struct {
	name     string
	valid    versions
	flexible versions
	fields   []kField
}

// kValue is a decoded field value.
type kValue struct {
	typ    kType
	null   bool
	i      int64
	f      float64
	b      bool
	s      string // string (already made valid UTF-8) or UUID text
	bytes  []byte
	elems  []kValue
	fields []kValue // of a struct; parallel to its kField list
}

// errMessage is the class of every decoding failure.
var errMessage = errors.New("malformed message")

// msgReader reads big-endian Kafka protocol primitives from a byte slice.
type msgReader struct {
	b   []byte
	pos int
	err error
}

func (r *msgReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: byte %d: %s", errMessage, r.pos, fmt.Sprintf(format, args...))
	}
}

func (r *msgReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.fail("%s needs %d bytes, %d left", what, n, len(r.b)-r.pos)
		return nil
	}
	p := r.b[r.pos : r.pos+n]
	r.pos += n
	return p
}

func (r *msgReader) int8() int8 {
	p := r.take(1, "int8")
	if p == nil {
		return 0
	}
	return int8(p[0])
}

func (r *msgReader) int16() int16 {
	p := r.take(2, "int16")
	if p == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(p))
}

func (r *msgReader) int32() int32 {
	p := r.take(4, "int32")
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *msgReader) int64() int64 {
	p := r.take(8, "int64")
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

// uvarint reads an unsigned varint of at most 5 bytes (a uint32).
func (r *msgReader) uvarint() uint32 {
	if r.err != nil {
		return 0
	}
	var v uint32
	for i := 0; i < 5; i++ {
		if r.pos >= len(r.b) {
			r.fail("truncated varint")
			return 0
		}
		c := r.b[r.pos]
		r.pos++
		if i == 4 && c > 0x0f {
			r.fail("varint overflows 32 bits")
			return 0
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v
		}
	}
	r.fail("varint longer than 5 bytes")
	return 0
}

func (r *msgReader) left() int { return len(r.b) - r.pos }

// length reads a length prefix: compact (uvarint n+1, 0 = null) when
// flexible, else int16 (strings) or int32 (bytes, arrays) with -1 = null.
func (r *msgReader) length(flexible, short bool) (n int, null bool) {
	if flexible {
		u := r.uvarint()
		if u == 0 {
			return 0, r.err == nil
		}
		return int(u - 1), false
	}
	var v int
	if short {
		v = int(r.int16())
	} else {
		v = int(r.int32())
	}
	if v < 0 {
		return 0, r.err == nil && v == -1
	}
	return v, false
}

// decodeMessage decodes a message at version v from the start of data.
// As Kafka's generated readers, it reads any version, with the fields
// that version names: callers that refuse unknown versions check
// s.valid. Bytes left after the message are an error when strict.
func decodeMessage(s *kSchema, data []byte, v int16, strict bool) ([]kValue, error) {
	vals, n, err := decodeMessagePrefix(s, data, v)
	if err != nil {
		return nil, err
	}
	if strict && n < len(data) {
		return nil, fmt.Errorf("%w: %d bytes after the end of %s", errMessage, len(data)-n, s.name)
	}
	return vals, nil
}

// decodeMessagePrefix decodes a message at version v from the start of
// data and returns how many bytes it took.
func decodeMessagePrefix(s *kSchema, data []byte, v int16) ([]kValue, int, error) {
	r := &msgReader{b: data}
	vals := r.readFields(s.fields, v, s.flexible.has(v), 0)
	if r.err != nil {
		return nil, 0, r.err
	}
	return vals, r.pos, nil
}

// maxDepth bounds struct nesting (the schemas nest two levels at most).
const maxDepth = 8

// readFields reads a struct: its untagged fields in order, then (when
// flexible) its tagged-field section.
func (r *msgReader) readFields(fields []kField, v int16, flexible bool, depth int) []kValue {
	vals := make([]kValue, len(fields))
	if depth > maxDepth {
		r.fail("nesting deeper than %d", maxDepth)
		return vals
	}
	for i := range fields {
		f := &fields[i]
		vals[i] = f.defaultValue()
		if !f.ver.has(v) || (flexible && f.tagged.has(v)) {
			continue
		}
		vals[i] = r.readValue(f, f.typ, v, flexible, depth)
	}
	if !flexible {
		return vals
	}
	n := r.uvarint()
	for k := uint32(0); k < n && r.err == nil; k++ {
		tag := r.uvarint()
		size := r.uvarint()
		body := r.take(int(size), "tagged field")
		if r.err != nil {
			break
		}
		for i := range fields {
			f := &fields[i]
			if f.tagged.has(v) && f.ver.has(v) && f.tag == tag {
				sub := &msgReader{b: body}
				if f.typ == kStruct && f.nullable.has(v) && sub.uvarint() == 0 {
					// A tagged nullable struct opens with a
					// varint: 0 for null, 1 for present.
					vals[i] = kValue{typ: kStruct, null: true}
					break
				}
				vals[i] = sub.readValue(f, f.typ, v, true, depth)
				if sub.err != nil {
					r.fail("tagged field %s: %v", f.name, sub.err)
				}
				break
			}
		}
	}
	return vals
}

func (r *msgReader) readValue(f *kField, t kType, v int16, flexible bool, depth int) kValue {
	val := kValue{typ: t}
	switch t {
	case kInt8:
		val.i = int64(r.int8())
	case kInt16:
		val.i = int64(r.int16())
	case kInt32:
		val.i = int64(r.int32())
	case kInt64:
		val.i = r.int64()
	case kUint16:
		val.i = int64(uint16(r.int16()))
	case kUint32:
		val.i = int64(uint32(r.int32()))
	case kBool:
		val.b = r.int8() != 0
	case kFloat64:
		val.f = math.Float64frombits(uint64(r.int64()))
	case kUUID:
		p := r.take(16, "uuid")
		if p != nil {
			val.s = base64.RawURLEncoding.EncodeToString(p)
		}
	case kString, kBytes:
		n, null := r.length(flexible, t == kString)
		if null {
			if !f.nullable.has(v) {
				r.fail("non-nullable field %s is null", f.name)
			}
			val.null = true
			return val
		}
		p := r.take(n, f.name)
		if t == kString {
			val.s = javaUTF8(p)
		} else {
			val.bytes = p
		}
	case kArray:
		n, null := r.length(flexible, false)
		if null {
			if !f.nullable.has(v) {
				r.fail("non-nullable field %s is null", f.name)
			}
			val.null = true
			return val
		}
		// Every element takes at least one byte, so a count above the
		// bytes left is malformed (and never allocated).
		if n > r.left() {
			r.fail("array %s of %d elements in %d bytes", f.name, n, r.left())
			return val
		}
		val.elems = make([]kValue, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			if f.fields != nil {
				val.elems = append(val.elems, kValue{typ: kStruct, fields: r.readFields(f.fields, v, flexible, depth+1)})
			} else {
				val.elems = append(val.elems, r.readValue(f, f.elem, v, flexible, depth))
			}
		}
	case kStruct:
		// An untagged nullable struct opens with an int8: negative for
		// null (a tagged one is handled by readFields).
		if f.nullable.has(v) && !f.tagged.has(v) && r.int8() < 0 {
			val.null = true
			return val
		}
		val.fields = r.readFields(f.fields, v, flexible, depth+1)
	default:
		r.fail("field %s has no wire type", f.name)
	}
	return val
}

// defaultValue is the value of a field absent from the bytes.
func (f *kField) defaultValue() kValue {
	val := kValue{typ: f.typ}
	switch d := f.def.(type) {
	case nil:
		switch f.typ {
		case kString, kBytes, kArray:
			val.null = f.nullable.ok
		}
	case int:
		val.i = int64(d)
	case bool:
		val.b = d
	case float64:
		val.f = d
	}
	switch f.typ {
	case kUUID:
		val.s = base64.RawURLEncoding.EncodeToString(make([]byte, 16))
	case kStruct:
		// Kafka's default for a struct is an empty one, null or not.
		val.null = false
		val.fields = make([]kValue, len(f.fields))
		for i := range f.fields {
			val.fields[i] = f.fields[i].defaultValue()
		}
	}
	return val
}

// isDefault reports whether a decoded tagged value equals the field's
// default (the JSON converters omit it then).
func (f *kField) isDefault(val kValue) bool {
	d := f.defaultValue()
	if val.null || d.null {
		return val.null == d.null
	}
	switch f.typ {
	case kString:
		return val.s == ""
	case kBytes:
		return len(val.bytes) == 0
	case kArray:
		return len(val.elems) == 0
	case kBool:
		return val.b == d.b
	case kFloat64:
		return val.f == d.f
	case kUUID:
		return val.s == d.s
	case kStruct:
		for i := range f.fields {
			if i >= len(val.fields) || !f.fields[i].isDefault(val.fields[i]) {
				return false
			}
		}
		return true
	}
	return val.i == d.i
}

// jsonHook may print a field's value in place of the default form (it
// returns false to decline); nil for none.
type jsonHook func(sb *strings.Builder, f *kField, val kValue) bool

// writeJSON appends the fields as a JSON object in Kafka's converter form.
func writeJSON(sb *strings.Builder, fields []kField, vals []kValue, v int16, hook jsonHook) {
	sb.WriteByte('{')
	first := true
	for i := range fields {
		f := &fields[i]
		if !f.ver.has(v) {
			continue
		}
		if f.tagged.has(v) && f.isDefault(vals[i]) {
			continue
		}
		if !first {
			sb.WriteByte(',')
		}
		first = false
		writeJSONString(sb, f.name)
		sb.WriteByte(':')
		writeJSONValue(sb, f, vals[i], v, hook)
	}
	sb.WriteByte('}')
}

func writeJSONValue(sb *strings.Builder, f *kField, val kValue, v int16, hook jsonHook) {
	if hook != nil && hook(sb, f, val) {
		return
	}
	if val.null {
		sb.WriteString("null")
		return
	}
	switch val.typ {
	case kBool:
		sb.WriteString(strconv.FormatBool(val.b))
	case kFloat64:
		sb.WriteString(javaDouble(val.f))
	case kString, kUUID:
		writeJSONString(sb, val.s)
	case kBytes:
		writeJSONString(sb, base64.StdEncoding.EncodeToString(val.bytes))
	case kArray:
		sb.WriteByte('[')
		for i, e := range val.elems {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSONValue(sb, f, e, v, hook)
		}
		sb.WriteByte(']')
	case kStruct:
		writeJSON(sb, f.fields, val.fields, v, hook)
	default:
		sb.WriteString(strconv.FormatInt(val.i, 10))
	}
}

// writeJSONString writes s as a JSON string the way Jackson does: '"',
// '\\' and control characters escaped, everything else as it is.
func writeJSONString(sb *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	sb.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\b':
			sb.WriteString(`\b`)
		case c == '\f':
			sb.WriteString(`\f`)
		case c < 0x20:
			sb.WriteString(`\u00`)
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&0xf])
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('"')
}

// javaDouble formats f as Java's Double.toString does for the values
// quotas hold: plain decimal with at least one fraction digit between 1e-3
// and 1e7, computerized scientific notation ("1.0E7") outside.
func javaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return `"NaN"`
	case math.IsInf(f, 1):
		return `"Infinity"`
	case math.IsInf(f, -1):
		return `"-Infinity"`
	}
	a := math.Abs(f)
	if f == 0 || (a >= 1e-3 && a < 1e7) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, 64)
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}
