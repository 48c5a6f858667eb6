package partlog

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
)

func fixedClock(ms int64) func() time.Time { return func() time.Time { return time.UnixMilli(ms) } }

// TestLogAppendTime: the leader stamps each batch with its clock (max
// timestamp, attribute bit, CRC recomputed), leaves the caller's bytes
// alone, and the stamped batches are valid, read back with the append
// time for every record, found by timestamp and survive a reopen.
func TestLogAppendTime(t *testing.T) {
	const now = 1_800_000_000_000
	o := smallOpts(t)
	o.MessageTimestampType = LogAppendTime
	o.Now = fixedClock(now)
	l, dir := openTestLog(t, o)
	plain := tsBatch(t, batch.CompressionNone, 1000, 1001, 1002)
	zipped := tsBatch(t, batch.CompressionGzip, 2000, 1999)
	src := append(bytes.Clone(plain), zipped...)
	orig := bytes.Clone(src)
	info, err := l.AppendAsLeader(src, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, orig) {
		t.Fatal("caller's bytes modified")
	}
	if info.MaxTimestamp != now {
		t.Fatalf("AppendInfo.MaxTimestamp %d", info.MaxTimestamp)
	}
	check := func(l *Log, what string) {
		v, err := l.Read(0, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		it := batch.NewIterator(v.Records, 0)
		n := 0
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			n++
			if b.TimestampType() != batch.LogAppendTime || b.MaxTimestamp() != now || b.PartitionLeaderEpoch() != 3 {
				t.Fatalf("%s: batch %d: type %v max %d epoch %d", what, n, b.TimestampType(), b.MaxTimestamp(), b.PartitionLeaderEpoch())
			}
			data, err := b.RecordData(nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			ri := b.Records(data)
			for r, ok := ri.Next(); ok; r, ok = ri.Next() {
				if r.Timestamp != now {
					t.Fatalf("%s: record %d timestamp %d", what, r.Offset, r.Timestamp)
				}
			}
		}
		if err := it.Err(); err != nil || n != 2 {
			t.Fatalf("%s: %d batches, %v", what, n, err)
		}
		r, ok, err := l.OffsetForTimestamp(now)
		if err != nil || !ok || r.Offset != 0 || r.Timestamp != now {
			t.Fatalf("%s: OffsetForTimestamp(now) = %+v %v %v", what, r, ok, err)
		}
		if r, ok, _ := l.OffsetForTimestamp(1500); !ok || r.Offset != 0 {
			t.Fatalf("%s: a CreateTime timestamp finds %+v %v", what, r, ok)
		}
	}
	check(l, "appended")
	// Full recovery (no clean marker) re-checks every CRC.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if rep := l2.RecoveryReport(); rep == nil || l2.LogEndOffset() != 5 {
		t.Fatalf("reopen: report %v LEO %d", rep, l2.LogEndOffset())
	}
	check(l2, "recovered")
	if n := testing.AllocsPerRun(100, func() {
		if _, err := l2.AppendAsLeader(plain, 3); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("LogAppendTime append allocates %v times (buffer reused)", n)
	}
}

// TestTimestampWindow: message.timestamp.before.max.ms / after.max.ms on
// CreateTime topics.
func TestTimestampWindow(t *testing.T) {
	const now = 1_800_000_000_000
	for _, c := range []struct {
		name          string
		typ           TimestampType
		before, after int64
		tss           []int64
		want          error
	}{
		{"inside", CreateTime, 1000, 1000, []int64{now - 1000, now + 1000}, nil},
		{"too old", CreateTime, 1000, 0, []int64{now - 1001, now}, ErrInvalidTimestamp},
		{"too new", CreateTime, 0, 1000, []int64{now, now + 1001}, ErrInvalidTimestamp},
		{"unbounded before", CreateTime, 0, 1000, []int64{0, 1}, nil},
		{"unbounded after", CreateTime, 1000, 0, []int64{now, now + 1<<40}, nil},
		{"no timestamps", CreateTime, 1, 1, []int64{-1, -1}, nil},
		{"LogAppendTime ignores the window", LogAppendTime, 1, 1, []int64{5, 6}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := smallOpts(t)
			o.MessageTimestampType = c.typ
			o.MessageTimestampBeforeMaxMs, o.MessageTimestampAfterMaxMs = c.before, c.after
			o.Now = fixedClock(now)
			l, _ := openTestLog(t, o)
			_, err := l.AppendAsLeader(tsBatch(t, batch.CompressionNone, c.tss...), 0)
			if !errors.Is(err, c.want) {
				t.Fatalf("append: %v, want %v", err, c.want)
			}
			if c.want != nil && (l.LogEndOffset() != 0 || KafkaErrorCode(err) != 32) {
				t.Fatalf("LEO %d code %d", l.LogEndOffset(), KafkaErrorCode(err))
			}
		})
	}
	o := smallOpts(t)
	o.MessageTimestampType = 7
	if _, err := Open(t.TempDir(), o); err == nil {
		t.Fatal("unknown timestamp type accepted")
	}
}

// BenchmarkAppendTimestampType compares a CreateTime append (zero-copy,
// no CRC), one with the timestamp window checked, and a LogAppendTime
// append (copy, stamp, CRC recomputed, second validating walk).
func BenchmarkAppendTimestampType(b *testing.B) {
	for _, c := range []struct {
		name   string
		typ    TimestampType
		window int64
	}{{"CreateTime", CreateTime, 0}, {"CreateTime+window", CreateTime, 1 << 40}, {"LogAppendTime", LogAppendTime, 0}} {
		b.Run(c.name, func(b *testing.B) {
			o := smallOpts(b)
			o.SegmentBytes = 256 << 20
			o.MaxIndexBytes = 4 << 20
			o.MessageTimestampType = c.typ
			o.MessageTimestampBeforeMaxMs, o.MessageTimestampAfterMaxMs = c.window, c.window
			l, _ := openTestLog(b, o)
			src := makeBatch(b, 10, 100, time.Now().UnixMilli())
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.AppendAsLeader(src, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
