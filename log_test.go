package partlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/partlog/partlog/batch"
)

func TestAppendReadBack(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	const batches = 300
	var sent [][]byte
	for i := 0; i < batches; i++ {
		b := makeBatch(t, 1+i%5, 100+i%300, 1700000000000+int64(i))
		orig := bytes.Clone(b)
		info, err := l.AppendAsLeader(b, 3)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if !bytes.Equal(b, orig) {
			t.Fatal("AppendAsLeader modified the caller's bytes")
		}
		if info.Batches != 1 || info.LastOffset-info.FirstOffset+1 != int64(1+i%5) {
			t.Fatalf("append %d: info %+v", i, info)
		}
		sent = append(sent, b)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("expected several segments, got %v", l.Segments())
	}
	// Read every offset back: the batch that holds it comes first, with
	// the assigned offsets and epoch and the sender's bytes otherwise.
	offset := int64(0)
	for i, want := range sent {
		n := int64(batch.View(want).RecordsCount())
		for o := offset; o < offset+n; o++ {
			v, err := l.Read(o, 1, l.LogEndOffset())
			if err != nil {
				t.Fatal(err)
			}
			got, err := batch.Check(v.Records)
			if err != nil {
				t.Fatalf("offset %d: %v", o, err)
			}
			if got.BaseOffset() != offset || got.PartitionLeaderEpoch() != 3 {
				t.Fatalf("offset %d (batch %d): base %d epoch %d", o, i, got.BaseOffset(), got.PartitionLeaderEpoch())
			}
			if !bytes.Equal(got[batch.OffMagic:], want[batch.OffMagic:]) || !bytes.Equal(got[8:12], want[8:12]) {
				t.Fatalf("offset %d: bytes differ from what was sent", o)
			}
			v.Release()
		}
		offset += n
	}
	if l.LogEndOffset() != offset {
		t.Fatalf("LEO %d, want %d", l.LogEndOffset(), offset)
	}
}

func TestReadBounds(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	for i := 0; i < 10; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 50, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	// upTo excludes batches whose last offset reaches it.
	v, err := l.Read(0, 1<<20, 5)
	if err != nil {
		t.Fatal(err)
	}
	it := batch.NewIterator(v.Records, 0)
	var last int64 = -1
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		last = b.LastOffset()
	}
	v.Release()
	if last != 3 {
		t.Fatalf("read up to 5 ended at offset %d, want 3", last)
	}
	// At least one batch even when maxBytes is tiny.
	v, _ = l.Read(4, 1, 100)
	if b, err := batch.Check(v.Records); err != nil || b.BaseOffset() != 4 || len(v.Records) != len(b) {
		t.Fatalf("min one batch: %v", err)
	}
	v.Release()
	// Inside a batch: the batch holding the offset.
	v, _ = l.Read(5, 1, 100)
	if b, _ := batch.Check(v.Records); b.BaseOffset() != 4 {
		t.Fatalf("read at 5 starts at %d", b.BaseOffset())
	}
	v.Release()
	// At the end: empty.
	v, err = l.Read(20, 100, 100)
	if err != nil || len(v.Records) != 0 {
		t.Fatalf("read at LEO: %v %d", err, len(v.Records))
	}
	v.Release()
	for _, o := range []int64{-1, 21} {
		if _, err := l.Read(o, 100, 100); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read %d: %v", o, err)
		}
	}
}
