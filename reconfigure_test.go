package partlog

import (
	"errors"
	"testing"
	"time"
)

// TestReconfigure: a changed topic setting applies from the next append,
// roll or retention pass; a smaller segment size rolls an active segment
// already past it; settings Open refuses change nothing; a closed log
// refuses.
func TestReconfigure(t *testing.T) {
	o := smallOpts(t)
	o.FileDeleteDelayMs = -1
	l, _ := openTestLog(t, o)
	ts := time.Now().UnixMilli()
	for range 4 {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 100, ts), 0); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	small := *o
	small.MaxBatchBytes = 100
	if err := l.Reconfigure(&small); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(makeBatch(t, 2, 100, ts), 0); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("append over the new max.message.bytes: %v", err)
	}
	bad := *o
	bad.SegmentBytes = 5
	if err := l.Reconfigure(&bad); err == nil {
		t.Fatal("SegmentBytes 5 accepted")
	}
	if _, err := l.AppendAsLeader(makeBatch(t, 2, 100, ts), 0); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("a refused Reconfigure changed the settings: %v", err)
	}
	roll := *o
	roll.SegmentBytes = 300 // below the active segment's size
	if err := l.Reconfigure(&roll); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("%d segments after a smaller segment size, want the active rolled (2)", n)
	}
	gone := *o
	gone.SegmentBytes, gone.RetentionMs = 300, Zero
	if err := l.Reconfigure(&gone); err != nil {
		t.Fatal(err)
	}
	n, err := l.DeleteOldSegments(time.Now().Add(time.Second))
	if err != nil || n != 1 || l.LogStartOffset() != 8 {
		t.Fatalf("retention after Reconfigure: %d deleted (%v), log start %d", n, err, l.LogStartOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Reconfigure(o); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reconfigure of a closed log: %v", err)
	}
}
