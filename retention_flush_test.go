package partlog

import (
	"context"
	"testing"
	"time"
)

// TestFlushAcrossRetention: a flush lists the segments from the one
// holding the recovery point to the active one, then fsyncs them without
// appendMu; retention (SetLogStartOffset, DeleteOldSegments) may delete
// a listed sealed segment meantime. A deleted segment needs no fsync:
// the flush must succeed and the log stay writable, not be poisoned by
// the fsync of a file that is gone.
func TestFlushAcrossRetention(t *testing.T) {
	for _, how := range []string{"SetLogStartOffset", "DeleteOldSegments"} {
		t.Run(how, func(t *testing.T) {
			o := smallOpts(t)
			o.FileDeleteDelayMs = -1
			o.RetentionMs = 1
			l, _ := openTestLog(t, o)
			b := makeBatch(t, 2, 1000, 1)
			for len(l.Segments()) < 3 {
				if _, err := l.AppendAsLeader(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			l.SetHighWatermark(l.LogEndOffset())
			second := l.Segments()[1]
			deleted := false
			l.flushed = func(base, _ int64) {
				if deleted {
					return
				}
				deleted = true
				var err error
				switch how {
				case "SetLogStartOffset":
					err = l.SetLogStartOffset(second)
				default:
					_, err = l.DeleteOldSegments(time.Now().Add(time.Hour))
				}
				if err != nil {
					t.Errorf("%s: %v", how, err)
				}
			}
			if err := l.Sync(context.Background(), l.LogEndOffset()); err != nil {
				t.Fatalf("Sync across %s: %v", how, err)
			}
			if !deleted || l.Segments()[0] == 0 {
				t.Fatalf("nothing deleted during the flush: segments %v", l.Segments())
			}
			l.flushed = nil
			if _, err := l.AppendAsLeader(b, 0); err != nil {
				t.Fatalf("append after the flush: %v", err)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
