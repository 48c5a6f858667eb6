package partlog

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/partlog/partlog/batch"
)

// TestLeaderRulesInline: validate tests the leader rules inline and calls
// leaderRules only for a batch that fails one (or to walk the records).
// For each rule, a batch breaking only it is refused with leaderRules'
// error, and nothing is appended; a batch with a broken record under a
// valid CRC is refused by the record walk (recordRules), not leaderRules.
func TestLeaderRulesInline(t *testing.T) {
	edit := func(f func(v batch.View)) []byte { return edited(makeBatch(t, 3, 20, 1000), f) }
	cases := []struct {
		name     string
		records  []byte
		maxBatch int64
		walk     bool  // refused by the record walk, not leaderRules
		want     error // nil: accepted
	}{
		{"valid", makeBatch(t, 3, 20, 1000), 0, false, nil},
		{"too large", makeBatch(t, 3, 20, 1000), 100, false, ErrRecordTooLarge},
		{"control from a client", edit(func(v batch.View) {
			binary.BigEndian.PutUint16(v[batch.OffAttributes:], uint16(v.Attributes())|0x20)
		}), 0, false, ErrPolicy},
		{"records count below the offset range", edit(func(v batch.View) {
			binary.BigEndian.PutUint32(v[batch.OffRecordsCount:], 2)
		}), 0, false, ErrPolicy},
		{"no records", edit(func(v batch.View) {
			binary.BigEndian.PutUint32(v[batch.OffRecordsCount:], 0)
		}), 0, false, ErrPolicy},
		{"idempotent without a base sequence", edit(func(v batch.View) {
			binary.BigEndian.PutUint64(v[batch.OffProducerID:], 7)
		}), 0, false, ErrPolicy},
		{"broken record", edit(func(v batch.View) { v[batch.HeaderSize] = 0x7f }), 0, true, ErrPolicy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := smallOpts(t)
			if c.maxBatch > 0 {
				o.MaxBatchBytes = c.maxBatch
			}
			l, _ := openTestLog(t, o)
			// The rule-by-rule answer, for the same batch.
			v := batch.View(c.records)
			var h batch.BatchHeader
			v.DecodeHeader(&h)
			rule := l.leaderRules(v, &h, 0)
			_, err := l.AppendAsLeader(c.records, 1)
			switch {
			case c.want == nil && (err != nil || rule != nil):
				t.Fatalf("refused: append %v, leaderRules %v", err, rule)
			case c.walk && (!errors.Is(err, c.want) || rule != nil):
				t.Fatalf("append error %v, leaderRules %v, want %v from the walk only", err, rule, c.want)
			case c.want != nil && !c.walk && (!errors.Is(err, c.want) || !errors.Is(rule, c.want)):
				t.Fatalf("append error %v, leaderRules %v, want %v", err, rule, c.want)
			case c.want != nil && l.LogEndOffset() != 0:
				t.Fatalf("a refused append moved the log end to %d", l.LogEndOffset())
			}
		})
	}
}
