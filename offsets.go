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
		start, hw, lso, rp, leo := l.loadOffsets()
		if l.offsetsSeq.Load() == seq {
			return Offsets{LogStartOffset: start, HighWatermark: hw, LastStableOffset: lso, LogEndOffset: leo, RecoveryPoint: rp}
		}
	}
	return l.offsetsLocked()
}

// offsetsLocked reads the offsets under appendMu, which every writer of
// them other than appends and flushes holds.
func (l *Log) offsetsLocked() Offsets {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	start, hw, lso, rp, leo := l.loadOffsets()
	return Offsets{LogStartOffset: start, HighWatermark: hw, LastStableOffset: lso, LogEndOffset: leo, RecoveryPoint: rp}
}

// loadOffsets reads the offsets in the order that keeps the invariants
// under concurrent appends and flushes (which only raise the log end and
// the recovery point, never above the log end). It returns scalars: a
// struct filled field by field and copied out costs a store-forwarding
// stall (wide loads over narrow stores).
func (l *Log) loadOffsets() (start, hw, lso, rp, leo int64) {
	start = l.logStartOffset.Load()
	hw = l.highWatermark.Load()
	lso = max(l.psm.LastStableOffset(hw), start)
	rp = l.recoveryPoint.Load()
	leo = l.logEndOffset.Load()
	return start, hw, lso, rp, leo
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
