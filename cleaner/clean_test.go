package cleaner

import (
	"encoding/binary"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/testutil"
)

// compressedMarker builds an abort marker whose records section is
// compressed with c (the builder refuses compressed control batches, as
// Kafka's writers do, but a log read from elsewhere may hold one).
func compressedMarker(t testing.TB, c batch.Compression) batch.View {
	t.Helper()
	spec := batch.NewBatchSpec(10)
	spec.Compression = c
	key := batch.AppendControlKey(nil, batch.ControlAbort)
	value := batch.AppendEndTxnMarker(nil, 3)
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Key: key, Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	attrs := binary.BigEndian.Uint16(out[batch.OffAttributes:])
	binary.BigEndian.PutUint16(out[batch.OffAttributes:], attrs|batch.AttrControl|batch.AttrTransactional)
	v := batch.View(out)
	binary.BigEndian.PutUint32(out[batch.OffCRC:], v.ComputeCRC())
	return v
}

// TestControlTypeKeepsScratch: reading the type of a compressed control
// batch decompresses into the worker's scratch and keeps it grown, so a
// pass over many markers allocates for the first one only.
func TestControlTypeKeepsScratch(t *testing.T) {
	for _, c := range []batch.Compression{batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd} {
		t.Run(c.String(), func(t *testing.T) {
			v := compressedMarker(t, c)
			w := newTestWorker(t, 1<<20)
			typ, ok, err := w.controlType(v)
			if err != nil || !ok || typ != batch.ControlAbort {
				t.Fatalf("controlType = %v, %v, %v; want abort", typ, ok, err)
			}
			if cap(w.scratch) == 0 {
				t.Fatal("the decompressed records were not kept as the worker's scratch")
			}
			allocs := testing.AllocsPerRun(100, func() {
				if typ, _, err := w.controlType(v); err != nil || typ != batch.ControlAbort {
					t.Fatalf("controlType = %v, %v", typ, err)
				}
			})
			// What the codec itself allocates into a buffer already
			// large enough (gzip's reader state): the reading adds
			// nothing to it.
			buf := make([]byte, 0, 1<<10)
			codec := testing.AllocsPerRun(100, func() {
				if _, err := v.RecordData(buf, maxDecompressed); err != nil {
					t.Fatal(err)
				}
			})
			// Under -race sync.Pool drops items at random, so a
			// pooling codec's count varies between the two runs.
			if allocs != codec && !testutil.Race {
				t.Fatalf("reading a control type allocates %v times, decompressing alone %v", allocs, codec)
			}
		})
	}
}
