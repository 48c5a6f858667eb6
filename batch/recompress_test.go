package batch

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestAppendRecompressed: every codec to every codec keeps the header
// (but for the codec bits, length and CRC) and the records byte for byte,
// with a valid CRC; bytes after dst's start are untouched.
func TestAppendRecompressed(t *testing.T) {
	codecs := []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	recs := []RecordSpec{
		{Timestamp: 1_700_000_000_000, Key: []byte("k1"), Value: bytes.Repeat([]byte("value "), 40),
			Headers: []Header{{Key: []byte("h"), Value: []byte("v")}}},
		{Timestamp: 1_700_000_000_007, Value: nil},
		{Timestamp: 1_699_999_999_990, Key: []byte("k3"), Value: []byte("x")},
	}
	var bld Builder
	for _, from := range codecs {
		for _, to := range codecs {
			t.Run(fmt.Sprintf("%s->%s", from, to), func(t *testing.T) {
				spec := NewBatchSpec(0)
				spec.Compression = from
				spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = 42, 3, 17
				spec.Transactional = true
				spec.PartitionLeaderEpoch = 9
				src, err := bld.AppendBatch(nil, &spec, recs)
				if err != nil {
					t.Fatal(err)
				}
				prefix := []byte("keep")
				out, err := bld.AppendRecompressed(append([]byte(nil), prefix...), View(src), to, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out[:len(prefix)], prefix) {
					t.Fatalf("dst's bytes changed")
				}
				got, err := Check(out[len(prefix):])
				if err != nil {
					t.Fatalf("recompressed batch: %v", err)
				}
				if got.Compression() != to {
					t.Fatalf("codec %s, want %s", got.Compression(), to)
				}
				var gh, wh BatchHeader
				got.DecodeHeader(&gh)
				View(src).DecodeHeader(&wh)
				wh.BatchLength, wh.CRC, wh.Attributes = gh.BatchLength, gh.CRC, wh.Attributes&^AttrCompressionMask|int16(to)
				if gh != wh {
					t.Fatalf("header %+v, want %+v", gh, wh)
				}
				gd, err := got.RecordData(nil, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				wd, err := View(src).RecordData(nil, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(gd, wd) {
					t.Fatalf("records differ after recompression")
				}
				if from == to && to == CompressionNone && !bytes.Equal(out[len(prefix):], src) {
					t.Fatalf("uncompressed to uncompressed changed the batch")
				}
			})
		}
	}
}

// TestAppendRecompressedErrors: a records section that does not
// decompress, or one over the limit, is ErrCorrupt and leaves dst as it
// was; an unknown target codec is ErrBuild.
func TestAppendRecompressedErrors(t *testing.T) {
	var bld Builder
	spec := NewBatchSpec(0)
	spec.Compression = CompressionGzip
	src, err := bld.AppendBatch(nil, &spec, []RecordSpec{{Value: bytes.Repeat([]byte("a"), 4096)}})
	if err != nil {
		t.Fatal(err)
	}
	dst := []byte("dst")
	if out, err := bld.AppendRecompressed(dst, View(src), CompressionLZ4, 100); !errors.Is(err, ErrCorrupt) || string(out) != "dst" {
		t.Fatalf("over the limit: %q, %v; want dst unchanged and ErrCorrupt", out, err)
	}
	bad := append([]byte(nil), src...)
	for i := HeaderSize; i < len(bad); i++ {
		bad[i] ^= 0x5a
	}
	if out, err := bld.AppendRecompressed(dst, View(bad), CompressionLZ4, 1<<20); !errors.Is(err, ErrCorrupt) || string(out) != "dst" {
		t.Fatalf("garbage records: %q, %v; want dst unchanged and ErrCorrupt", out, err)
	}
	if out, err := bld.AppendRecompressed(dst, View(src), Compression(6), 1<<20); !errors.Is(err, ErrBuild) || string(out) != "dst" {
		t.Fatalf("codec 6: %q, %v; want dst unchanged and ErrBuild", out, err)
	}
}
