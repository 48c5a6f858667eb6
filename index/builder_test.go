package index

import (
	"reflect"
	"testing"
)

// TestBuilderPerBatchRule: an offset entry for each batch starting more
// than interval bytes after the last indexed one (never the first batch),
// a time entry beside it when the largest timestamp grew, and a final
// time entry for the largest timestamp.
func TestBuilderPerBatchRule(t *testing.T) {
	type batch struct{ pos, last, ts int64 }
	cases := []struct {
		name     string
		interval int64
		batches  []batch
		offsets  []OffsetEntry
		times    []TimeEntry
	}{
		{name: "empty", interval: 4096},
		{name: "one batch: only the final time entry", interval: 0,
			batches: []batch{{0, 104, 7}},
			times:   []TimeEntry{{Timestamp: 7, Offset: 104}}},
		{name: "every batch but the first", interval: 0,
			batches: []batch{{0, 101, 5}, {80, 103, 9}, {160, 110, 8}},
			offsets: []OffsetEntry{{Offset: 103, Position: 80}, {Offset: 110, Position: 160}},
			times:   []TimeEntry{{Timestamp: 9, Offset: 103}}},
		{name: "interval counts bytes from the last indexed batch", interval: 100,
			batches: []batch{{0, 100, 1}, {60, 101, 2}, {120, 102, 3}, {200, 103, 4}, {260, 104, 5}},
			offsets: []OffsetEntry{{Offset: 102, Position: 120}, {Offset: 104, Position: 260}},
			times:   []TimeEntry{{Timestamp: 3, Offset: 102}, {Timestamp: 5, Offset: 104}}},
		{name: "no timestamps: no time entry", interval: 0,
			batches: []batch{{0, 100, -1}, {70, 101, -1}},
			offsets: []OffsetEntry{{Offset: 101, Position: 70}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder(100, c.interval)
			for _, x := range c.batches {
				b.Add(x.pos, x.last, x.ts)
			}
			offs, times := b.Finish()
			gotO, err := DecodeOffsetIndex(offs, 100)
			if err != nil {
				t.Fatal(err)
			}
			gotT, err := DecodeTimeIndex(times, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(gotO) == 0 {
				gotO = nil
			}
			if len(gotT) == 0 {
				gotT = nil
			}
			if !reflect.DeepEqual(gotO, c.offsets) || !reflect.DeepEqual(gotT, c.times) {
				t.Fatalf("offsets %v times %v, want %v %v", gotO, gotT, c.offsets, c.times)
			}
		})
	}
}
