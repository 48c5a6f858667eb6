package batch

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// vectorJSON mirrors the .json files of testdata/vectors (record_batch_v2).
type vectorJSON struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Kind  string `json:"kind"`
	Batch struct {
		BaseOffset           int64  `json:"base_offset"`
		BatchLength          int32  `json:"batch_length"`
		SizeInBytes          int    `json:"size_in_bytes"`
		PartitionLeaderEpoch int32  `json:"partition_leader_epoch"`
		Magic                int8   `json:"magic"`
		CRC                  uint32 `json:"crc"`
		Attributes           int16  `json:"attributes"`
		CompressionID        int8   `json:"compression_id"`
		Compression          string `json:"compression"`
		TimestampType        string `json:"timestamp_type"`
		IsTransactional      bool   `json:"is_transactional"`
		IsControl            bool   `json:"is_control"`
		HasDeleteHorizon     bool   `json:"has_delete_horizon"`
		LastOffsetDelta      int32  `json:"last_offset_delta"`
		LastOffset           int64  `json:"last_offset"`
		BaseTimestamp        int64  `json:"base_timestamp"`
		MaxTimestamp         int64  `json:"max_timestamp"`
		ProducerID           int64  `json:"producer_id"`
		ProducerEpoch        int16  `json:"producer_epoch"`
		BaseSequence         int32  `json:"base_sequence"`
		LastSequence         int32  `json:"last_sequence"`
		RecordsCount         int32  `json:"records_count"`
		RecordsSectionBytes  int    `json:"records_section_bytes"`
		UncompressedBytes    int    `json:"uncompressed_records_bytes"`
	} `json:"batch"`
	Records []struct {
		Offset         int64   `json:"offset"`
		OffsetDelta    int32   `json:"offset_delta"`
		Timestamp      int64   `json:"timestamp"`
		TimestampDelta int64   `json:"timestamp_delta"`
		Attributes     int8    `json:"attributes"`
		Sequence       int32   `json:"sequence"`
		BodyLength     int32   `json:"body_length"`
		KeySize        int     `json:"key_size"`
		ValueSize      int     `json:"value_size"`
		KeyHex         *string `json:"key_hex"`
		ValueHex       *string `json:"value_hex"`
		Headers        []struct {
			Key      string  `json:"key"`
			ValueHex *string `json:"value_hex"`
		} `json:"headers"`
		Control *struct {
			KeyVersion       int16   `json:"key_version"`
			Type             int16   `json:"type"`
			TypeName         string  `json:"type_name"`
			MarkerVersion    *int16  `json:"marker_version"`
			CoordinatorEpoch *int32  `json:"coordinator_epoch"`
			MPRVersion       *int16  `json:"mirror_pid_reset_version"`
			MPRClusterID     *string `json:"mirror_pid_reset_source_cluster_id"`
		} `json:"control"`
	} `json:"records"`
	ExpectedDumpLines []string `json:"expected_dump_lines"`
}

type vector struct {
	vectorJSON
	bin []byte
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	files, err := filepath.Glob("testdata/vectors/v2_*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	var out []vector
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		if err := json.Unmarshal(raw, &v.vectorJSON); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if v.bin, err = os.ReadFile(filepath.Join("testdata/vectors", v.File)); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func hexOrNil(t *testing.T, s *string) []byte {
	t.Helper()
	if s == nil {
		return nil
	}
	b, err := hex.DecodeString(*s)
	if err != nil {
		t.Fatal(err)
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// TestVectorsDecode checks every field of every golden vector.
func TestVectorsDecode(t *testing.T) {
	for _, vec := range loadVectors(t) {
		t.Run(vec.Name, func(t *testing.T) {
			v, err := Check(vec.bin)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			want := vec.Batch
			got := []struct {
				name      string
				got, want any
			}{
				{"base_offset", v.BaseOffset(), want.BaseOffset},
				{"batch_length", v.BatchLength(), want.BatchLength},
				{"size", v.Size(), want.SizeInBytes},
				{"len", len(v), want.SizeInBytes},
				{"partition_leader_epoch", v.PartitionLeaderEpoch(), want.PartitionLeaderEpoch},
				{"magic", v.Magic(), want.Magic},
				{"crc", v.CRC(), want.CRC},
				{"attributes", v.Attributes(), want.Attributes},
				{"compression_id", int8(v.Compression()), want.CompressionID},
				{"compression", v.Compression().String(), want.Compression},
				{"timestamp_type", v.TimestampType().String(), want.TimestampType},
				{"is_transactional", v.IsTransactional(), want.IsTransactional},
				{"is_control", v.IsControl(), want.IsControl},
				{"has_delete_horizon", v.HasDeleteHorizon(), want.HasDeleteHorizon},
				{"last_offset_delta", v.LastOffsetDelta(), want.LastOffsetDelta},
				{"last_offset", v.LastOffset(), want.LastOffset},
				{"base_timestamp", v.BaseTimestamp(), want.BaseTimestamp},
				{"max_timestamp", v.MaxTimestamp(), want.MaxTimestamp},
				{"producer_id", v.ProducerID(), want.ProducerID},
				{"producer_epoch", v.ProducerEpoch(), want.ProducerEpoch},
				{"base_sequence", v.BaseSequence(), want.BaseSequence},
				{"last_sequence", v.LastSequence(), want.LastSequence},
				{"records_count", v.RecordsCount(), want.RecordsCount},
				{"records_section_bytes", len(v.RecordsSection()), want.RecordsSectionBytes},
			}
			for _, g := range got {
				if g.got != g.want {
					t.Errorf("%s = %v, want %v", g.name, g.got, g.want)
				}
			}
			data, err := v.RecordData(nil, 1<<20)
			if err != nil {
				t.Fatalf("RecordData: %v", err)
			}
			if len(data) != want.UncompressedBytes {
				t.Errorf("uncompressed records = %d bytes, want %d", len(data), want.UncompressedBytes)
			}
			it := v.Records(data)
			i := 0
			for ; ; i++ {
				r, ok := it.Next()
				if !ok {
					break
				}
				if i >= len(vec.Records) {
					t.Fatalf("more records than the %d expected", len(vec.Records))
				}
				wr := vec.Records[i]
				checks := []struct {
					name      string
					got, want any
				}{
					{"offset", r.Offset, wr.Offset},
					{"offset_delta", r.OffsetDelta, wr.OffsetDelta},
					{"timestamp", r.Timestamp, wr.Timestamp},
					{"timestamp_delta", r.TimestampDelta, wr.TimestampDelta},
					{"attributes", r.Attributes, wr.Attributes},
					{"sequence", r.Sequence, wr.Sequence},
					{"body_length", r.BodyLength, wr.BodyLength},
					{"key_size", r.KeySize(), wr.KeySize},
					{"value_size", r.ValueSize(), wr.ValueSize},
					{"header count", int(r.HeaderCount), len(wr.Headers)},
				}
				for _, c := range checks {
					if c.got != c.want {
						t.Errorf("record %d: %s = %v, want %v", i, c.name, c.got, c.want)
					}
				}
				if !sameBytes(r.Key, hexOrNil(t, wr.KeyHex)) {
					t.Errorf("record %d: key %x, want %v", i, r.Key, wr.KeyHex)
				}
				if !sameBytes(r.Value, hexOrNil(t, wr.ValueHex)) {
					t.Errorf("record %d: value %x, want %v", i, r.Value, wr.ValueHex)
				}
				hi := r.Headers()
				for j := 0; ; j++ {
					h, ok := hi.Next()
					if !ok {
						break
					}
					if string(h.Key) != wr.Headers[j].Key || !sameBytes(h.Value, hexOrNil(t, wr.Headers[j].ValueHex)) {
						t.Errorf("record %d header %d: %q=%x (null %v)", i, j, h.Key, h.Value, h.Value == nil)
					}
				}
				if wr.Control != nil {
					checkControlRecord(t, r, wr.Control.KeyVersion, wr.Control.Type, wr.Control.TypeName,
						wr.Control.CoordinatorEpoch, wr.Control.MPRClusterID)
				}
			}
			if err := it.Err(); err != nil {
				t.Fatalf("records: %v", err)
			}
			if i != len(vec.Records) {
				t.Errorf("decoded %d records, want %d", i, len(vec.Records))
			}
			if err := CheckRecords(v, data, false); err != nil {
				t.Errorf("CheckRecords: %v", err)
			}
		})
	}
}

func checkControlRecord(t *testing.T, r *Record, keyVersion, typ int16, typeName string, coordinatorEpoch *int32, clusterID *string) {
	t.Helper()
	ver, ct, err := ParseControlKey(r.Key)
	if err != nil || ver != keyVersion || int16(ct) != typ || ct.String() != typeName {
		t.Errorf("control key: %d %v %v, want %d %d %s", ver, ct, err, keyVersion, typ, typeName)
	}
	val, err := DecodeControlValue(ct, r.Value)
	if err != nil {
		t.Fatalf("control value: %v", err)
	}
	switch m := val.(type) {
	case EndTxnMarker:
		if coordinatorEpoch == nil || m.CoordinatorEpoch != *coordinatorEpoch || m.Version != 0 {
			t.Errorf("marker %+v", m)
		}
	case MirrorPidReset:
		if clusterID == nil || m.SourceClusterID != *clusterID || m.Version != 0 {
			t.Errorf("mirror pid reset %+v", m)
		}
		if got := m.JSON(); got != `{"version":0,"sourceClusterId":"`+*clusterID+`"}` {
			t.Errorf("JSON = %s", got)
		}
	default:
		t.Errorf("unexpected control value %T", val)
	}
}

// TestVectorsRebuild rebuilds every vector from its decoded fields: the
// uncompressed ones byte for byte, the compressed one record for record.
func TestVectorsRebuild(t *testing.T) {
	for _, vec := range loadVectors(t) {
		t.Run(vec.Name, func(t *testing.T) {
			v, err := Check(vec.bin)
			if err != nil {
				t.Fatal(err)
			}
			spec := specOf(v)
			data, err := v.RecordData(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			recs := recordsOf(t, v, data)
			b := Builder{ExplicitOffsetDeltas: true}
			out, err := b.AppendBatch(nil, &spec, recs)
			if err != nil {
				t.Fatal(err)
			}
			if v.Compression() == CompressionNone {
				if !bytes.Equal(out, vec.bin) {
					t.Fatalf("rebuilt batch differs:\n got %x\nwant %x", out, vec.bin)
				}
				return
			}
			nv, err := Check(out)
			if err != nil {
				t.Fatal(err)
			}
			ndata, err := nv.RecordData(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ndata, data) {
				t.Fatalf("rebuilt compressed batch decodes differently")
			}
			// Everything but the length, the CRC and the compressed bytes
			// must be identical.
			if !bytes.Equal(out[:OffBatchLength], vec.bin[:OffBatchLength]) ||
				!bytes.Equal(out[OffPartitionLeaderEpoch:OffCRC], vec.bin[OffPartitionLeaderEpoch:OffCRC]) ||
				!bytes.Equal(out[OffAttributes:HeaderSize], vec.bin[OffAttributes:HeaderSize]) {
				t.Fatalf("rebuilt compressed header differs:\n got %x\nwant %x", out[:HeaderSize], vec.bin[:HeaderSize])
			}
		})
	}
}

// specOf returns the BatchSpec that reproduces v's header.
func specOf(v View) BatchSpec {
	s := BatchSpec{
		BaseOffset:           v.BaseOffset(),
		PartitionLeaderEpoch: v.PartitionLeaderEpoch(),
		Compression:          v.Compression(),
		TimestampType:        v.TimestampType(),
		Transactional:        v.IsTransactional(),
		Control:              v.IsControl(),
		ProducerID:           v.ProducerID(),
		ProducerEpoch:        v.ProducerEpoch(),
		BaseSequence:         v.BaseSequence(),
		MaxTimestamp:         v.MaxTimestamp(),
		HasMaxTimestamp:      true,
		LastOffsetDelta:      v.LastOffsetDelta(),
		HasLastOffsetDelta:   true,
	}
	if h, ok := v.DeleteHorizon(); ok {
		s.DeleteHorizon, s.HasDeleteHorizon = h, true
	}
	return s
}

// recordsOf decodes v's records into RecordSpecs with their stored
// timestamps (base + delta, even for LogAppendTime).
func recordsOf(t testing.TB, v View, data []byte) []RecordSpec {
	it := v.Records(data)
	var out []RecordSpec
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		rs := RecordSpec{OffsetDelta: r.OffsetDelta, Timestamp: v.BaseTimestamp() + r.TimestampDelta, Key: r.Key, Value: r.Value}
		hi := r.Headers()
		for h, ok := hi.Next(); ok; h, ok = hi.Next() {
			rs.Headers = append(rs.Headers, h)
		}
		out = append(out, rs)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSegmentVectorIterates walks the vectors concatenated as a segment.
func TestSegmentVectorIterates(t *testing.T) {
	vecs := loadVectors(t)
	var seg []byte
	var want []int64
	for _, v := range vecs {
		want = append(want, v.Batch.BaseOffset)
		seg = append(seg, v.bin...)
	}
	it := NewIterator(seg, 0)
	var got []int64
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		got = append(got, v.BaseOffset())
	}
	if it.Err() != nil || it.Position() != int64(len(seg)) {
		t.Fatalf("iteration ended at %d with %v", it.Position(), it.Err())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
}
