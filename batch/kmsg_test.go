package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cross-check with franz-go's kmsg decodes our batches with an
// independent implementation and feeds kmsg-encoded batches to ours.
// Run with -args -kmsg.seed=N to replay a logged seed.
var kmsgSeed = flag.Uint64("kmsg.seed", 0, "seed of the kmsg cross-check (0: derived from the clock)")

func kmsgRand(t *testing.T) *rand.Rand {
	seed := *kmsgSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -args -kmsg.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// genBatch is a randomly generated batch and what it was built from.
type genBatch struct {
	desc     string
	spec     BatchSpec
	recs     []RecordSpec
	explicit bool
	bin      []byte

	// For control batches built by the control constructors.
	control    bool
	ctype      ControlType
	coordEpoch int32
	clusterID  string
}

func randBytes(r *rand.Rand) []byte {
	n := r.IntN(24)
	if r.IntN(10) == 0 {
		n = 64 + r.IntN(400) // multi-byte varint lengths
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// randNullable returns nil, an empty slice or random bytes.
func randNullable(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	default:
		return randBytes(r)
	}
}

func randDataBatch(t *testing.T, r *rand.Rand, bld *Builder) genBatch {
	t.Helper()
	g := genBatch{spec: NewBatchSpec(r.Int64N(1 << 50))}
	s := &g.spec
	s.PartitionLeaderEpoch = r.Int32N(1000) - 1
	s.Compression = Compression(r.IntN(5))
	baseTS := 1_700_000_000_000 + r.Int64N(1_000_000_000)
	if r.IntN(4) == 0 {
		s.TimestampType = LogAppendTime
		s.MaxTimestamp, s.HasMaxTimestamp = baseTS+r.Int64N(1_000_000), true
	}
	if r.IntN(2) == 0 {
		s.ProducerID = r.Int64N(math.MaxInt64)
		s.ProducerEpoch = int16(r.IntN(math.MaxInt16 + 1))
		if r.IntN(3) == 0 {
			s.BaseSequence = math.MaxInt32 - r.Int32N(60) // wraps inside the batch
		} else {
			s.BaseSequence = r.Int32N(math.MaxInt32)
		}
		s.Transactional = r.IntN(2) == 0
	}
	if r.IntN(10) == 0 {
		s.DeleteHorizon, s.HasDeleteHorizon = baseTS+r.Int64N(86_400_000), true
	}
	g.explicit = r.IntN(3) == 0
	n := r.IntN(51)
	g.recs = make([]RecordSpec, n)
	delta := int32(r.IntN(3))
	for i := range g.recs {
		rs := &g.recs[i]
		if g.explicit {
			rs.OffsetDelta = delta
			delta += 1 + int32(r.IntN(4))
		}
		rs.Timestamp = baseTS + r.Int64N(2_000_001) - 1_000_000 // negative deltas too
		rs.Key = randNullable(r)
		rs.Value = randNullable(r)
		for range r.IntN(4) {
			k := randBytes(r)
			if r.IntN(5) == 0 {
				k = []byte{}
			}
			rs.Headers = append(rs.Headers, Header{Key: k, Value: randNullable(r)})
		}
	}
	if g.explicit && r.IntN(2) == 0 {
		last := int32(0)
		if n > 0 {
			last = g.recs[n-1].OffsetDelta
		}
		s.LastOffsetDelta, s.HasLastOffsetDelta = last+r.Int32N(10), true
	}
	bld.ExplicitOffsetDeltas = g.explicit
	bin, err := bld.AppendBatch(nil, s, g.recs)
	if err != nil {
		t.Fatalf("AppendBatch: %v", err)
	}
	g.bin = bin
	g.desc = fmt.Sprintf("data batch: %d records, %v, %v, explicit deltas %v, producer %d/%d/%d, txn %v, horizon %v",
		n, s.Compression, s.TimestampType, g.explicit, s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.Transactional, s.HasDeleteHorizon)
	return g
}

func randControlBatch(r *rand.Rand) genBatch {
	cs := ControlSpec{
		BaseOffset:           r.Int64N(1 << 50),
		PartitionLeaderEpoch: r.Int32N(1000),
		Timestamp:            1_700_000_000_000 + r.Int64N(1_000_000_000),
		ProducerID:           r.Int64N(math.MaxInt64),
		ProducerEpoch:        int16(r.IntN(math.MaxInt16 + 1)),
	}
	g := genBatch{control: true, spec: NewBatchSpec(cs.BaseOffset)}
	g.spec.PartitionLeaderEpoch = cs.PartitionLeaderEpoch
	g.spec.Control = true
	if r.IntN(3) == 0 {
		g.ctype = ControlMirrorPidReset
		id := make([]byte, 16)
		for i := range id {
			id[i] = byte(r.Uint32())
		}
		g.clusterID = base64.RawURLEncoding.EncodeToString(id)
		switch r.IntN(4) {
		case 0:
			g.clusterID = ""
		case 1:
			g.clusterID = string(bytes.Repeat([]byte("x"), 100+r.IntN(300))) // 2-byte uvarint length
		}
		g.bin = AppendMirrorPidResetBatch(nil, cs, g.clusterID)
	} else {
		commit := r.IntN(2) == 0
		g.ctype = ControlAbort
		if commit {
			g.ctype = ControlCommit
		}
		g.coordEpoch = r.Int32()
		if r.IntN(4) == 0 {
			g.coordEpoch = -1 - r.Int32N(10)
		}
		g.bin = AppendEndTxnMarkerBatch(nil, cs, commit, g.coordEpoch)
		g.spec.Transactional = true
		g.spec.ProducerID, g.spec.ProducerEpoch = cs.ProducerID, cs.ProducerEpoch
	}
	var key, value []byte
	key = AppendControlKey(nil, g.ctype)
	if g.ctype == ControlMirrorPidReset {
		value = AppendMirrorPidReset(nil, g.clusterID)
	} else {
		value = AppendEndTxnMarker(nil, g.coordEpoch)
	}
	g.recs = []RecordSpec{{Timestamp: cs.Timestamp, Key: key, Value: value}}
	g.desc = fmt.Sprintf("control batch %v", g.ctype)
	return g
}

// wantHeader is what the batch header must hold given the spec.
type wantHeader struct {
	attrs            int16
	lod              int32
	baseTS, maxTS    int64
	count            int32
	deltas           []int32
	recordTimestamps []int64
}

func expectHeader(g *genBatch) wantHeader {
	s := &g.spec
	w := wantHeader{attrs: int16(s.Compression), baseTS: NoTimestamp, maxTS: NoTimestamp, count: int32(len(g.recs))}
	if s.TimestampType == LogAppendTime {
		w.attrs |= AttrTimestampType
	}
	if s.Transactional {
		w.attrs |= AttrTransactional
	}
	if s.Control {
		w.attrs |= AttrControl
	}
	if s.HasDeleteHorizon {
		w.attrs |= AttrDeleteHorizon
	}
	for i, rs := range g.recs {
		d := int32(i)
		if g.explicit {
			d = rs.OffsetDelta
		}
		w.deltas = append(w.deltas, d)
		w.lod = d
		w.maxTS = max(w.maxTS, rs.Timestamp)
		if i == 0 {
			w.baseTS = rs.Timestamp
		}
		ts := rs.Timestamp
		if s.TimestampType == LogAppendTime {
			ts = s.MaxTimestamp
		}
		w.recordTimestamps = append(w.recordTimestamps, ts)
	}
	if s.HasLastOffsetDelta {
		w.lod = s.LastOffsetDelta
	}
	if s.HasMaxTimestamp {
		w.maxTS = s.MaxTimestamp
	}
	if s.HasDeleteHorizon {
		w.baseTS = s.DeleteHorizon
	}
	return w
}

// fieldCheck accumulates mismatches.
type fieldCheck struct{ errs []string }

func (f *fieldCheck) eq(name string, got, want any) {
	if got != want {
		f.errs = append(f.errs, fmt.Sprintf("%s = %v, want %v", name, got, want))
	}
}

func (f *fieldCheck) bytesEq(name string, got, want []byte) {
	if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
		f.errs = append(f.errs, fmt.Sprintf("%s = %x (nil %v), want %x (nil %v)", name, got, got == nil, want, want == nil))
	}
}

func (f *fieldCheck) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	return errors.New(fmt.Sprint(f.errs))
}

// decoders holds the independent decompressors, reused across batches.
type decoders struct {
	zstd *zstd.Decoder
}

func newDecoders(t *testing.T) *decoders {
	d, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return &decoders{zstd: d}
}

// decompress decodes a records section without our codec code.
func (d *decoders) decompress(c Compression, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return src, nil
	case CompressionGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	case CompressionSnappy:
		return unxerial(src)
	case CompressionLZ4:
		if err := checkKafkaLZ4Header(src); err != nil {
			return nil, err
		}
		return io.ReadAll(lz4.NewReader(bytes.NewReader(src)))
	case CompressionZstd:
		return d.zstd.DecodeAll(src, nil)
	}
	return nil, fmt.Errorf("codec %d", c)
}

// unxerial decodes snappy-java's stream framing (formats.md §1.10.3).
func unxerial(src []byte) ([]byte, error) {
	hdr := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.HasPrefix(src, hdr) {
		return nil, fmt.Errorf("snappy: no xerial header: %x", src[:min(len(src), 16)])
	}
	out := []byte{}
	for p := len(hdr); p < len(src); {
		if len(src)-p < 4 {
			return nil, fmt.Errorf("snappy: torn chunk length at %d", p)
		}
		n := int(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n > len(src)-p {
			return nil, fmt.Errorf("snappy: chunk of %d bytes at %d runs past the end", n, p)
		}
		blk, err := snappy.Decode(nil, src[p:p+n])
		if err != nil {
			return nil, err
		}
		out = append(out, blk...)
		p += n
	}
	return out, nil
}

// checkKafkaLZ4Header checks the frame descriptor bits Kafka's reader
// insists on (formats.md §1.10.4).
func checkKafkaLZ4Header(src []byte) error {
	if len(src) < 7 || binary.LittleEndian.Uint32(src) != 0x184D2204 {
		return fmt.Errorf("lz4: bad magic %x", src[:min(len(src), 4)])
	}
	flg, bd := src[4], src[5]
	if flg>>6 != 1 || flg&0x20 == 0 || flg&0x03 != 0 {
		return fmt.Errorf("lz4: FLG %#02x not accepted by Kafka", flg)
	}
	if bd&0x8f != 0 || (bd>>4)&7 < 4 {
		return fmt.Errorf("lz4: BD %#02x not accepted by Kafka", bd)
	}
	return nil
}

// kmsgRecordsOf splits uncompressed records data into kmsg records.
func kmsgRecordsOf(data []byte) ([]kmsg.Record, error) {
	var out []kmsg.Record
	for p := 0; p < len(data); {
		l, n := binary.Varint(data[p:])
		if n <= 0 || l < 0 || l > int64(len(data)-p-n) {
			return nil, fmt.Errorf("record at %d: bad length %d (%d)", p, l, n)
		}
		var kr kmsg.Record
		if err := kr.ReadFrom(data[p : p+n+int(l)]); err != nil {
			return nil, fmt.Errorf("kmsg record at %d: %w", p, err)
		}
		out = append(out, kr)
		p += n + int(l)
	}
	return out, nil
}

// kmsgEncode encodes RecordSpecs the way kmsg does, for a byte-for-byte
// comparison with the Builder's records data.
func kmsgEncode(g *genBatch, w *wantHeader) []byte {
	var out []byte
	for i, rs := range g.recs {
		kr := kmsg.Record{
			TimestampDelta64: rs.Timestamp - w.baseTS,
			OffsetDelta:      w.deltas[i],
			Key:              rs.Key,
			Value:            rs.Value,
		}
		for _, h := range rs.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		out = kr.AppendTo(out)
	}
	return out
}

// crossCheckOurBatch decodes g.bin with kmsg and with our code and
// compares everything.
func crossCheckOurBatch(dec *decoders, g *genBatch) error {
	v, err := Check(g.bin)
	if err != nil {
		return fmt.Errorf("Check: %w", err)
	}
	if len(v) != len(g.bin) {
		return fmt.Errorf("View of %d bytes, batch has %d", len(v), len(g.bin))
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(g.bin); err != nil {
		return fmt.Errorf("kmsg RecordBatch: %w", err)
	}
	w := expectHeader(g)
	var f fieldCheck
	f.eq("FirstOffset", kb.FirstOffset, v.BaseOffset())
	f.eq("FirstOffset/spec", kb.FirstOffset, g.spec.BaseOffset)
	f.eq("Length", kb.Length, v.BatchLength())
	f.eq("Length/size", int(kb.Length)+LogOverhead, len(g.bin))
	f.eq("PartitionLeaderEpoch", kb.PartitionLeaderEpoch, v.PartitionLeaderEpoch())
	f.eq("PartitionLeaderEpoch/spec", kb.PartitionLeaderEpoch, g.spec.PartitionLeaderEpoch)
	f.eq("Magic", kb.Magic, v.Magic())
	f.eq("Magic/2", kb.Magic, int8(2))
	f.eq("CRC", uint32(kb.CRC), v.CRC())
	f.eq("CRC/computed", uint32(kb.CRC), v.ComputeCRC())
	f.eq("CRC/hash/crc32", uint32(kb.CRC), crc32.Checksum(g.bin[OffAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	f.eq("Attributes", kb.Attributes, v.Attributes())
	f.eq("Attributes/spec", kb.Attributes, w.attrs)
	f.eq("Compression", Compression(kb.Attributes&7), v.Compression())
	f.eq("LastOffsetDelta", kb.LastOffsetDelta, v.LastOffsetDelta())
	f.eq("LastOffsetDelta/spec", kb.LastOffsetDelta, w.lod)
	f.eq("FirstTimestamp", kb.FirstTimestamp, v.BaseTimestamp())
	f.eq("FirstTimestamp/spec", kb.FirstTimestamp, w.baseTS)
	f.eq("MaxTimestamp", kb.MaxTimestamp, v.MaxTimestamp())
	f.eq("MaxTimestamp/spec", kb.MaxTimestamp, w.maxTS)
	f.eq("ProducerID", kb.ProducerID, v.ProducerID())
	f.eq("ProducerID/spec", kb.ProducerID, g.spec.ProducerID)
	f.eq("ProducerEpoch", kb.ProducerEpoch, v.ProducerEpoch())
	f.eq("ProducerEpoch/spec", kb.ProducerEpoch, g.spec.ProducerEpoch)
	f.eq("FirstSequence", kb.FirstSequence, v.BaseSequence())
	f.eq("FirstSequence/spec", kb.FirstSequence, g.spec.BaseSequence)
	f.eq("NumRecords", kb.NumRecords, v.RecordsCount())
	f.eq("NumRecords/spec", kb.NumRecords, w.count)
	f.eq("Records", string(kb.Records), string(v.RecordsSection()))
	if err := f.err(); err != nil {
		return err
	}

	data, err := dec.decompress(v.Compression(), kb.Records)
	if err != nil {
		return fmt.Errorf("independent %v decompression: %w", v.Compression(), err)
	}
	ours, err := v.RecordData(nil, 1<<22)
	if err != nil {
		return fmt.Errorf("RecordData: %w", err)
	}
	if !bytes.Equal(ours, data) {
		return fmt.Errorf("RecordData differs from the independent decompression (%d vs %d bytes)", len(ours), len(data))
	}
	if enc := kmsgEncode(g, &w); !bytes.Equal(enc, data) {
		return fmt.Errorf("records data differs from kmsg's encoding of the same records:\n ours %x\n kmsg %x", data, enc)
	}
	krs, err := kmsgRecordsOf(data)
	if err != nil {
		return err
	}
	if len(krs) != len(g.recs) {
		return fmt.Errorf("kmsg read %d records, want %d", len(krs), len(g.recs))
	}
	it := v.Records(data)
	i := 0
	for ; ; i++ {
		r, ok := it.Next()
		if !ok {
			break
		}
		if i >= len(krs) {
			return fmt.Errorf("our iterator returned more than %d records", len(krs))
		}
		kr, rs := &krs[i], &g.recs[i]
		p := fmt.Sprintf("record %d: ", i)
		f.eq(p+"Length", kr.Length, r.BodyLength)
		f.eq(p+"Attributes", kr.Attributes, r.Attributes)
		f.eq(p+"TimestampDelta", kr.TimestampDelta64, r.TimestampDelta)
		f.eq(p+"OffsetDelta", kr.OffsetDelta, r.OffsetDelta)
		f.eq(p+"OffsetDelta/spec", kr.OffsetDelta, w.deltas[i])
		f.bytesEq(p+"Key", r.Key, kr.Key)
		f.bytesEq(p+"Key/spec", r.Key, rs.Key)
		f.bytesEq(p+"Value", r.Value, kr.Value)
		f.bytesEq(p+"Value/spec", r.Value, rs.Value)
		f.eq(p+"Offset", r.Offset, kb.FirstOffset+int64(kr.OffsetDelta))
		f.eq(p+"Timestamp", r.Timestamp, w.recordTimestamps[i])
		wantSeq := NoSequence
		if kb.FirstSequence >= 0 {
			wantSeq = IncrementSequence(kb.FirstSequence, kr.OffsetDelta)
		}
		f.eq(p+"Sequence", r.Sequence, wantSeq)
		f.eq(p+"HeaderCount", int(r.HeaderCount), len(kr.Headers))
		hi := r.Headers()
		j := 0
		for ; ; j++ {
			h, ok := hi.Next()
			if !ok {
				break
			}
			if j >= len(kr.Headers) {
				break
			}
			f.eq(fmt.Sprintf("%sheader %d key", p, j), string(h.Key), kr.Headers[j].Key)
			f.bytesEq(fmt.Sprintf("%sheader %d value", p, j), h.Value, kr.Headers[j].Value)
			f.bytesEq(fmt.Sprintf("%sheader %d value/spec", p, j), h.Value, rs.Headers[j].Value)
		}
		f.eq(p+"headers iterated", j, len(kr.Headers))
		if g.control {
			checkControlWithKmsg(&f, g, r)
		}
		if err := f.err(); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("record iterator: %w", err)
	}
	if i != len(krs) {
		return fmt.Errorf("our iterator returned %d records, kmsg %d", i, len(krs))
	}
	if err := CheckRecords(v, data, !g.explicit && len(g.recs) > 0); err != nil {
		return fmt.Errorf("CheckRecords: %w", err)
	}
	return nil
}

func checkControlWithKmsg(f *fieldCheck, g *genBatch, r *Record) {
	var kk kmsg.ControlRecordKey
	if err := kk.ReadFrom(r.Key); err != nil {
		f.errs = append(f.errs, "kmsg control key: "+err.Error())
		return
	}
	ver, typ, err := ParseControlKey(r.Key)
	f.eq("control key error", err, nil)
	f.eq("control key version", ver, kk.Version)
	f.eq("control key type", int16(typ), int16(kk.Type))
	f.eq("control key type/spec", typ, g.ctype)
	val, err := DecodeControlValue(typ, r.Value)
	f.eq("control value error", err, nil)
	switch g.ctype {
	case ControlAbort, ControlCommit:
		var km kmsg.EndTxnMarker
		if err := km.ReadFrom(r.Value); err != nil {
			f.errs = append(f.errs, "kmsg end txn marker: "+err.Error())
			return
		}
		f.eq("end txn marker", val, EndTxnMarker{Version: km.Version, CoordinatorEpoch: km.CoordinatorEpoch})
		f.eq("end txn marker/spec", val, EndTxnMarker{CoordinatorEpoch: g.coordEpoch})
	case ControlMirrorPidReset:
		f.eq("mirror pid reset", val, MirrorPidReset{SourceClusterID: g.clusterID})
	}
}

// TestKmsgDecodesOurBatches builds random batches with Builder and the
// control constructors and decodes them with kmsg.
func TestKmsgDecodesOurBatches(t *testing.T) {
	r := kmsgRand(t)
	n := 3000
	if testing.Short() {
		n = 300
	}
	dec := newDecoders(t)
	var bld Builder
	var region []byte
	var offsets []int64
	perCodec := map[Compression]int{}
	controls := 0
	for i := range n {
		var g genBatch
		if r.IntN(10) == 0 {
			g = randControlBatch(r)
			controls++
		} else {
			g = randDataBatch(t, r, &bld)
		}
		perCodec[g.spec.Compression]++
		if err := crossCheckOurBatch(dec, &g); err != nil {
			t.Fatalf("batch %d (%s): %v\nbatch %x", i, g.desc, err, g.bin)
		}
		if len(region) < 1<<20 {
			region = append(region, g.bin...)
			offsets = append(offsets, g.spec.BaseOffset)
		}
	}
	t.Logf("%d batches: %d control, per codec %v", n, controls, perCodec)
	// The batches concatenated form a region the iterator walks exactly.
	it := NewIterator(region, 0)
	k := 0
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if v.BaseOffset() != offsets[k] {
			t.Fatalf("region batch %d: base offset %d, want %d", k, v.BaseOffset(), offsets[k])
		}
		k++
	}
	if it.Err() != nil || k != len(offsets) || it.Offset() != len(region) {
		t.Fatalf("region: %d of %d batches, ended at %d of %d: %v", k, len(offsets), it.Offset(), len(region), it.Err())
	}
}

// kmsgGen is a batch encoded entirely by kmsg.
type kmsgGen struct {
	batch   kmsg.RecordBatch
	records []kmsg.Record
	bin     []byte
	gaps    bool
}

func randKmsgBatch(t *testing.T, r *rand.Rand) kmsgGen {
	t.Helper()
	var g kmsgGen
	n := r.IntN(31)
	baseTS := 1_700_000_000_000 + r.Int64N(1_000_000_000)
	maxTS := int64(-1)
	delta := int32(0)
	g.gaps = r.IntN(3) == 0
	var section []byte
	for i := range n {
		kr := kmsg.Record{
			TimestampDelta64: r.Int64N(2_000_001) - 1_000_000,
			OffsetDelta:      delta,
			Key:              randNullable(r),
			Value:            randNullable(r),
		}
		if i == 0 {
			kr.TimestampDelta64 = 0
		}
		if r.IntN(8) == 0 {
			kr.Attributes = int8(r.Uint32()) // unused byte, read back as is
		}
		for range r.IntN(4) {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: string(randBytes(r)), Value: randNullable(r)})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		section = kr.AppendTo(section)
		maxTS = max(maxTS, baseTS+kr.TimestampDelta64)
		g.records = append(g.records, kr)
		delta++
		if g.gaps {
			delta += int32(r.IntN(3))
		}
	}
	lod := int32(0)
	if n > 0 {
		lod = g.records[n-1].OffsetDelta
	} else {
		baseTS = -1
	}
	if g.gaps {
		lod += r.Int32N(3)
	}
	attrs := int16(0)
	if r.IntN(2) == 0 {
		attrs = int16(CompressionGzip)
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(section); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		section = buf.Bytes()
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if r.IntN(2) == 0 {
		pid, epoch, seq = r.Int64N(1<<40), int16(r.IntN(100)), r.Int32N(math.MaxInt32)
		if r.IntN(2) == 0 {
			attrs |= AttrTransactional
		}
	}
	if r.IntN(4) == 0 {
		attrs |= AttrTimestampType
		maxTS = baseTS + 5000
	}
	g.batch = kmsg.RecordBatch{
		FirstOffset:          r.Int64N(1 << 50),
		Length:               int32(HeaderSize - LogOverhead + len(section)),
		PartitionLeaderEpoch: r.Int32N(100) - 1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      lod,
		FirstTimestamp:       baseTS,
		MaxTimestamp:         maxTS,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           int32(n),
		Records:              section,
	}
	bin := g.batch.AppendTo(nil)
	crc := crc32.Checksum(bin[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(bin[17:], crc)
	g.batch.CRC = int32(crc)
	g.bin = bin
	return g
}

func crossCheckKmsgBatch(g *kmsgGen) error {
	v, err := Check(g.bin)
	if err != nil {
		return fmt.Errorf("Check: %w", err)
	}
	kb := &g.batch
	var f fieldCheck
	f.eq("len", len(v), len(g.bin))
	f.eq("BaseOffset", v.BaseOffset(), kb.FirstOffset)
	f.eq("BatchLength", v.BatchLength(), kb.Length)
	f.eq("PartitionLeaderEpoch", v.PartitionLeaderEpoch(), kb.PartitionLeaderEpoch)
	f.eq("Magic", v.Magic(), kb.Magic)
	f.eq("CRC", v.CRC(), uint32(kb.CRC))
	f.eq("Attributes", v.Attributes(), kb.Attributes)
	f.eq("Compression", v.Compression(), Compression(kb.Attributes&7))
	f.eq("IsTransactional", v.IsTransactional(), kb.Attributes&AttrTransactional != 0)
	f.eq("LastOffsetDelta", v.LastOffsetDelta(), kb.LastOffsetDelta)
	f.eq("BaseTimestamp", v.BaseTimestamp(), kb.FirstTimestamp)
	f.eq("MaxTimestamp", v.MaxTimestamp(), kb.MaxTimestamp)
	f.eq("ProducerID", v.ProducerID(), kb.ProducerID)
	f.eq("ProducerEpoch", v.ProducerEpoch(), kb.ProducerEpoch)
	f.eq("BaseSequence", v.BaseSequence(), kb.FirstSequence)
	f.eq("RecordsCount", v.RecordsCount(), kb.NumRecords)
	f.eq("RecordsSection", string(v.RecordsSection()), string(kb.Records))
	if err := f.err(); err != nil {
		return err
	}
	data, err := v.RecordData(nil, 1<<22)
	if err != nil {
		return fmt.Errorf("RecordData: %w", err)
	}
	it := v.Records(data)
	i := 0
	for ; ; i++ {
		r, ok := it.Next()
		if !ok {
			break
		}
		if i >= len(g.records) {
			return fmt.Errorf("more than %d records", len(g.records))
		}
		kr := &g.records[i]
		p := fmt.Sprintf("record %d: ", i)
		f.eq(p+"BodyLength", r.BodyLength, kr.Length)
		f.eq(p+"Attributes", r.Attributes, kr.Attributes)
		f.eq(p+"TimestampDelta", r.TimestampDelta, kr.TimestampDelta64)
		f.eq(p+"OffsetDelta", r.OffsetDelta, kr.OffsetDelta)
		f.eq(p+"Offset", r.Offset, kb.FirstOffset+int64(kr.OffsetDelta))
		wantTS := kb.FirstTimestamp + kr.TimestampDelta64
		if kb.Attributes&AttrTimestampType != 0 {
			wantTS = kb.MaxTimestamp
		}
		f.eq(p+"Timestamp", r.Timestamp, wantTS)
		wantSeq := NoSequence
		if kb.FirstSequence >= 0 {
			wantSeq = IncrementSequence(kb.FirstSequence, kr.OffsetDelta)
		}
		f.eq(p+"Sequence", r.Sequence, wantSeq)
		f.bytesEq(p+"Key", r.Key, kr.Key)
		f.bytesEq(p+"Value", r.Value, kr.Value)
		f.eq(p+"HeaderCount", int(r.HeaderCount), len(kr.Headers))
		hi := r.Headers()
		j := 0
		for ; ; j++ {
			h, ok := hi.Next()
			if !ok || j >= len(kr.Headers) {
				break
			}
			f.eq(fmt.Sprintf("%sheader %d key", p, j), string(h.Key), kr.Headers[j].Key)
			f.bytesEq(fmt.Sprintf("%sheader %d value", p, j), h.Value, kr.Headers[j].Value)
		}
		f.eq(p+"headers iterated", j, len(kr.Headers))
		if err := f.err(); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("record iterator: %w", err)
	}
	if i != len(g.records) {
		return fmt.Errorf("%d records, want %d", i, len(g.records))
	}
	contiguous := len(g.records) > 0 && kb.LastOffsetDelta == int32(len(g.records)-1)
	if err := CheckRecords(v, data, contiguous); err != nil {
		return fmt.Errorf("CheckRecords(contiguous=%v): %w", contiguous, err)
	}
	return nil
}

// TestOurDecoderReadsKmsgBatches encodes random batches with kmsg (CRC by
// hash/crc32) and decodes them with Check and the record iterator.
func TestOurDecoderReadsKmsgBatches(t *testing.T) {
	r := kmsgRand(t)
	n := 1000
	if testing.Short() {
		n = 100
	}
	var region []byte
	for i := range n {
		g := randKmsgBatch(t, r)
		if err := crossCheckKmsgBatch(&g); err != nil {
			t.Fatalf("kmsg batch %d (%d records, attributes %#x): %v\nbatch %x", i, len(g.records), g.batch.Attributes, err, g.bin)
		}
		region = append(region, g.bin...)
	}
	it := NewIterator(region, 0)
	k := 0
	for _, ok := it.Next(); ok; _, ok = it.Next() {
		k++
	}
	if it.Err() != nil || k != n {
		t.Fatalf("region of kmsg batches: %d of %d batches: %v", k, n, it.Err())
	}
}
