package partlog

import (
	"errors"
	"testing"
	"time"
)

// TestZeroOptions: Zero is Kafka's 0 where a zero field means the
// default: max.message.bytes=0 refuses every batch, and a zero timestamp
// window accepts only the leader's clock (retention's Zero rows are in
// TestDeleteOldSegments). A zero field still means the default.
func TestZeroOptions(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	for _, c := range []struct {
		name    string
		set     func(o *Options)
		ts      int64 // the batch's record timestamps (its first record's)
		wantErr error
	}{
		{"max.message.bytes default", func(o *Options) {}, now.UnixMilli(), nil},
		{"max.message.bytes Zero", func(o *Options) { o.MaxBatchBytes = Zero }, now.UnixMilli(), ErrRecordTooLarge},
		{"before.max.ms Zero: a past timestamp", func(o *Options) { o.MessageTimestampBeforeMaxMs = Zero }, now.UnixMilli() - 1, ErrInvalidTimestamp},
		{"before.max.ms Zero: the clock's", func(o *Options) { o.MessageTimestampBeforeMaxMs = Zero }, now.UnixMilli(), nil},
		{"after.max.ms Zero: a future timestamp", func(o *Options) { o.MessageTimestampAfterMaxMs = Zero }, now.UnixMilli() + 1, ErrInvalidTimestamp},
		{"after.max.ms 0 is unbounded", func(o *Options) { o.MessageTimestampAfterMaxMs = 0 }, now.UnixMilli() + 1000, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := smallOpts(t)
			o.Now = clock
			c.set(o)
			l, _ := openTestLog(t, o)
			_, err := l.AppendAsLeader(makeBatch(t, 1, 10, c.ts), 0)
			if c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("append: %v, want %v", err, c.wantErr)
			}
		})
	}
}
