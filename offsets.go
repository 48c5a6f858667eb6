package partlog

// Offsets is one consistent reading of a log's offsets: LogStartOffset ≤
// LastStableOffset ≤ HighWatermark ≤ LogEndOffset and RecoveryPoint ≤
// LogEndOffset hold between the values, as they held together at one
// moment.
type Offsets struct {
	// LogStartOffset is the first offset a reader may ask for.
	LogStartOffset int64
	// HighWatermark is the offset below which every record is replicated
	// (what a read-uncommitted fetch may see).
	HighWatermark int64
	// LastStableOffset is the offset below which every transaction is
	// decided (what a read-committed fetch may see).
	LastStableOffset int64
	// LogEndOffset is the offset the next appended record gets.
	LogEndOffset int64
	// RecoveryPoint is the offset below which everything is durable.
	RecoveryPoint int64
}

// Offsets returns the log start, high watermark, last stable, log end
// offsets and the recovery point as one consistent snapshot. Appends go
// on meanwhile (they only raise the log end, read last); the operations
// that move the other offsets (SetHighWatermark, SetLogStartOffset,
// truncation, retention) publish through a sequence counter, and a
// reading that met one of them is taken again (under the append lock if
// it keeps changing). It does not allocate.
func (l *Log) Offsets() Offsets {
	for try := 0; try < 4; try++ {
		seq := l.offsetsSeq.Load()
		if seq&1 != 0 {
			continue
		}
		o := l.readOffsets()
		if l.offsetsSeq.Load() == seq {
			return o
		}
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.readOffsets()
}

// readOffsets reads the offsets in the order that keeps the invariants
// under concurrent appends and flushes (which only raise the log end and
// the recovery point, never above the log end).
func (l *Log) readOffsets() Offsets {
	var o Offsets
	o.LogStartOffset = l.logStartOffset.Load()
	o.HighWatermark = l.highWatermark.Load()
	o.LastStableOffset = max(l.psm.LastStableOffset(o.HighWatermark), o.LogStartOffset)
	o.RecoveryPoint = l.recoveryPoint.Load()
	o.LogEndOffset = l.logEndOffset.Load()
	return o
}

// beginOffsetsChange and endOffsetsChange bracket stores that move the
// log start, high watermark or recovery point other than by an append or
// a flush (Offsets retries a reading that overlapped one). Caller holds
// appendMu.
func (l *Log) beginOffsetsChange() { l.offsetsSeq.Add(1) }
func (l *Log) endOffsetsChange()   { l.offsetsSeq.Add(1) }

// restoreHighWatermark sets the high watermark read from the log
// directory's replication-offset-checkpoint (Options.HighWatermark),
// clamped to [log start, log end], at open.
func (l *Log) restoreHighWatermark() {
	hw := min(max(l.opts.HighWatermark, l.logStartOffset.Load()), l.logEndOffset.Load())
	l.highWatermark.Store(hw)
	l.psm.OnHighWatermarkUpdated(hw)
}
