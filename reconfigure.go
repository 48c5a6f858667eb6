package partlog

import "fmt"

// Reconfigure changes the topic settings of an open log, as a broker
// applies a changed topic config (Kafka's dynamic topic configs): the
// next append, roll and retention pass use them. The fields it changes
// are those of Kafka's topic configs: SegmentBytes, MaxIndexBytes and
// IndexIntervalBytes (for segments created from now on; an active
// segment already at or over a smaller SegmentBytes is rolled now, as
// Kafka's next append would roll it), SegmentMs and SegmentJitterMs,
// MaxBatchBytes, RetentionMs, RetentionBytes, FileDeleteDelayMs,
// MessageTimestampType, MessageTimestampBeforeMaxMs,
// MessageTimestampAfterMaxMs and CompressionType, and the cleaner's: CleanupPolicy,
// MinCleanableDirtyRatio, MinCompactionLagMs, MaxCompactionLagMs and
// DeleteRetentionMs (a log that becomes compacted is handed to its
// Cleaner; one that stops being compacted stops a running cleaning, as
// Kafka pauses cleaning for logs no longer compacted). Every other field
// of opts is ignored (the log keeps what it was opened with). A zero
// field means its default, as for Open; settings Open would refuse are
// refused and nothing changes.
func (l *Log) Reconfigure(opts *Options) error {
	n := opts.withDefaults()
	var stopped *cleanTask
	defer func() {
		// Without appendMu: a running round installs under it.
		if stopped != nil {
			l.clean.removals.Add(1)
			l.opts.Cleaner.Forget(stopped)
		}
	}()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	o := l.opts
	o.SegmentBytes, o.MaxIndexBytes, o.IndexIntervalBytes = n.SegmentBytes, n.MaxIndexBytes, n.IndexIntervalBytes
	o.SegmentMs, o.SegmentJitterMs = n.SegmentMs, n.SegmentJitterMs
	o.MaxBatchBytes = n.MaxBatchBytes
	o.RetentionMs, o.RetentionBytes, o.FileDeleteDelayMs = n.RetentionMs, n.RetentionBytes, n.FileDeleteDelayMs
	o.MessageTimestampType, o.CompressionType = n.MessageTimestampType, n.CompressionType
	o.MessageTimestampBeforeMaxMs, o.MessageTimestampAfterMaxMs = n.MessageTimestampBeforeMaxMs, n.MessageTimestampAfterMaxMs
	o.CleanupPolicy, o.MinCleanableDirtyRatio = n.CleanupPolicy, n.MinCleanableDirtyRatio
	o.MinCompactionLagMs, o.MaxCompactionLagMs, o.DeleteRetentionMs = n.MinCompactionLagMs, n.MaxCompactionLagMs, n.DeleteRetentionMs
	if err := o.validate(); err != nil {
		return err
	}
	jitterChanged := o.SegmentJitterMs != l.opts.SegmentJitterMs || o.SegmentMs != l.opts.SegmentMs
	// Field by field: other fields are read without appendMu (the write
	// path, the clock), these only under it.
	p := &l.opts
	p.SegmentBytes, p.MaxIndexBytes, p.IndexIntervalBytes = o.SegmentBytes, o.MaxIndexBytes, o.IndexIntervalBytes
	p.SegmentMs, p.SegmentJitterMs, p.MaxBatchBytes = o.SegmentMs, o.SegmentJitterMs, o.MaxBatchBytes
	p.RetentionMs, p.RetentionBytes, p.FileDeleteDelayMs = o.RetentionMs, o.RetentionBytes, o.FileDeleteDelayMs
	p.MessageTimestampType, p.CompressionType = o.MessageTimestampType, o.CompressionType
	p.MessageTimestampBeforeMaxMs, p.MessageTimestampAfterMaxMs = o.MessageTimestampBeforeMaxMs, o.MessageTimestampAfterMaxMs
	p.CleanupPolicy, p.MinCleanableDirtyRatio = o.CleanupPolicy, o.MinCleanableDirtyRatio
	p.MinCompactionLagMs, p.MaxCompactionLagMs, p.DeleteRetentionMs = o.MinCompactionLagMs, o.MaxCompactionLagMs, o.DeleteRetentionMs
	stopped = l.reconfigureCleaning()
	l.tsRules = o.timestampRulesApply()
	if jitterChanged {
		l.newJitter()
	}
	if active := l.active(); !active.IsEmpty() && active.Size() >= o.SegmentBytes {
		if err := l.rollLocked(l.logEndOffset.Load()); err != nil {
			return fmt.Errorf("partlog: roll for the new segment size: %w", err)
		}
	}
	return nil
}
