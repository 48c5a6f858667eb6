package partlog

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
)

// TestValidateWalk: validate walks the batches of an append with
// batch.CheckAt itself (no Iterator) and stops after the batch that ends
// the records. A failure in any batch but the first still refuses the
// whole append, names that batch's position in the request, and writes
// nothing; a request of several good batches is appended whole.
func TestValidateWalk(t *testing.T) {
	first := makeBatch(t, 3, 20, 1000)
	n := len(first)
	at := " at " + strconv.Itoa(n) // the second batch's position in errors
	join := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	second := func(f func(v batch.View), fixCRC bool) []byte {
		b := makeBatch(t, 2, 30, 2000)
		if fixCRC {
			return edited(b, f)
		}
		f(batch.View(b))
		return b
	}
	cases := []struct {
		name     string
		records  []byte
		follower bool
		want     error  // nil: accepted
		where    string // in the error message
	}{
		{"two good batches", join(first, makeBatch(t, 2, 30, 2000)), false, nil, ""},
		{"three good batches", join(first, first, first), false, nil, ""},
		{"crc broken in the second", join(first, second(func(v batch.View) { v[len(v)-1] ^= 1 }, false)), false,
			ErrInvalidRecords, "byte " + strconv.Itoa(n)},
		{"second batch torn", join(first, makeBatch(t, 2, 30, 2000)[:40]), false, ErrInvalidRecords, "position " + strconv.Itoa(n)},
		{"control batch second", join(first, second(func(v batch.View) {
			binary.BigEndian.PutUint16(v[batch.OffAttributes:], uint16(v.Attributes())|0x20)
		}, true)), false, ErrPolicy, at},
		{"second batch without records", join(first, second(func(v batch.View) {
			binary.BigEndian.PutUint32(v[batch.OffRecordsCount:], 0)
		}, true)), false, ErrPolicy, at},
		{"follower, offsets increasing", join(makeFollowerBatch(t, 0, 1, 3, 20, 1000), makeFollowerBatch(t, 3, 1, 2, 30, 2000)), true, nil, ""},
		{"follower, second batch behind the first", join(makeFollowerBatch(t, 0, 1, 3, 20, 1000), makeFollowerBatch(t, 2, 1, 2, 30, 2000)), true,
			ErrUnexpectedOffset, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := openTestLog(t, smallOpts(t))
			var info AppendInfo
			var err error
			if c.follower {
				info, err = l.AppendAsFollower(c.records)
			} else {
				info, err = l.AppendAsLeader(c.records, 1)
			}
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				batches := 0
				for p := 0; p < len(c.records); p += batch.View(c.records[p:]).Size() {
					batches++
				}
				if info.Batches != batches || info.Bytes != len(c.records) || info.FirstOffset != 0 {
					t.Fatalf("info %+v, want %d batches of %d bytes from 0", info, batches, len(c.records))
				}
				if l.LogEndOffset() != info.LastOffset+1 {
					t.Fatalf("log end %d after last offset %d", l.LogEndOffset(), info.LastOffset)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.where) {
				t.Fatalf("err %q does not name %q", err, c.where)
			}
			if l.LogEndOffset() != 0 {
				t.Fatalf("log end %d after a refused append", l.LogEndOffset())
			}
		})
	}
}
