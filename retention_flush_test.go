package partlog

import (
	"context"
	"errors"
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

// TestSyncAcrossTruncation: a caller waiting in Sync for offsets a
// truncation then removed kept starting flushes (its offset above the
// log end, the recovery point never reaching it) until new appends
// passed it, and then returned nil for bytes that were not its own. It
// gets ErrTruncated; a truncation above its offset leaves it waiting for
// its own bytes, which are still there.
func TestSyncAcrossTruncation(t *testing.T) {
	for _, c := range []struct {
		name    string
		cut     func(l *Log) error
		refill  bool
		wantErr bool
	}{
		{"below, log end under the offset", func(l *Log) error { return l.TruncateTo(2) }, false, true},
		{"below, refilled past the offset", func(l *Log) error { return l.TruncateTo(2) }, true, true},
		{"fully", func(l *Log) error { return l.TruncateFullyAndStartAt(100) }, false, true},
		{"above the offset", func(l *Log) error { return l.TruncateTo(8) }, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := openTestLog(t, smallOpts(t))
			b := makeBatch(t, 2, 100, 1)
			for range 5 {
				if _, err := l.AppendAsLeader(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			_, release, flushes := blockFirstFlush(l, nil, nil)
			done := make(chan error, 1)
			go func() { done <- l.Sync(context.Background(), 6) }()
			for l.writes.syncers.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			if err := c.cut(l); err != nil {
				t.Fatal(err)
			}
			if c.refill {
				for l.LogEndOffset() < 10 {
					if _, err := l.AppendAsLeader(b, 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			close(release)
			err := <-done
			if c.wantErr != errors.Is(err, ErrTruncated) || !c.wantErr && err != nil {
				t.Fatalf("Sync: %v (want ErrTruncated: %v)", err, c.wantErr)
			}
			if n := flushes.Load(); n > 3 {
				t.Fatalf("%d flushes for one Sync", n)
			}
			if c.wantErr && KafkaErrorCode(err) != codeNotLeaderOrFollower {
				t.Fatalf("Kafka code %d", KafkaErrorCode(err))
			}
		})
	}
}

// TestFlushAcrossFailure: the log fails while a flush runs (a truncation
// or retention that broke partway may have removed segments the flush
// then skipped as deleted). The flush must not advance the recovery point
// over offsets it cannot vouch for: its Sync callers get ErrFailed.
func TestFlushAcrossFailure(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	info, err := l.AppendAsLeader(makeBatch(t, 2, 100, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("truncation failed partway (injected)")
	l.flushed = func(int64, int64) {
		l.appendMu.Lock()
		l.failed = injected
		l.appendMu.Unlock()
	}
	if err := l.Sync(context.Background(), info.LastOffset+1); !errors.Is(err, ErrFailed) || !errors.Is(err, injected) {
		t.Fatalf("Sync across a failure: %v, want ErrFailed wrapping the failure", err)
	}
	if rp := l.RecoveryPoint(); rp > info.FirstOffset {
		t.Fatalf("recovery point %d advanced by a flush the log failed under", rp)
	}
	l.flushed = nil
}
