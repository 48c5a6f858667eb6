package cleaner

import (
	"math"
	"sort"
)

// SegmentStat is what planning reads of one segment.
type SegmentStat struct {
	Base int64
	// Size is the .log size; IndexBytes and TimeIndexBytes the sizes of
	// its offset and time index (grouping bounds all three).
	Size, IndexBytes, TimeIndexBytes int64
	// LargestTimestamp is the largest batch max timestamp (-1: none); read
	// for dirty sealed segments when MinCompactionLagMs > 0.
	LargestTimestamp int64
	// FirstTimestamp is the first batch's max timestamp (-1: none); read
	// for dirty sealed segments when MaxCompactionLagMs is finite.
	FirstTimestamp int64
}

// LogStat is what planning reads of a log.
type LogStat struct {
	// Segments, oldest first; the last one is the active segment.
	Segments         []SegmentStat
	LogStart, LogEnd int64
	// LastStable is the last stable offset (never above the high
	// watermark): nothing at or above it is cleaned.
	LastStable int64
	// Checkpoint is the log's cleaner-offset-checkpoint entry, -1 when it
	// has none.
	Checkpoint int64
}

// Plan is the cleanable part of a log at one time (Kafka's
// LogCleanerManager.cleanableOffsets and LogToClean).
type Plan struct {
	// FirstDirty is where the dirty section starts: the checkpoint, or
	// the log start when the checkpoint is missing, below the log start
	// or above the log end (ResetCheckpoint then says the checkpoint must
	// be rewritten).
	FirstDirty      int64
	ResetCheckpoint bool
	// FirstUncleanable is where cleaning stops: the base of the segment
	// holding the first offset that may not be cleaned (the last stable
	// offset, the active segment, the first segment newer than
	// min.compaction.lag.ms).
	FirstUncleanable int64
	// CleanBytes is the size of the segments below FirstDirty,
	// CleanableBytes of those from FirstDirty to FirstUncleanable (the
	// segment holding FirstDirty counts in both, as in Kafka).
	CleanBytes, CleanableBytes int64
	// CompactionDelayMs is how long ago max.compaction.lag.ms made the
	// oldest dirty segment due (0: none is due).
	CompactionDelayMs int64
}

// Ratio is the dirty ratio min.cleanable.dirty.ratio is compared with.
func (p *Plan) Ratio() float64 {
	if t := p.CleanBytes + p.CleanableBytes; t > 0 {
		return float64(p.CleanableBytes) / float64(t)
	}
	return 0
}

// Due reports whether the log should be cleaned now (Kafka's
// grabFilthiestCompactedLog filter): some bytes are cleanable and either
// max.compaction.lag.ms is exceeded or the dirty ratio is above
// min.cleanable.dirty.ratio.
func (p *Plan) Due(cfg *Config) bool {
	if p.CleanBytes+p.CleanableBytes == 0 {
		return false
	}
	return (p.CompactionDelayMs > 0 && p.CleanableBytes > 0) || p.Ratio() > cfg.MinCleanableRatio
}

// floor returns the index of the segment holding offset (the last whose
// base is ≤ offset), or -1 when offset lies below the first segment.
func floor(segs []SegmentStat, offset int64) int {
	return sort.Search(len(segs), func(i int) bool { return segs[i].Base > offset }) - 1
}

// rangeOf returns the segments Kafka's logSegments(from, to) returns: from
// the one holding from (or the first) to the last whose base is below to.
func rangeOf(segs []SegmentStat, from, to int64) []SegmentStat {
	if from >= to {
		return nil
	}
	i := max(floor(segs, from), 0)
	j := sort.Search(len(segs), func(k int) bool { return segs[k].Base >= to })
	if i >= j {
		return nil
	}
	return segs[i:j]
}

// nonActiveFrom returns the sealed segments from the one holding from on
// (Kafka's nonActiveLogSegmentsFrom).
func nonActiveFrom(segs []SegmentStat, from int64) []SegmentStat {
	active := segs[len(segs)-1].Base
	if from > active {
		return nil
	}
	return rangeOf(segs, from, active)
}

// PlanClean computes the plan of a log with the given rules at nowMs.
func PlanClean(st *LogStat, cfg *Config, nowMs int64) Plan {
	var p Plan
	segs := st.Segments
	switch cp := st.Checkpoint; {
	case cp < 0:
		p.FirstDirty = st.LogStart
	case cp < st.LogStart, cp > st.LogEnd:
		p.FirstDirty, p.ResetCheckpoint = st.LogStart, true
	default:
		p.FirstDirty = cp
	}
	if len(segs) == 0 {
		p.FirstUncleanable = p.FirstDirty
		return p
	}
	uncleanable := min(st.LastStable, segs[len(segs)-1].Base)
	if lag := max(cfg.MinCompactionLagMs, 0); lag > 0 {
		for _, s := range nonActiveFrom(segs, p.FirstDirty) {
			if s.LargestTimestamp > nowMs-lag {
				uncleanable = min(uncleanable, s.Base)
				break
			}
		}
	}
	uncleanable = max(uncleanable, p.FirstDirty)
	// The cleanable section ends at a segment boundary.
	if na := nonActiveFrom(segs, uncleanable); len(na) > 0 {
		p.FirstUncleanable = na[0].Base
	} else {
		p.FirstUncleanable = segs[len(segs)-1].Base
	}
	for _, s := range rangeOf(segs, math.MinInt64, p.FirstDirty) {
		p.CleanBytes += s.Size
	}
	for _, s := range rangeOf(segs, min(p.FirstDirty, p.FirstUncleanable), p.FirstUncleanable) {
		p.CleanableBytes += s.Size
	}
	if lag := max(cfg.MaxCompactionLagMs, 0); lag < math.MaxInt64 {
		earliest := int64(math.MaxInt64)
		for _, s := range nonActiveFrom(segs, p.FirstDirty) {
			if s.FirstTimestamp > 0 {
				earliest = min(earliest, s.FirstTimestamp)
			}
		}
		if until := nowMs - lag; earliest < until {
			p.CompactionDelayMs = until - earliest
		}
	}
	return p
}

// Group splits the segments to clean, those whose base is below end,
// into the groups each rewritten as one segment (Kafka's
// groupSegmentsBySize): consecutive segments whose .log sizes add up to at
// most SegmentBytes, whose offset and time indexes each add up to at most
// MaxIndexBytes, and whose offsets stay within 2³¹−1 of the group's base
// (the next segment's base, or firstUncleanable for the last, bounds a
// segment's offsets; an empty segment is not bounded). It returns the
// index ranges [from, to) of segs.
func Group(segs []SegmentStat, end, firstUncleanable int64, cfg *Config) [][2]int {
	n := sort.Search(len(segs), func(i int) bool { return segs[i].Base >= end })
	var groups [][2]int
	for i := 0; i < n; {
		j := i + 1
		logSize, idx, tidx := segs[i].Size, segs[i].IndexBytes, segs[i].TimeIndexBytes
		for j < n {
			s := segs[j]
			lastOffset := firstUncleanable - 1
			if j+1 < n {
				lastOffset = segs[j+1].Base - 1
			}
			if logSize+s.Size > cfg.SegmentBytes || idx+s.IndexBytes > cfg.MaxIndexBytes ||
				tidx+s.TimeIndexBytes > cfg.MaxIndexBytes ||
				(s.Size != 0 && lastOffset-segs[i].Base > math.MaxInt32) {
				break
			}
			logSize, idx, tidx = logSize+s.Size, idx+s.IndexBytes, tidx+s.TimeIndexBytes
			j++
		}
		groups = append(groups, [2]int{i, j})
		i = j
	}
	return groups
}
