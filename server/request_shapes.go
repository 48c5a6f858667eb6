package server

import (
	"errors"
	"fmt"
	"math"
)

// Request shapes: the wire layout of every request the server decodes,
// walked before kmsg decodes the body.
//
// kmsg allocates each array from its declared count before it decodes an
// element (checked only against a per-type minimum element size), so a
// 100 MiB Produce whose topic array claims 50 million entries allocates
// 3.2 GB before it fails, and a valid request of millions of empty
// entries allocates tens of bytes of Go structs per wire byte. The walk
// allocates nothing: it reads every length and count the way kmsg will,
// checks each array count against the bytes left (an element takes at
// least one byte), counts array entries and tagged fields, and refuses
// the request once they pass Config.MaxRequestEntries. What kmsg then
// allocates is bounded by that count, whatever the request's size.
//
// The shapes are transcribed from kmsg's decoders (the versions each
// field exists in; tagged fields are skipped as opaque bytes, which kmsg
// decodes within their declared size). TestRequestShapesMatchKmsg
// encodes random requests of every version kmsg knows and checks that
// the walk consumes exactly their bytes and counts what kmsg decodes.

// wireKind is a field's wire type.
type wireKind uint8

const (
	wInt8   wireKind = iota + 1 // and bool
	wInt16                      //
	wInt32                      //
	wInt64                      //
	wUUID                       //
	wString                     // string or nullable string: int16 length, compact: uvarint length+1
	wBytes                      // bytes or nullable bytes: int32 length, compact: uvarint length+1
	wArray                      // array (nullable or not) of elem or of struct fields: int32 count, compact: uvarint count+1
	wStruct                     // nullable struct: int8 -1 for null, else its fields (and tags when flexible)
)

// versions is the range of versions carrying a field (to < 0: every
// later version).
type versions struct{ from, to int16 }

func (v versions) has(version int16) bool {
	return version >= v.from && (v.to < 0 || version <= v.to)
}

var allVersions = versions{0, -1}

func since(v int16) versions          { return versions{v, -1} }
func between(from, to int16) versions { return versions{from, to} }

// wireField is one field of a request or of an array's struct element.
type wireField struct {
	kind   wireKind
	in     versions
	elem   wireKind    // an array of a primitive
	fields []wireField // an array of structs (each ends with its tagged fields when flexible)
}

func field(k wireKind, in versions) wireField { return wireField{kind: k, in: in} }

// optional is a nullable struct.
func optional(in versions, fields ...wireField) wireField {
	return wireField{kind: wStruct, in: in, fields: fields}
}

// list is an array of a primitive type.
func list(elem wireKind, in versions) wireField { return wireField{kind: wArray, in: in, elem: elem} }

// structs is an array of structs.
func structs(in versions, fields ...wireField) wireField {
	return wireField{kind: wArray, in: in, fields: fields}
}

// requestShape is a request's body: its fields and the first flexible
// version (compact lengths, tagged fields).
type requestShape struct {
	flexibleFrom int16
	fields       []wireField
}

var all = allVersions

// neverFlexible is the flexibleFrom of a request without flexible
// versions.
const neverFlexible = math.MaxInt16

// requestShapes are the bodies of the requests the server and its group
// coordinator answer, at every version kmsg knows.
var requestShapes = map[int16]requestShape{
	0: {9, []wireField{ // Produce
		field(wString, since(3)), // transactional id
		field(wInt16, all),       // acks
		field(wInt32, all),       // timeout
		structs(all,
			field(wString, between(0, 12)), field(wUUID, since(13)),
			structs(all, field(wInt32, all), field(wBytes, all))),
	}},
	1: {12, []wireField{ // Fetch
		field(wInt32, between(0, 14)), // replica id
		field(wInt32, all),            // max wait
		field(wInt32, all),            // min bytes
		field(wInt32, since(3)),       // max bytes
		field(wInt8, since(4)),        // isolation level
		field(wInt32, since(7)),       // session id
		field(wInt32, since(7)),       // session epoch
		structs(all,
			field(wString, between(0, 12)), field(wUUID, since(13)),
			structs(all,
				field(wInt32, all),       // partition
				field(wInt32, since(9)),  // current leader epoch
				field(wInt64, all),       // fetch offset
				field(wInt32, since(12)), // last fetched epoch
				field(wInt64, since(5)),  // log start offset
				field(wInt32, all))),     // partition max bytes
		structs(since(7), // forgotten topics
			field(wString, between(7, 12)), field(wUUID, since(13)),
			list(wInt32, all)),
		field(wString, since(11)), // rack
	}},
	2: {6, []wireField{ // ListOffsets
		field(wInt32, all),     // replica id
		field(wInt8, since(2)), // isolation level
		structs(all,
			field(wString, all),
			structs(all,
				field(wInt32, all),             // partition
				field(wInt32, since(4)),        // current leader epoch
				field(wInt64, all),             // timestamp
				field(wInt32, between(0, 0)))), // max num offsets
		field(wInt32, since(10)), // timeout
	}},
	3: {9, []wireField{ // Metadata
		structs(all, field(wUUID, since(10)), field(wString, all)),
		field(wInt8, since(4)),       // allow auto topic creation
		field(wInt8, between(8, 10)), // include cluster authorized operations
		field(wInt8, since(8)),       // include topic authorized operations
	}},
	8: {8, []wireField{ // OffsetCommit
		field(wString, all),          // group
		field(wInt32, since(1)),      // generation
		field(wString, since(1)),     // member id
		field(wString, since(7)),     // instance id
		field(wInt64, between(2, 4)), // retention
		structs(all,
			field(wString, between(0, 9)), field(wUUID, since(10)),
			structs(all,
				field(wInt32, all), field(wInt64, all),
				field(wInt64, between(1, 1)), // timestamp
				field(wInt32, since(6)),      // leader epoch
				field(wString, all))),        // metadata
	}},
	9: {6, []wireField{ // OffsetFetch
		field(wString, between(0, 7)),
		structs(between(0, 7), field(wString, all), list(wInt32, all)),
		structs(since(8),
			field(wString, all),      // group
			field(wString, since(9)), // member id
			field(wInt32, since(9)),  // member epoch
			structs(all,
				field(wString, between(8, 9)), field(wUUID, since(10)),
				list(wInt32, all))),
		field(wInt8, since(7)), // require stable
	}},
	10: {3, []wireField{ // FindCoordinator
		field(wString, between(0, 3)),
		field(wInt8, since(1)),
		list(wString, since(4)),
	}},
	11: {6, []wireField{ // JoinGroup
		field(wString, all),      // group
		field(wInt32, all),       // session timeout
		field(wInt32, since(1)),  // rebalance timeout
		field(wString, all),      // member id
		field(wString, since(5)), // instance id
		field(wString, all),      // protocol type
		structs(all, field(wString, all), field(wBytes, all)),
		field(wString, since(8)), // reason
	}},
	12: {4, []wireField{ // Heartbeat
		field(wString, all), field(wInt32, all), field(wString, all),
		field(wString, since(3)),
	}},
	13: {4, []wireField{ // LeaveGroup
		field(wString, all),
		field(wString, between(0, 2)),
		structs(since(3), field(wString, all), field(wString, all), field(wString, since(5))),
	}},
	14: {4, []wireField{ // SyncGroup
		field(wString, all), field(wInt32, all), field(wString, all),
		field(wString, since(3)), // instance id
		field(wString, since(5)), // protocol type
		field(wString, since(5)), // protocol
		structs(all, field(wString, all), field(wBytes, all)),
	}},
	15: {5, []wireField{ // DescribeGroups
		list(wString, all),
		field(wInt8, since(3)),
	}},
	16: {3, []wireField{ // ListGroups
		list(wString, since(4)),
		list(wString, since(5)),
	}},
	18: {3, []wireField{ // ApiVersions
		field(wString, since(3)), field(wString, since(3)),
		field(wString, since(5)), field(wInt32, since(5)),
	}},
	19: {5, []wireField{ // CreateTopics
		structs(all,
			field(wString, all), field(wInt32, all), field(wInt16, all),
			structs(all, field(wInt32, all), list(wInt32, all)),
			structs(all, field(wString, all), field(wString, all))),
		field(wInt32, all),     // timeout
		field(wInt8, since(1)), // validate only
	}},
	20: {4, []wireField{ // DeleteTopics
		list(wString, between(0, 5)),
		structs(since(6), field(wString, all), field(wUUID, all)),
		field(wInt32, all),
	}},
	22: {2, []wireField{ // InitProducerId
		field(wString, all), field(wInt32, all),
		field(wInt64, since(3)), field(wInt16, since(3)),
	}},
	23: {4, []wireField{ // OffsetForLeaderEpoch
		field(wInt32, since(3)),
		structs(all,
			field(wString, all),
			structs(all, field(wInt32, all), field(wInt32, since(2)), field(wInt32, all))),
	}},
	24: {3, []wireField{ // AddPartitionsToTxn
		field(wString, between(0, 3)), field(wInt64, between(0, 3)), field(wInt16, between(0, 3)),
		structs(between(0, 3), field(wString, all), list(wInt32, all)),
		structs(since(4),
			field(wString, all), field(wInt64, all), field(wInt16, all), field(wInt8, all),
			structs(all, field(wString, all), list(wInt32, all))),
	}},
	25: {3, []wireField{ // AddOffsetsToTxn
		field(wString, all), field(wInt64, all), field(wInt16, all), field(wString, all),
	}},
	26: {3, []wireField{ // EndTxn
		field(wString, all), field(wInt64, all), field(wInt16, all), field(wInt8, all),
	}},
	27: {1, []wireField{ // WriteTxnMarkers
		structs(all, field(wInt64, all), field(wInt16, all), field(wInt8, all),
			structs(all, field(wString, all), list(wInt32, all)),
			field(wInt32, all), field(wInt8, since(2))),
	}},
	28: {3, []wireField{ // TxnOffsetCommit
		field(wString, all), field(wString, all), field(wInt64, all), field(wInt16, all),
		field(wInt32, since(3)), field(wString, since(3)), field(wString, since(3)),
		structs(all,
			field(wString, between(0, 5)), field(wUUID, since(6)),
			structs(all, field(wInt32, all), field(wInt64, all), field(wInt32, since(2)), field(wString, all))),
	}},
	32: {4, []wireField{ // DescribeConfigs
		structs(all, field(wInt8, all), field(wString, all), list(wString, all)),
		field(wInt8, since(1)),
		field(wInt8, since(3)),
	}},
	21: {2, []wireField{ // DeleteRecords
		structs(all, field(wString, all), structs(all, field(wInt32, all), field(wInt64, all))),
		field(wInt32, all), // timeout
	}},
	35: {2, []wireField{ // DescribeLogDirs
		structs(all, field(wString, all), list(wInt32, all)),
	}},
	60: {0, []wireField{ // DescribeCluster
		field(wInt8, all), field(wInt8, since(1)), field(wInt8, since(2)),
	}},
	61: {0, []wireField{ // DescribeProducers
		structs(all, field(wString, all), list(wInt32, all)),
	}},
	75: {0, []wireField{ // DescribeTopicPartitions
		structs(all, field(wString, all)),
		field(wInt32, all),
		optional(all, field(wString, all), field(wInt32, all)), // cursor
	}},
	65: {0, []wireField{ // DescribeTransactions
		list(wString, all),
	}},
	66: {0, []wireField{ // ListTransactions
		list(wString, all), list(wInt64, all), field(wInt64, since(1)), field(wString, since(2)),
	}},
	33: {2, []wireField{ // AlterConfigs
		structs(all, field(wInt8, all), field(wString, all),
			structs(all, field(wString, all), field(wString, all))),
		field(wInt8, all), // validate only
	}},
	44: {1, []wireField{ // IncrementalAlterConfigs
		structs(all, field(wInt8, all), field(wString, all),
			structs(all, field(wString, all), field(wInt8, all), field(wString, all))),
		field(wInt8, all), // validate only
	}},
	68: {0, []wireField{ // ConsumerGroupHeartbeat
		field(wString, all), field(wString, all), field(wInt32, all), // group, member, epoch
		field(wString, all), field(wString, all), field(wInt32, all), // instance, rack, rebalance timeout
		list(wString, all), field(wString, since(1)), field(wString, all), // topics, regex, assignor
		structs(all, field(wUUID, all), list(wInt32, all)), // owned partitions
	}},
	69: {0, []wireField{ // ConsumerGroupDescribe
		list(wString, all), field(wInt8, all),
	}},
	42: {2, []wireField{ // DeleteGroups
		list(wString, all),
	}},
	47: {neverFlexible, []wireField{ // OffsetDelete
		field(wString, all),
		structs(all, field(wString, all), structs(all, field(wInt32, all))),
	}},
	37: {2, []wireField{ // CreatePartitions
		structs(all,
			field(wString, all), field(wInt32, all),
			structs(all, list(wInt32, all))),
		field(wInt32, all),
		field(wInt8, all),
	}},
}

// errTooManyEntries: a request holds more array entries and tagged
// fields than Config.MaxRequestEntries.
var errTooManyEntries = errors.New("partlog/server: request holds too many entries")

// shapeWalk reads a request body as kmsg will decode it, allocating
// nothing.
type shapeWalk struct {
	b        []byte
	version  int16
	flexible bool
	left     int // entries still allowed
	entries  int
	err      error
	// mark, if set (the hostile-frame generator), is called with the
	// position in the body of every length and count about to be read
	// (total: the body's length), and the kind it prefixes (wArray for
	// a tagged-field section too).
	mark  func(at int, k wireKind)
	total int
}

// checkRequestShape walks body, a request of key at version, and returns
// the number of array entries and tagged fields it holds. It fails when
// the body does not have the request's shape (a count or length past the
// bytes present, or bytes left over are not its concern: kmsg ignores
// trailing bytes) or holds more than maxEntries entries. ok is false when
// the server knows no shape for key.
func checkRequestShape(key, version int16, body []byte, maxEntries int) (entries int, ok bool, err error) {
	shape, ok := requestShapes[key]
	if !ok {
		return 0, false, nil
	}
	w := shapeWalk{b: body, version: version, flexible: version >= shape.flexibleFrom, left: maxEntries}
	w.structFields(shape.fields)
	return w.entries, true, w.err
}

func (w *shapeWalk) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
	}
	w.b = nil
}

func (w *shapeWalk) take(n int) {
	if n < 0 || n > len(w.b) {
		w.fail("%d bytes wanted, %d left", n, len(w.b))
		return
	}
	w.b = w.b[n:]
}

// count adds n entries against the budget.
func (w *shapeWalk) count(n int) {
	if w.err != nil {
		return
	}
	if n > w.left {
		w.err = fmt.Errorf("%w (more than %d array entries and tagged fields)", errTooManyEntries, w.entries+w.left)
		w.b = nil
		return
	}
	w.left -= n
	w.entries += n
}

// uvarint reads a 32-bit unsigned varint as kmsg does (at most five
// bytes, no overflow).
func (w *shapeWalk) uvarint() uint32 {
	var x uint32
	for i := 0; i < 5; i++ {
		if i >= len(w.b) {
			w.fail("truncated varint")
			return 0
		}
		c := w.b[i]
		if i == 4 && c > 0x0f {
			w.fail("varint overflows 32 bits")
			return 0
		}
		x |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			w.b = w.b[i+1:]
			return x
		}
	}
	w.fail("varint longer than 5 bytes")
	return 0
}

func (w *shapeWalk) int16() int16 {
	if len(w.b) < 2 {
		w.fail("truncated int16")
		return 0
	}
	v := int16(uint16(w.b[0])<<8 | uint16(w.b[1]))
	w.b = w.b[2:]
	return v
}

func (w *shapeWalk) int32() int32 {
	if len(w.b) < 4 {
		w.fail("truncated int32")
		return 0
	}
	v := int32(uint32(w.b[0])<<24 | uint32(w.b[1])<<16 | uint32(w.b[2])<<8 | uint32(w.b[3]))
	w.b = w.b[4:]
	return v
}

// length reads a string's or bytes' length (negative: null).
func (w *shapeWalk) length(k wireKind) int {
	switch {
	case w.flexible:
		return int(w.uvarint()) - 1
	case k == wString:
		return int(w.int16())
	default:
		return int(w.int32())
	}
}

// arrayCount reads an array's count as kmsg does (negative: null).
func (w *shapeWalk) arrayCount() int {
	if w.flexible {
		return int(int32(w.uvarint()) - 1)
	}
	return int(w.int32())
}

func (w *shapeWalk) structFields(fields []wireField) {
	for i := range fields {
		if w.err != nil {
			return
		}
		f := &fields[i]
		if f.in.has(w.version) {
			w.value(f.kind, f)
		}
	}
	if w.flexible {
		w.tags()
	}
}

func (w *shapeWalk) value(k wireKind, f *wireField) {
	switch k {
	case wInt8:
		w.take(1)
	case wInt16:
		w.take(2)
	case wInt32:
		w.take(4)
	case wInt64:
		w.take(8)
	case wUUID:
		w.take(16)
	case wString, wBytes:
		if w.mark != nil {
			w.mark(w.total-len(w.b), k)
		}
		if n := w.length(k); n > 0 {
			w.take(n)
		}
	case wStruct:
		if len(w.b) < 1 {
			w.fail("nullable struct past the end")
			return
		}
		present := int8(w.b[0]) >= 0
		w.take(1)
		if present {
			w.structFields(f.fields)
		}
	case wArray:
		if w.mark != nil {
			w.mark(w.total-len(w.b), k)
		}
		n := w.arrayCount()
		if n <= 0 || w.err != nil {
			return
		}
		// Decode against the bytes present: every element takes a byte
		// at least, so a count above what is left is a lie (kmsg would
		// allocate it before finding out).
		if n > len(w.b) {
			w.fail("array of %d entries in %d bytes", n, len(w.b))
			return
		}
		w.count(n)
		for i := 0; i < n && w.err == nil; i++ {
			if f.fields != nil {
				w.structFields(f.fields)
			} else {
				w.value(f.elem, nil)
			}
		}
	}
}

// tags skips a tagged-field section, counting its fields.
func (w *shapeWalk) tags() {
	if w.mark != nil {
		w.mark(w.total-len(w.b), wArray)
	}
	n := int(w.uvarint())
	if w.err != nil || n == 0 {
		return
	}
	if n > len(w.b)/2 { // a key and a size, a byte each at least
		w.fail("%d tagged fields in %d bytes", n, len(w.b))
		return
	}
	w.count(n)
	for i := 0; i < n && w.err == nil; i++ {
		w.uvarint() // key
		size := int(w.uvarint())
		if w.err == nil {
			w.take(size)
		}
	}
}
