package partlog

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// writeKeyed appends rounds*keys records of 100-byte values, every key
// once a round, in batches of 50, and rolls so that all of it is
// cleanable.
func writeKeyed(t *testing.T, l *Log, clock int64, keys, rounds int) {
	t.Helper()
	val := strings.Repeat("v", 96)
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k += 50 {
			var pairs []string
			for i := k; i < min(k+50, keys); i++ {
				pairs = append(pairs, fmt.Sprintf("key-%06d=%s%04d", i, val, r))
			}
			psLeader(t, l, kvBatch(t, clock, pairs...))
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
}

// TestCleanerMapBytesBoundsRound: a Cleaner's MapBytes
// (log.cleaner.dedupe.buffer.size) bounds the keys one round takes; a
// log with more keys than that is cleaned in several rounds, each ending
// where its map filled, and ends with the last record of every key, as
// one large map would leave it.
func TestCleanerMapBytesBoundsRound(t *testing.T) {
	clock := int64(1_700_000_000_000)
	opts := compactOpts(t, &clock)
	opts.SegmentBytes = 128 << 10
	const mapBytes = 24 << 10 // the smallest map: 1024 slots, 921 keys
	c := NewCleaner(CleanerOptions{MapBytes: mapBytes})
	t.Cleanup(func() { _ = c.Close() })
	opts.Cleaner = c
	l, _ := openTestLog(t, opts)
	const keys = 2000
	writeKeyed(t, l, clock, keys, 2)
	end := l.LogEndOffset()
	rounds := 0
	for from := int64(0); from < end-1; rounds++ {
		res, err := l.Compact(time.UnixMilli(clock))
		if err != nil {
			t.Fatal(err)
		}
		if res.Keys > mapBytes/24 || res.Utilization > 0.91 {
			t.Fatalf("round %d: %d keys, utilization %.2f in a map of %d bytes", rounds, res.Keys, res.Utilization, mapBytes)
		}
		if res.EndOffset <= from {
			t.Fatalf("round %d made no progress: %+v", rounds, res)
		}
		from = res.EndOffset
		if rounds > 20 {
			t.Fatal("too many rounds")
		}
	}
	if rounds < 2*keys/1024 {
		t.Fatalf("%d rounds for %d dirty records in a map of 921 keys", rounds, 2*keys)
	}
	recs := readRecords(t, l)
	if len(recs) != keys {
		t.Fatalf("%d records after %d rounds, want one per key (%d)", len(recs), rounds, keys)
	}
	for _, r := range recs {
		if !strings.HasSuffix(r.value, "0001") {
			t.Fatalf("key %s kept %q, not its last value", r.key, r.value)
		}
	}
}

// TestCleanerIOThrottle: a Cleaner's IOBytesPerSecond
// (log.cleaner.io.max.bytes.per.second) bounds how fast a cleaning reads:
// the same log cleaned unthrottled and throttled, the throttled cleaning
// takes at least its bytes over the rate (less the throttle's burst).
func TestCleanerIOThrottle(t *testing.T) {
	if testing.Short() {
		t.Skip("times a throttled cleaning (about 1.5 s)")
	}
	clean := func(rate float64) (CleanResult, time.Duration) {
		clock := int64(1_700_000_000_000)
		opts := compactOpts(t, &clock)
		opts.SegmentBytes = 1 << 20
		c := NewCleaner(CleanerOptions{MapBytes: 8 << 20, IOBytesPerSecond: rate})
		t.Cleanup(func() { _ = c.Close() })
		opts.Cleaner = c
		l, _ := openTestLog(t, opts)
		writeKeyed(t, l, clock, 4000, 3) // about 1.6 MiB
		start := time.Now()
		res, err := l.Compact(time.UnixMilli(clock))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(readRecords(t, l)); n != 4000 {
			t.Fatalf("%d records after cleaning, want 4000", n)
		}
		return res, time.Since(start)
	}
	free, freeTime := clean(0)
	const rate = 2 << 20
	res, took := clean(rate)
	if res.BytesRead != free.BytesRead || res.BytesWritten != free.BytesWritten {
		t.Fatalf("throttled cleaning read %d wrote %d, unthrottled %d %d", res.BytesRead, res.BytesWritten, free.BytesRead, free.BytesWritten)
	}
	// The throttle is told of every MiB of work (map building and
	// cleaning) and lets a tenth of a second's worth through unwaited.
	work := (res.MapBytesRead + res.BytesRead) &^ (1<<20 - 1)
	least := time.Duration(float64(work-rate/10)/rate*float64(time.Second)) - 50*time.Millisecond
	if least < 500*time.Millisecond {
		t.Fatalf("the log is too small to time the throttle: %d bytes of work", work)
	}
	if took < least {
		t.Fatalf("%d bytes of work at %d B/s took %v, want at least %v (unthrottled %v)", work, rate, took, least, freeTime)
	}
	t.Logf("%d bytes of work: %v throttled at 2 MiB/s, %v unthrottled", res.MapBytesRead+res.BytesRead, took, freeTime)
}
