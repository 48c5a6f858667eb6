package batch

import (
	"bytes"
	"fmt"
	"testing"
)

// decodedRecord is what a reader of a record sees.
type decodedRecord struct {
	offset, timestamp int64
	seq               int32
	key, value        string
	keyNull, valNull  bool
	headers           string
}

func decodeAll(t testing.TB, v View) []decodedRecord {
	t.Helper()
	data, err := v.RecordData(nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	it := v.Records(data)
	var out []decodedRecord
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		d := decodedRecord{offset: r.Offset, timestamp: r.Timestamp, seq: r.Sequence, key: string(r.Key), value: string(r.Value),
			keyNull: r.Key == nil, valNull: r.Value == nil}
		hs := r.Headers()
		for h, ok := hs.Next(); ok; h, ok = hs.Next() {
			d.headers += fmt.Sprintf("%s=%q;", h.Key, h.Value)
		}
		out = append(out, d)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAppendRetained: the copy keeps exactly the chosen records (offsets,
// timestamps, sequences, keys, values, headers), the header fields that
// offsets and producer state read, and the codec; its base timestamp is
// the delete horizon when given, else the first kept record's timestamp.
func TestAppendRetained(t *testing.T) {
	recs := []RecordSpec{
		{Timestamp: 1000, Key: []byte("a"), Value: []byte("v0"), Headers: []Header{{Key: []byte("h"), Value: []byte("x")}}},
		{Timestamp: 1003, Key: []byte("b"), Value: nil},
		{Timestamp: 998, Key: []byte("c"), Value: []byte{}},
		{Timestamp: 1010, Key: nil, Value: []byte("v3"), Headers: []Header{{Key: []byte("n"), Value: nil}}},
	}
	cases := []struct {
		name       string
		comp       Compression
		lat        bool
		keep       []bool
		horizon    int64
		hasHorizon bool
	}{
		{name: "drop first", keep: []bool{false, true, true, true}},
		{name: "drop middle", keep: []bool{true, false, true, false}},
		{name: "only last", keep: []bool{false, false, false, true}},
		{name: "horizon", keep: []bool{false, true, false, true}, horizon: 90_000, hasHorizon: true},
		{name: "all with horizon", keep: []bool{true, true, true, true}, horizon: 5, hasHorizon: true},
		{name: "log append time", lat: true, keep: []bool{false, true, true, false}},
		{name: "log append time horizon", lat: true, keep: []bool{true, false, false, true}, horizon: 77, hasHorizon: true},
		{name: "gzip", comp: CompressionGzip, keep: []bool{true, false, true, true}},
		{name: "snappy", comp: CompressionSnappy, keep: []bool{false, true, false, true}},
		{name: "lz4 horizon", comp: CompressionLZ4, keep: []bool{false, true, true, false}, horizon: 123, hasHorizon: true},
		{name: "zstd", comp: CompressionZstd, keep: []bool{true, false, false, false}},
	}
	var bld Builder
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := NewBatchSpec(500)
			spec.Compression = c.comp
			spec.PartitionLeaderEpoch = 7
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = 42, 3, 100
			spec.Transactional = true
			if c.lat {
				spec.TimestampType = LogAppendTime
				spec.MaxTimestamp, spec.HasMaxTimestamp = 5555, true
			}
			src, err := bld.AppendBatch(nil, &spec, recs)
			if err != nil {
				t.Fatal(err)
			}
			orig := View(src)
			data, err := orig.RecordData(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte("prefix")
			out, err := bld.AppendRetained(bytes.Clone(prefix), orig, data, c.keep, c.horizon, c.hasHorizon)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out[:len(prefix)], prefix) {
				t.Fatal("dst's bytes changed")
			}
			v, err := Check(out[len(prefix):])
			if err != nil {
				t.Fatalf("copy does not check: %v", err)
			}
			if v.Size() != len(out)-len(prefix) {
				t.Fatalf("copy is %d bytes, batch says %d", len(out)-len(prefix), v.Size())
			}
			for _, f := range []struct {
				what      string
				got, want any
			}{
				{"base offset", v.BaseOffset(), orig.BaseOffset()},
				{"last offset", v.LastOffset(), orig.LastOffset()},
				{"epoch", v.PartitionLeaderEpoch(), orig.PartitionLeaderEpoch()},
				{"producer", [3]int64{v.ProducerID(), int64(v.ProducerEpoch()), int64(v.BaseSequence())}, [3]int64{42, 3, 100}},
				{"max timestamp", v.MaxTimestamp(), orig.MaxTimestamp()},
				{"timestamp type", v.TimestampType(), orig.TimestampType()},
				{"transactional", v.IsTransactional(), true},
				{"compression", v.Compression(), c.comp},
				{"horizon flag", v.HasDeleteHorizon(), c.hasHorizon},
			} {
				if f.got != f.want {
					t.Errorf("%s: %v, want %v", f.what, f.got, f.want)
				}
			}
			if h, ok := v.DeleteHorizon(); c.hasHorizon && (!ok || h != c.horizon) {
				t.Errorf("delete horizon %d %v, want %d", h, ok, c.horizon)
			}
			all := decodeAll(t, orig)
			var want []decodedRecord
			for i, k := range c.keep {
				if k {
					want = append(want, all[i])
				}
			}
			got := decodeAll(t, v)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("records\n got %v\nwant %v", got, want)
			}
			if !c.hasHorizon && v.BaseTimestamp() != want[0].timestamp {
				t.Fatalf("base timestamp %d, want the first kept record's %d", v.BaseTimestamp(), want[0].timestamp)
			}
		})
	}
}

// TestAppendRetainedRefuses: a keep list of the wrong length or keeping
// nothing is ErrBuild, undecodable records ErrCorrupt; dst is unchanged.
func TestAppendRetainedRefuses(t *testing.T) {
	var bld Builder
	spec := NewBatchSpec(0)
	src, err := bld.AppendBatch(nil, &spec, []RecordSpec{{Key: []byte("k")}, {Key: []byte("l")}})
	if err != nil {
		t.Fatal(err)
	}
	v := View(src)
	data := v.RecordsSection()
	for name, c := range map[string]struct {
		keep []bool
		data []byte
		want error
	}{
		"short keep":   {keep: []bool{true}, data: data, want: ErrBuild},
		"nothing kept": {keep: []bool{false, false}, data: data, want: ErrBuild},
		"bad records":  {keep: []bool{true, true}, data: data[:len(data)-2], want: ErrCorrupt},
	} {
		out, err := bld.AppendRetained([]byte("x"), v, c.data, c.keep, 0, false)
		if err == nil || !isErr(err, c.want) || string(out) != "x" {
			t.Errorf("%s: %q, %v; want %v and dst unchanged", name, out, err, c.want)
		}
	}
}

func isErr(err, target error) bool {
	if target == ErrCorrupt {
		return IsCorrupt(err)
	}
	return err == target
}

// TestAppendEmpty: Kafka's empty batch (writeEmptyHeader): 61 bytes, no
// records, no codec, base timestamp -1, the original's offsets, producer
// fields, leader epoch, max timestamp and flags.
func TestAppendEmpty(t *testing.T) {
	var bld Builder
	for _, control := range []bool{false, true} {
		spec := NewBatchSpec(1 << 33)
		spec.Compression = CompressionZstd
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.PartitionLeaderEpoch = 9, 2, 40, 11
		spec.Transactional, spec.TimestampType = true, LogAppendTime
		spec.MaxTimestamp, spec.HasMaxTimestamp = 777, true
		recs := []RecordSpec{{Key: []byte("a")}, {Key: []byte("b")}, {Key: []byte("c")}}
		if control {
			spec.Compression = CompressionNone
			spec.Control = true
			recs = []RecordSpec{{Key: AppendControlKey(nil, ControlCommit), Value: AppendEndTxnMarker(nil, 4)}}
		}
		src, err := bld.AppendBatch(nil, &spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		orig := View(src)
		v, err := Check(AppendEmpty(nil, orig))
		if err != nil {
			t.Fatal(err)
		}
		if v.Size() != HeaderSize || v.RecordsCount() != 0 || v.Compression() != CompressionNone ||
			v.BaseTimestamp() != NoTimestamp || v.MaxTimestamp() != 777 || v.BaseOffset() != orig.BaseOffset() ||
			v.LastOffset() != orig.LastOffset() || v.ProducerID() != 9 || v.ProducerEpoch() != 2 || v.BaseSequence() != 40 ||
			v.PartitionLeaderEpoch() != 11 || !v.IsTransactional() || v.IsControl() != control ||
			v.TimestampType() != LogAppendTime || v.HasDeleteHorizon() {
			t.Fatalf("control %v: empty batch %x", control, []byte(v))
		}
	}
}

// FuzzAppendRetained: whatever the batch bytes and the keep mask, no
// panic; a copy that is made checks, keeps the batch's offsets and holds
// the kept records of the original, in order.
func FuzzAppendRetained(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Check(b)
		if err != nil || v.RecordsCount() > 64 || v.RecordsCount() < 0 {
			return
		}
		data, err := v.RecordData(nil, fuzzLimit)
		if err != nil {
			return
		}
		keep := make([]bool, v.RecordsCount())
		for i := range keep {
			keep[i] = (len(b)+i)%3 != 0
		}
		var bld Builder
		out, err := bld.AppendRetained(nil, v, data, keep, int64(len(b)), len(b)%2 == 0)
		if err != nil {
			checkErrKindOrBuild(t, err)
			return
		}
		c, err := Check(out)
		if err != nil {
			t.Fatalf("copy does not check: %v", err)
		}
		if c.BaseOffset() != v.BaseOffset() || c.LastOffset() != v.LastOffset() {
			t.Fatalf("offsets moved")
		}
		cd, err := c.RecordData(nil, fuzzLimit)
		if err != nil {
			t.Fatalf("copy's records: %v", err)
		}
		it, ot := c.Records(cd), v.Records(data)
		for i := range keep {
			o, ok := ot.Next()
			if !ok {
				t.Fatalf("original record %d: %v", i, ot.Err())
			}
			if !keep[i] {
				continue
			}
			r, ok := it.Next()
			if !ok {
				t.Fatalf("copy lacks record %d: %v", i, it.Err())
			}
			if r.Offset != o.Offset || r.Timestamp != o.Timestamp || !bytes.Equal(r.Key, o.Key) || !bytes.Equal(r.Value, o.Value) ||
				(r.Key == nil) != (o.Key == nil) || (r.Value == nil) != (o.Value == nil) {
				t.Fatalf("record %d differs: %+v vs %+v", i, r, o)
			}
		}
	})
}

func checkErrKindOrBuild(t *testing.T, err error) {
	t.Helper()
	if err == ErrBuild {
		return
	}
	if !IsCorrupt(err) {
		t.Fatalf("error %v is neither ErrBuild nor corruption", err)
	}
}
