package partlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
)

// headerMax returns b (one batch) with its header's max timestamp set to
// ts and its CRC made valid again: a producer that fills the header
// wrong.
func headerMax(b []byte, ts int64) []byte {
	return edited(b, func(v batch.View) { binary.BigEndian.PutUint64(v[batch.OffMaxTimestamp:], uint64(ts)) })
}

// TestLeaderRecordRules: a leader walks every record of a client's batch
// as Kafka's LogValidator does. The stored batch's max timestamp is its
// records' largest (header and CRC rewritten only when the producer's
// differs; the caller's bytes are never written), every record's
// timestamp is held to the window, and a malformed record under a valid
// CRC is refused. One batch takes appendLeader's path, two the general
// one; both must agree.
func TestLeaderRecordRules(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := now.UnixMilli()
	gz := func(n int, ts int64) []byte {
		var bld batch.Builder
		spec := batch.NewBatchSpec(0)
		spec.Compression = batch.CompressionGzip
		recs := make([]batch.RecordSpec, n)
		for i := range recs {
			recs[i] = batch.RecordSpec{Timestamp: ts + int64(i), Key: []byte{'k', byte(i)}, Value: []byte("v")}
		}
		out, err := bld.AppendBatch(nil, &spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	build := func(ts ...int64) []byte { // one record a timestamp, the first's as the base
		var bld batch.Builder
		spec := batch.NewBatchSpec(0)
		recs := make([]batch.RecordSpec, len(ts))
		for i := range recs {
			recs[i] = batch.RecordSpec{Timestamp: ts[i], Key: []byte{'k'}, Value: []byte("v")}
		}
		out, err := bld.AppendBatch(nil, &spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cases := []struct {
		name    string
		records []byte
		opts    func(o *Options)
		wantMax int64 // the stored batch's max timestamp
		err     error
		// badRecord: the index of the record outside the window
		badRecord int
	}{
		{"header right: stored as sent", makeBatch(t, 3, 10, ms), nil, ms + 2, nil, 0},
		{"header below the records", headerMax(makeBatch(t, 3, 10, ms), ms-7*24*3_600_000), nil, ms + 2, nil, 0},
		{"header above the records", headerMax(makeBatch(t, 3, 10, ms), ms+3_600_000), nil, ms + 2, nil, 0},
		{"header without timestamp", headerMax(makeBatch(t, 2, 10, ms), batch.NoTimestamp), nil, ms + 1, nil, 0},
		{"records without timestamps", headerMax(makeBatch(t, 2, 10, batch.NoTimestamp-1), ms), nil, batch.NoTimestamp, nil, 0},
		{"LogAppendTime claimed on a CreateTime topic", edited(makeBatch(t, 2, 10, ms), func(v batch.View) {
			binary.BigEndian.PutUint16(v[batch.OffAttributes:], uint16(batch.AttrTimestampType))
		}), nil, ms + 1, nil, 0},
		{"compressed, header below", headerMax(gz(4, ms), ms), nil, ms + 3, nil, 0},
		{"a record past the window, header inside", headerMax(makeBatch(t, 3, 10, ms+3_600_000-1), ms),
			func(o *Options) { o.MessageTimestampAfterMaxMs = 3_600_000 }, 0, ErrInvalidTimestamp, 2},
		{"a record before the window, header inside", build(ms, ms-1000, ms),
			func(o *Options) { o.MessageTimestampBeforeMaxMs = 500 }, 0, ErrInvalidTimestamp, 1},
		{"malformed record under a valid CRC", edited(makeBatch(t, 3, 10, ms), func(v batch.View) { v[batch.HeaderSize] = 0x7f }),
			nil, 0, ErrPolicy, 0},
		{"base offset 5", edited(makeBatch(t, 2, 10, ms), func(v batch.View) { v.SetBaseOffset(5) }), nil, 0, ErrPolicy, 0},
		{"record count above the offset range", edited(makeBatch(t, 2, 10, ms), func(v batch.View) {
			binary.BigEndian.PutUint32(v[batch.OffRecordsCount:], 3)
		}), nil, 0, ErrPolicy, 0},
		{"record offset deltas not contiguous", edited(makeBatch(t, 3, 10, ms), func(v batch.View) {
			v[batch.HeaderSize+3] = 4 // the first record's offset delta varint: 2
		}), nil, 0, ErrPolicy, 0},
	}
	for _, c := range cases {
		for _, two := range []bool{false, true} {
			name := c.name
			if two {
				name += ", behind another batch"
			}
			t.Run(name, func(t *testing.T) {
				o := smallOpts(t)
				o.Now = func() time.Time { return now }
				if c.opts != nil {
					c.opts(o)
				}
				l, _ := openTestLog(t, o)
				in := bytes.Clone(c.records)
				if two {
					in = append(makeBatch(t, 1, 10, ms), in...)
				}
				sent := bytes.Clone(in)
				info, err := l.AppendAsLeader(in, 1)
				if !bytes.Equal(in, sent) {
					t.Fatal("the caller's records were written")
				}
				if c.err != nil {
					if !errors.Is(err, c.err) || l.LogEndOffset() != 0 {
						t.Fatalf("append: %v, log end %d; want %v and nothing appended", err, l.LogEndOffset(), c.err)
					}
					var re *RecordErrors
					if c.err == ErrInvalidTimestamp && (!errors.As(err, &re) || len(re.Records) != 1 || re.Records[0].Index != c.badRecord) {
						t.Fatalf("append: %v; want record %d named (KIP-467)", err, c.badRecord)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if info.MaxTimestamp < c.wantMax {
					t.Errorf("AppendInfo.MaxTimestamp %d, want at least %d", info.MaxTimestamp, c.wantMax)
				}
				rv, err := l.Read(info.LastOffset, 1<<20, l.LogEndOffset())
				if err != nil {
					t.Fatal(err)
				}
				defer rv.Release()
				stored := batch.View(rv.Records)
				for {
					n := int(binary.BigEndian.Uint32(stored[batch.OffBatchLength:])) + 12
					if n == len(stored) {
						break
					}
					stored = stored[n:]
				}
				var h batch.BatchHeader
				if _, err := batch.CheckAt(stored, 0, &h); err != nil {
					t.Fatalf("stored batch: %v", err)
				}
				if h.MaxTimestamp != c.wantMax || h.Attributes&batch.AttrTimestampType != 0 {
					t.Errorf("stored max timestamp %d, attributes %#x; want %d, CreateTime", h.MaxTimestamp, h.Attributes, c.wantMax)
				}
				last := c.records[batch.OffCRC:]
				if c.wantMax == batch.View(c.records).MaxTimestamp() && c.records[batch.OffAttributes+1]&byte(batch.AttrTimestampType) == 0 &&
					!bytes.Equal(stored[batch.OffCRC:], last) {
					t.Error("a batch whose header was right was rewritten")
				}
				if c.wantMax == batch.NoTimestamp {
					return
				}
				// ListOffsets of the largest timestamp finds the batch.
				r, found, err := l.OffsetForTimestamp(c.wantMax)
				if err != nil || !found || r.Offset > info.LastOffset || r.Offset < info.LastOffset-int64(h.LastOffsetDelta) {
					t.Errorf("OffsetForTimestamp(%d) = %+v, %v, %v; want an offset of the batch ending at %d", c.wantMax, r, found, err, info.LastOffset)
				}
			})
		}
	}
}
