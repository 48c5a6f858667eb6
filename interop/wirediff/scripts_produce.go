package wirediff

import (
	"encoding/binary"

	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// put16, put32 and put64 patch a built batch at a header offset.
func put16(off int, v int16) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], uint16(v)); return b }
}
func put32(off int, v int32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return b }
}
func put64(off int, v int64) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], uint64(v)); return b }
}
func put8(off int, v byte) func([]byte) []byte {
	return func(b []byte) []byte { b[off] = v; return b }
}

// cut drops the last n bytes (the length field still counts them).
func cut(n int) func([]byte) []byte { return func(b []byte) []byte { return b[:len(b)-n] } }

// recordByte patches byte i of the records section (after the header).
func recordByte(i int, v byte) func([]byte) []byte {
	return func(b []byte) []byte { b[batch.HeaderSize+i] = v; return b }
}

func latest(name, topic string) Step { return list(name, listV, 0, topic, 0, -1) }

// pv is a produce of one partition at a version and acks.
func pv(name string, version, acks int16, topic string, bs ...Batch) Step {
	return Step{Name: name, Req: Produce{Version: version, Acks: acks, Parts: []PP{{Topic: topic, Partition: 0, Batches: bs}}}.Req}
}

func raw(name, topic string, f func(e *Env) []byte) Step {
	return Step{Name: name, Req: Produce{Version: produceV, Acks: -1, Parts: []PP{{Topic: topic, Partition: 0, Raw: f}}}.Req}
}

// ProduceScripts are the produce request's validation: what a leader
// accepts, refuses (and with which error), and what it stores.
func ProduceScripts() []*Script {
	const t = "pv"
	type pcase struct {
		name    string
		version int16
		acks    int16
		b       []Batch
		raw     func(*Env) []byte
		allowed string // AllowedDifferences: partlog refuses (INVALID_RECORD)
	}
	cs := []pcase{
		{name: "good batch", b: []Batch{{N: 2}}},
		{name: "bad CRC", b: []Batch{{N: 2, Bytes: put32(batch.OffCRC, 1)}}},
		{name: "magic 1", b: []Batch{{N: 2, Bytes: put8(batch.OffMagic, 1), Fix: true}}},
		{name: "magic 3", b: []Batch{{N: 2, Bytes: put8(batch.OffMagic, 3), Fix: true}}},
		{name: "base offset 5", b: []Batch{{N: 2, Bytes: put64(batch.OffBaseOffset, 5), Fix: true}}},
		{name: "record count 3 of 2 records", b: []Batch{{N: 2, Bytes: put32(batch.OffRecordsCount, 3), Fix: true}}},
		{name: "record count 1 of 2 records", b: []Batch{{N: 2, Bytes: put32(batch.OffRecordsCount, 1), Fix: true}}},
		{name: "record count 0", b: []Batch{{N: 2, Bytes: put32(batch.OffRecordsCount, 0), Fix: true}}},
		{name: "last offset delta 2 of 2 records", b: []Batch{{N: 2, Bytes: put32(batch.OffLastOffsetDelta, 2), Fix: true}}},
		{name: "last offset delta -1", b: []Batch{{N: 2, Bytes: put32(batch.OffLastOffsetDelta, -1), Fix: true}}},
		{name: "control batch", b: []Batch{{N: 1, Spec: func(s *batch.BatchSpec) { s.Control = true }}}},
		{name: "idempotent without a sequence", b: []Batch{{N: 1, PID: Int64(1000), Epoch: Int16(0), Spec: func(s *batch.BatchSpec) { s.BaseSequence = -1 }}}},
		{name: "unknown compression 5", b: []Batch{{N: 2, Bytes: put16(batch.OffAttributes, 5), Fix: true}}, allowed: "invalid-record-not-unknown"},
		{name: "LogAppendTime from the producer", b: []Batch{{N: 2, Bytes: put16(batch.OffAttributes, 8), Fix: true}}},
		{name: "max timestamp below the records'", b: []Batch{{N: 3, Bytes: put64(batch.OffMaxTimestamp, 5), Fix: true}}},
		{name: "max timestamp above the records'", b: []Batch{{N: 3, TsDelta: -5000, Bytes: func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[batch.OffMaxTimestamp:], binary.BigEndian.Uint64(b[batch.OffBaseTimestamp:])+4000)
			return b
		}, Fix: true}}},
		{name: "max timestamp -1", b: []Batch{{N: 2, Bytes: put64(batch.OffMaxTimestamp, -1), Fix: true}}},
		{name: "max timestamp right, compressed", b: []Batch{{N: 3, Compression: batch.CompressionLZ4}}},
		{name: "max timestamp below the records', compressed", b: []Batch{{N: 3, Compression: batch.CompressionLZ4, Bytes: put64(batch.OffMaxTimestamp, 5), Fix: true}}},
		{name: "a record's length past the batch", b: []Batch{{N: 2, Bytes: recordByte(0, 0x7e), Fix: true}}},
		{name: "a record's key length past the record", b: []Batch{{N: 2, Bytes: recordByte(4, 0x3e), Fix: true}}},
		{name: "a record's offset delta 5", b: []Batch{{N: 2, Bytes: recordByte(3, 10), Fix: true}}, allowed: "record-offset-deltas"},
		{name: "a compressed record's offset delta 5", b: []Batch{{N: 2, Compression: batch.CompressionGzip, Deltas: []int32{0, 5}}}, allowed: "invalid-record-not-unknown"},
		{name: "record offset deltas 1, 0", b: []Batch{{N: 2, Deltas: []int32{1, 0}}}, allowed: "record-offset-deltas"},
		{name: "truncated batch", b: []Batch{{N: 2, Bytes: cut(3)}}},
		{name: "batch length past the records", b: []Batch{{N: 2, Bytes: func(b []byte) []byte {
			b = append(b, 0, 0, 0)
			binary.BigEndian.PutUint32(b[batch.OffBatchLength:], uint32(len(b)-12))
			return b
		}, Fix: true}}},
		{name: "producer epoch -2", b: []Batch{{N: 2, Bytes: put16(batch.OffProducerEpoch, -2), Fix: true}}, allowed: "producer-epoch-below-none"},
		{name: "timestamp two hours ahead", b: []Batch{{N: 2, TsDelta: 2 * 3600 * 1000}}},
		{name: "timestamp a year back", b: []Batch{{N: 2, TsDelta: -365 * 24 * 3600 * 1000}}},
		{name: "second record far ahead", b: []Batch{{Records: []batch.RecordSpec{{Value: []byte("a")}, {Value: []byte("b"), Timestamp: 1 << 50}}}}},
		{name: "gzip", b: []Batch{{N: 3, Compression: batch.CompressionGzip}}},
		{name: "snappy", b: []Batch{{N: 3, Compression: batch.CompressionSnappy}}},
		{name: "lz4", b: []Batch{{N: 3, Compression: batch.CompressionLZ4}}},
		{name: "zstd", b: []Batch{{N: 3, Compression: batch.CompressionZstd}}},
		{name: "gzip of garbage", b: []Batch{{N: 3, Compression: batch.CompressionGzip, Bytes: recordByte(2, 0), Fix: true}}, allowed: "invalid-record-not-unknown"},
		{name: "null key and value", b: []Batch{{Records: []batch.RecordSpec{{}}}}},
		{name: "headers", b: []Batch{{Records: []batch.RecordSpec{{Value: []byte("h"), Headers: []batch.Header{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b")}}}}}}},
		{name: "zstd at v6", version: 6, b: []Batch{{N: 1, Compression: batch.CompressionZstd}}},
		{name: "zstd at v7", version: 7, b: []Batch{{N: 1, Compression: batch.CompressionZstd}}},
		{name: "v3", version: 3, b: []Batch{{N: 1}}},
		{name: "v8", version: 8, b: []Batch{{N: 1}}},
		{name: "acks 2", acks: 2, b: []Batch{{N: 1}}},
		{name: "acks -2", acks: -2, b: []Batch{{N: 1}}},
		{name: "acks 0", acks: 0, b: []Batch{{N: 1}}},
		{name: "acks 1", acks: 1, b: []Batch{{N: 1}}},
		{name: "two batches", b: []Batch{{N: 1}, {N: 1}}},
		{name: "empty records", raw: func(*Env) []byte { return []byte{} }},
		{name: "three bytes", raw: func(*Env) []byte { return []byte{1, 2, 3} }},
	}
	steps := create(t, int32(len(cs)), nil)
	for i, c := range cs {
		if c.version == 0 {
			c.version = produceV
		}
		if c.acks == 0 && c.name != "acks 0" {
			c.acks = -1
		}
		pp := PP{Topic: t, Partition: int32(i), Batches: c.b, Raw: c.raw}
		produced := Step{Name: c.name, Req: Produce{Version: c.version, Acks: c.acks, Parts: []PP{pp}}.Req}
		stored := Step{Name: c.name + ": stored", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: t, Partition: int32(i)}}}.Req}
		if c.allowed != "" {
			produced.Allowed, produced.Expect = c.allowed, produceCode(87)
			stored.Allowed, stored.Expect = c.allowed, fetchedNothing
		}
		steps = append(steps, produced, stored)
	}
	return []*Script{
		{Name: "produce-validation", Steps: steps},
		{Name: "produce-recompression", Steps: seq(
			create("pc-zstd", 1, map[string]string{"compression.type": "zstd"}),
			produce("gzip into zstd", "pc-zstd", 0, Batch{N: 3, Compression: batch.CompressionGzip}),
			produce("uncompressed into zstd", "pc-zstd", 0, Batch{N: 2}),
			produce("zstd into zstd", "pc-zstd", 0, Batch{N: 2, Compression: batch.CompressionZstd}),
			func() Step {
				st := produce("corrupt lz4 into zstd", "pc-zstd", 0, Batch{N: 3, Compression: batch.CompressionLZ4, Bytes: recordByte(6, 0), Fix: true})
				st.Allowed, st.Expect = "invalid-record-not-unknown", produceCode(87)
				return st
			}(),
			recompressed(fetchAll("zstd topic stored", "pc-zstd", 0, 0)),
			recompressed(Step{Name: "fetch v9 of a zstd topic", Req: Fetch{Version: 9, Parts: []FP{{Topic: "pc-zstd", Partition: 0}}}.Req}),
			create("pc-none", 1, map[string]string{"compression.type": "uncompressed"}),
			produce("snappy into uncompressed", "pc-none", 0, Batch{N: 3, Compression: batch.CompressionSnappy}),
			recompressed(fetchAll("uncompressed topic stored", "pc-none", 0, 0)),
			create("pc-alter", 1, nil),
			produce("lz4 under producer", "pc-alter", 0, Batch{N: 2, Compression: batch.CompressionLZ4}),
			Step{Name: "set compression.type gzip", Req: incrementalAlter(1, "pc-alter", false, alterConfig{"compression.type", 0, Str("gzip")})},
			Step{Name: "described after the set", Req: describeTopicConfigs(4, "pc-alter", "compression.type"), Until: configIs("compression.type", "gzip")},
			produce("lz4 under gzip", "pc-alter", 0, Batch{N: 2, Compression: batch.CompressionLZ4}),
			recompressed(fetchAll("altered topic stored", "pc-alter", 0, 0)),
		)},
		{Name: "produce-null-records", Steps: seq(
			create("pn", 1, nil),
			func() Step {
				st := raw("null records", "pn", func(*Env) []byte { return nil })
				st.Allowed, st.Expect = "null-records", produceCode(87)
				return st
			}(),
		)},
		{Name: "produce-limits", Steps: seq(
			create("pl", 1, map[string]string{"max.message.bytes": "200"}),
			produce("small", "pl", 0, Batch{N: 1}),
			produce("over max.message.bytes", "pl", 0, Batch{Records: []batch.RecordSpec{{Value: make([]byte, 300)}}}),
			create("pl-lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"}),
			produce("log append time", "pl-lat", 0, Batch{N: 2}),
			produce("log append time, compressed", "pl-lat", 0, Batch{N: 2, Compression: batch.CompressionLZ4}),
			produce("log append time, a year back", "pl-lat", 0, Batch{N: 2, TsDelta: -365 * 24 * 3600 * 1000}),
			fetchAll("log append time stored", "pl-lat", 0, 0),
			create("pl-win", 1, map[string]string{"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"}),
			produce("inside the window", "pl-win", 0, Batch{N: 1}),
			produce("2 min before", "pl-win", 0, Batch{N: 1, TsDelta: -120000}),
			produce("2 min after", "pl-win", 0, Batch{N: 1, TsDelta: 120000}),
			produce("-1 timestamps", "pl-win", 0, Batch{Records: []batch.RecordSpec{{Value: []byte("x"), Timestamp: -1}}}),
			fetchAll("window stored", "pl-win", 0, 0),
			Step{Name: "two partitions, one refused", Req: Produce{Version: produceV, Acks: -1, Parts: []PP{
				{Topic: "pl", Partition: 0, Batches: []Batch{{N: 1}}},
				{Topic: "pl-win", Partition: 0, Batches: []Batch{{N: 1, TsDelta: 120000}}},
			}}.Req},
			Step{Name: "unknown topic, no auto-create of invalid name", Req: Produce{Version: produceV, Acks: -1, Parts: []PP{{Topic: "bad name", Partition: 0, Batches: []Batch{{N: 1}}}}}.Req},
		)},
	}
}

// recompressed marks a fetch of batches a broker recompressed: the
// compressed bytes (so the batch length) are each broker's codec
// library's; the codec, header fields, a valid CRC and the records are
// compared.
func recompressed(st Step) Step {
	st.Ignore = append(st.Ignore, "Topics.[].Partitions.[].RecordBatches.[].Length")
	return st
}

var _ = kmsg.NewPtrProduceRequest
