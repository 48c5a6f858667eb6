package batch

import (
	"bytes"
	"testing"
)

// FuzzWalker: on any bytes the walker never reads out of bounds and each
// batch it returns lies inside the region, one after the other; on the
// prefix an Iterator validated it returns exactly the Iterator's batches.
func FuzzWalker(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		w := NewWalker(data)
		end := 0
		for v, ok := w.Next(); ok; v, ok = w.Next() {
			if len(v) < HeaderSize || end+len(v) > len(data) || !bytes.Equal(v, data[end:end+len(v)]) {
				t.Fatalf("batch of %d bytes at %d is not the region's next", len(v), end)
			}
			end += len(v)
		}
		if w.Offset() != end {
			t.Fatalf("offset %d, walked to %d", w.Offset(), end)
		}
		it := NewIterator(data, 0)
		var checked []View
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			checked = append(checked, v)
		}
		w = NewWalker(data[:it.Offset()])
		for i, c := range checked {
			v, ok := w.Next()
			if !ok || !bytes.Equal(v, c) {
				t.Fatalf("batch %d: walker %v %d bytes, iterator %d bytes", i, ok, len(v), len(c))
			}
		}
		if _, ok := w.Next(); ok {
			t.Fatal("the walker found a batch after the validated ones")
		}
	})
}

// TestControlRecordIsTheOneReader: ControlRecord reads each control type
// the builder writes, IsBarrier holds for type 7 only, and a data batch or
// a control batch without records is an error, not a type.
func TestControlRecordIsTheOneReader(t *testing.T) {
	abort := AppendEndTxnMarkerBatch(nil, ControlSpec{ProducerID: 5, ProducerEpoch: 1}, false, 3)
	barrier := AppendMirrorPidResetBatch(nil, ControlSpec{}, "AAAAAAAAAAAAAAAAAAAAAQ")
	for _, tc := range []struct {
		name    string
		b       []byte
		want    ControlType
		barrier bool
	}{
		{"abort", abort, ControlAbort, false},
		{"barrier", barrier, ControlMirrorPidReset, true},
	} {
		v, err := Check(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		var r Record
		got, _, err := v.ControlRecord(nil, &r)
		if err != nil || got != tc.want || v.IsBarrier() != tc.barrier {
			t.Errorf("%s: type %v, %v, IsBarrier %v", tc.name, got, err, v.IsBarrier())
		}
	}
	var b Builder
	spec := NewBatchSpec(0)
	data, err := b.AppendBatch(nil, &spec, []RecordSpec{{Timestamp: 1, Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	if _, _, err := View(data).ControlRecord(nil, &r); !IsCorrupt(err) || View(data).IsBarrier() {
		t.Errorf("data batch: %v", err)
	}
}
