package cleaner

import (
	"fmt"
	"math"
	"strings"
)

// Policy is Kafka's cleanup.policy: delete (retention), compact
// (cleaning), or both.
type Policy uint8

// Policies, as bits.
const (
	Delete Policy = 1 << iota
	Compact
	CompactDelete = Compact | Delete
)

// ParsePolicy reads cleanup.policy: a comma-separated list of "delete" and
// "compact" (Kafka's list form; spaces around items are ignored). Kafka
// 4's empty list (neither deletes nor cleans) is refused: partlog needs
// one of the two.
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	for _, item := range strings.Split(s, ",") {
		switch strings.TrimSpace(item) {
		case "delete":
			p |= Delete
		case "compact":
			p |= Compact
		default:
			return 0, fmt.Errorf("partlog/cleaner: cleanup.policy %q: each item must be delete or compact", s)
		}
	}
	return p, nil
}

// String is the policy as Kafka lists it.
func (p Policy) String() string {
	switch p {
	case Delete:
		return "delete"
	case Compact:
		return "compact"
	case CompactDelete:
		return "compact,delete"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Config is what the cleaner reads of one log's settings (topic configs).
type Config struct {
	// MinCleanableRatio is min.cleanable.dirty.ratio (Kafka's default
	// 0.5): a log is cleaned when its dirty ratio is above it.
	MinCleanableRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms (default 0): a segment
	// whose largest timestamp is newer than this stays uncleaned.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms (default
	// Long.MAX_VALUE): a dirty segment whose first batch is older than
	// this makes the log due whatever its dirty ratio.
	MaxCompactionLagMs int64
	// DeleteRetentionMs is delete.retention.ms (default 1 day): how long
	// tombstones and transaction markers stay after a cleaning first
	// found them removable (the delete horizon written into their batch).
	DeleteRetentionMs int64
	// SegmentBytes and MaxIndexBytes bound a group of segments cleaned
	// into one (segment.bytes, segment.index.bytes); IndexIntervalBytes is
	// the cleaned segment's index interval (index.interval.bytes, 0: every
	// batch); MaxBatchBytes bounds a batch's decompressed records
	// (max.message.bytes).
	SegmentBytes, MaxIndexBytes, IndexIntervalBytes, MaxBatchBytes int64
}

// Kafka's defaults of the topic configs above.
const (
	DefaultMinCleanableRatio = 0.5
	DefaultDeleteRetentionMs = 24 * 60 * 60 * 1000
	DefaultMaxCompactionLag  = math.MaxInt64
)

// Validate refuses the values Kafka refuses.
func (c *Config) Validate() error {
	switch {
	case c.MinCleanableRatio < 0 || c.MinCleanableRatio > 1 || math.IsNaN(c.MinCleanableRatio):
		return fmt.Errorf("partlog/cleaner: min.cleanable.dirty.ratio %v outside [0, 1]", c.MinCleanableRatio)
	case c.MinCompactionLagMs < 0:
		return fmt.Errorf("partlog/cleaner: negative min.compaction.lag.ms %d", c.MinCompactionLagMs)
	case c.MaxCompactionLagMs < 1:
		return fmt.Errorf("partlog/cleaner: max.compaction.lag.ms %d below 1", c.MaxCompactionLagMs)
	case c.MaxCompactionLagMs < c.MinCompactionLagMs:
		return fmt.Errorf("partlog/cleaner: max.compaction.lag.ms %d below min.compaction.lag.ms %d", c.MaxCompactionLagMs, c.MinCompactionLagMs)
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("partlog/cleaner: negative delete.retention.ms %d", c.DeleteRetentionMs)
	}
	return nil
}
