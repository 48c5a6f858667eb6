package segment

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/unsafeutil"
)

// Stamp says how Append writes the two header fields outside the CRC.
type Stamp struct {
	// Assign makes Append give the batches consecutive offsets starting
	// at NextOffset (a leader append) and set their partition leader
	// epoch to LeaderEpoch. Without it the bytes are kept as they are (a
	// follower or mirror append).
	Assign      bool
	NextOffset  int64
	LeaderEpoch int32
	// Write makes Append hand the bytes to the kernel with pwritev (the
	// stamped header from a scratch buffer, then the rest of the batch
	// from src) instead of storing them into the mapping. The bytes are
	// the same and read back through the mapping either way (one page
	// cache); the difference is the cost of making them durable: pages
	// stored through a shared mapping are write-protected again by each
	// writeback and fault on the next store, and a prefaulted window
	// ahead of the writer is dirty zeros that every fdatasync writes out.
	// The log sets it when appends are being synced (see Log.Sync).
	Write bool
	// Synced says the log's appends are being synced: the prefaulter is
	// not moved on, even by stores. Every flush writes its populated
	// pages out as zeros and write-protects them, so a store still
	// faults on each (bench/RESULTS.md, Stamp.Synced: neutral in the
	// engine's benchmarks; a --fsync server's cost was the first window,
	// server.Config.Fsync).
	Synced bool
}

// Appended reports what an append wrote.
type Appended struct {
	// Position is where the append starts in the .log.
	Position int64
	// FirstOffset and LastOffset are the base offset of the first batch
	// and the last offset of the last batch, as written.
	FirstOffset, LastOffset int64
	// MaxTimestamp is the largest batch max timestamp and
	// OffsetOfMaxTimestamp the last offset of the batch holding it.
	MaxTimestamp, OffsetOfMaxTimestamp int64
	// Batches is the number of batches written.
	Batches int
}

// Append copies src, a sequence of batches already validated by the
// caller, whose headers it decoded into hdrs (one per batch, in order:
// what batch.CheckAt or an Iterator leaves), to the end of the active
// segment; it reads every field it needs from hdrs, never from the bytes
// again. For each batch it copies the 61-byte header first, stamps the
// base offset and leader epoch (Assign), then copies the rest (with
// Write, the stamped header and the rest go in that order in one
// pwritev), so a crash can never leave a CRC-valid batch with the
// client's offsets behind the published end (recovery.md §9 item 7). src
// is never modified and no CRC is computed. The new size is published
// after everything is in place.
//
// Index entries follow Kafka's cadence (recovery.md §3.2): one offset
// entry, and a time entry when the largest timestamp grew, for an append
// that starts after more than IndexIntervalBytes since the last entry.
// Append does not allocate. Owner only.
func (s *Segment) Append(src []byte, hdrs []batch.BatchHeader, st Stamp, out *Appended) error {
	if !s.active {
		return ErrSealed
	}
	pos := s.size.Load()
	end := pos + int64(len(src))
	// Room first, for the data and the index entries this append adds, so
	// a full disk fails the append before anything is written. Stores
	// reserve a step more (at most the prefault window), so that the
	// prefaulter, which stops at the reserved end, stays ahead. room is
	// that limit for stores; writes need only end ≤ the reserved size,
	// which makeRoom checks (it reserves nothing when there is room).
	if end > s.room {
		if err := s.makeRoom(end, st); err != nil {
			return err
		}
	}
	indexed := s.bytesSinceIndex > s.cfg.IndexIntervalBytes
	if indexed {
		if err := s.indexRoom(true); err != nil {
			return err
		}
	}
	dst := s.mapped[pos:end]
	next := st.NextOffset
	first, maxTs, offMaxTs := int64(-1), batch.NoTimestamp, int64(-1)
	p := 0
	for i := range hdrs {
		hd := &hdrs[i]
		n := hd.Size()
		if n < batch.HeaderSize || n > len(src)-p {
			return errUnvalidated(p)
		}
		b := src[p : p+n]
		var h batch.View
		if st.Write {
			h = batch.View(s.hdr[:])
		} else {
			h = batch.View(dst[p : p+batch.HeaderSize])
		}
		copyHeader(h, b)
		if st.Assign {
			h.SetBaseOffset(next)
			h.SetPartitionLeaderEpoch(st.LeaderEpoch)
		}
		if st.Write {
			if err := s.log.WriteAt(h, b[batch.HeaderSize:], pos+int64(p)); err != nil {
				return err
			}
		} else {
			copy(dst[p+batch.HeaderSize:p+n], b[batch.HeaderSize:])
		}
		// The fields are read from the decoded header, never from the
		// copy just stored: a load from the destination waits until the
		// stores before it (the whole body's copy, into cold lines of the
		// mapping) have left the store buffer when it cannot be
		// forwarded.
		base := next
		if !st.Assign {
			base = hd.BaseOffset
		}
		last := base + int64(hd.LastOffsetDelta)
		if i == 0 {
			first = base
		}
		if ts := hd.MaxTimestamp; ts > maxTs {
			maxTs, offMaxTs = ts, last
		}
		next = last + 1
		p += n
	}
	if p != len(src) {
		return errUnvalidated(p)
	}
	batches := len(hdrs)
	last := next - 1
	if !index.CanConvertToRelative(s.base, last) || first < s.base {
		return fmt.Errorf("%w: offsets %d..%d in segment %d", ErrOffsetOverflow, first, last, s.base)
	}
	// Field by field, not a composite literal (see partlog's appendStamped).
	out.Position, out.FirstOffset, out.LastOffset = pos, first, last
	out.MaxTimestamp, out.OffsetOfMaxTimestamp, out.Batches = maxTs, offMaxTs, batches
	return s.publish(pos, end, next, maxTs, offMaxTs, indexed, !st.Write && !st.Synced)
}

// publish ends every append (Append, AppendLeader) once its bytes are in
// place at [pos, end) and next is the offset after its last: the
// segment's timestamps (maxTs and offMaxTs are the append's largest
// timestamp and the last offset of its batch), the index entries when
// indexed, the counters, then the new size, stored last for readers.
// populate says the prefaulter may move on, at a stride: only stores
// gain from populated pages, and not those of a synced log (Stamp).
func (s *Segment) publish(pos, end, next, maxTs, offMaxTs int64, indexed, populate bool) error {
	s.noteTimestamps(pos, maxTs, offMaxTs)
	if indexed {
		if err := s.appendIndexes(next-1, pos); err != nil {
			return err
		}
	}
	s.settle(pos, end, next)
	if populate && end >= s.prefaultAt && s.prefaulter != nil {
		s.advancePrefault(end)
	}
	return nil
}

// noteTimestamps is publish's first step: the segment's timestamps after
// an append at pos.
func (s *Segment) noteTimestamps(pos, maxTs, offMaxTs int64) {
	if pos == 0 {
		s.rollingTimestamp = maxTs
	}
	if maxTs > s.maxTimestamp {
		s.maxTimestamp, s.offsetOfMaxTimestamp = maxTs, offMaxTs
	}
}

// settle is publish's last step for readers: the counters of an append
// at [pos, end), then the new size.
func (s *Segment) settle(pos, end, next int64) {
	s.bytesSinceIndex += end - pos
	s.nextOffset = next
	s.size.Store(end)
}

// After AppendLeader's copy of a batch of at least prefetchMinBytes, the
// cache lines of the next append's destination (as many bytes as this
// batch, at most prefetchMaxBytes) are fetched for writing
// (unsafeutil.PrefetchWrite), so that the next append of this segment
// finds them in this core's cache. Those lines are cold: the prefault
// worker zeroed their page on another core, and with many partitions
// appended in turn the writer comes back to this segment only after
// hundreds of other appends. A store to a cold line waits for the line,
// and the first atomic publication after the copy (settle's size.Store)
// waits for every such store. Below 1 KiB the hint's fixed cost shows
// (bench/RESULTS.md, prefetchMinBytes).
const (
	prefetchMinBytes = 1 << 10
	prefetchMaxBytes = 4 << 10
)

// AppendLeader is Append of one batch by a leader, stored into the
// mapping (Stamp{Assign: true, NextOffset: next, LeaderEpoch: epoch}),
// with ShouldRoll's checks made in the same call: the usual produce
// request in one call instead of two, with the header decoded once (h is
// src's, from batch.CheckAt) instead of read again. It takes only the
// usual case: when the batch would need anything else (ShouldRoll would
// roll for any of its reasons, the reservation must grow, src is not
// exactly one batch, or its offsets do not fit the segment) it returns a
// negative position and nil having changed nothing, and the caller takes
// ShouldRoll and Append. segmentMs and jitterMs are ShouldRoll's, synced
// is Stamp.Synced. It writes what Append writes, the index entries
// included, and returns Append's errors. Owner only; it does not
// allocate.
func (s *Segment) AppendLeader(src []byte, h *batch.BatchHeader, next int64, epoch int32, segmentMs, jitterMs int64, synced bool) (int64, error) {
	pos := s.size.Load()
	n := int64(len(src))
	end := pos + n
	last := next + int64(h.LastOffsetDelta)
	maxTs := h.MaxTimestamp
	// ShouldRoll's rules (size, relative offsets, full indexes, age by the
	// timestamps; the clock's age goes the general way) and Append's
	// room and framing checks, in one test that passes.
	if !s.active || end > s.room || end > s.cfg.SegmentBytes || s.indexesFull ||
		next < s.base || uint64(last-s.base) > math.MaxInt32 ||
		n < batch.HeaderSize || int64(h.BatchLength)+batch.LogOverhead != n ||
		segmentMs > 0 && pos > 0 && (s.rollingTimestamp == batch.NoTimestamp || maxTs == batch.NoTimestamp ||
			maxTs-s.rollingTimestamp > segmentMs-jitterMs) {
		return -1, nil
	}
	indexed := s.bytesSinceIndex > s.cfg.IndexIntervalBytes
	if indexed {
		if err := s.indexRoom(max(s.maxTimestamp, maxTs) > s.timeIndexed); err != nil {
			return -1, nil // Append fails the same way
		}
	}
	dst := s.mapped[pos:end:end]
	copyHeader(dst, src)
	hv := batch.View(dst)
	hv.SetBaseOffset(next)
	hv.SetPartitionLeaderEpoch(epoch)
	copy(dst[batch.HeaderSize:], src[batch.HeaderSize:])
	if n >= prefetchMinBytes {
		if e := min(end+min(n, prefetchMaxBytes), int64(len(s.mapped))); e > end {
			unsafeutil.PrefetchWrite(s.mapped[end:e])
		}
	}
	offMaxTs := int64(-1)
	if maxTs > batch.NoTimestamp {
		offMaxTs = last
	} else {
		maxTs = batch.NoTimestamp
	}
	if indexed || end >= s.prefaultAt && s.prefaulter != nil && !synced {
		if err := s.publish(pos, end, last+1, maxTs, offMaxTs, indexed, !synced); err != nil {
			return -1, err
		}
		return pos, nil
	}
	// publish without its two occasional steps (an index entry, one
	// append in IndexIntervalBytes; the prefaulter's, one in
	// prefaultStride): inline, where publish is a call.
	s.noteTimestamps(pos, maxTs, offMaxTs)
	s.settle(pos, end, last+1)
	return pos, nil
}

// PrepareIndexes makes the active segment's index files now, empty,
// instead of at its first index entry (Kafka makes them with the
// segment), for a leader that wants a new partition's first appends to
// create no file. Writer only, as Append.
func (s *Segment) PrepareIndexes() error {
	if !s.active {
		return ErrSealed
	}
	return errors.Join(s.offsetIndex.Prepare(), s.timeIndex.Prepare())
}

// indexRoom reserves room for an offset index entry and, when timed (the
// append may add one), a time index entry.
func (s *Segment) indexRoom(timed bool) error {
	e1 := s.offsetIndex.EnsureRoom()
	var e2 error
	if timed {
		e2 = s.timeIndex.EnsureRoom()
	}
	if e1 == nil && e2 == nil {
		return nil // the usual case, without errors.Join's variadic call
	}
	return errors.Join(e1, e2)
}

// appendIndexes adds the index entries of an append at pos whose last
// offset is last (Kafka's cadence, see Append).
func (s *Segment) appendIndexes(last, pos int64) error {
	if err := s.offsetIndex.Append(last, int32(pos)); err != nil {
		return err
	}
	// Kafka's cadence asks the time index at every offset entry; it adds
	// one only past its last timestamp, which a timestamp not above
	// timeIndexed is not: then the time index is not read at all.
	timed := false
	if s.maxTimestamp > s.timeIndexed {
		var err error
		if timed, err = s.timeIndex.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, false); err != nil {
			return err
		}
		// Appended or not, the last entry's timestamp is now ≥ it.
		s.timeIndexed = s.maxTimestamp
	}
	s.bytesSinceIndex = 0
	// noteIndexes' result for entries that only grew here: the time
	// index can have filled only if it took an entry.
	s.indexesFull = s.indexesFull || s.offsetIndex.IsFull() || timed && s.timeIndex.IsFull()
	return nil
}

// copyHeader copies the 61-byte batch header at the start of src to dst
// in moves of 16, 8, 4 and 1 bytes, which the compiler does inline: a
// [61]byte (or [32]byte) assignment is a call to memmove, whose size
// dispatch and the spills of everything live across the call cost more
// than the moves.
func copyHeader(dst, src []byte) {
	dst, src = dst[:batch.HeaderSize:batch.HeaderSize], src[:batch.HeaderSize:batch.HeaderSize]
	*(*[16]byte)(dst) = [16]byte(src)
	*(*[16]byte)(dst[16:]) = [16]byte(src[16:])
	*(*[16]byte)(dst[32:]) = [16]byte(src[32:])
	*(*[8]byte)(dst[48:]) = [8]byte(src[48:])
	*(*[4]byte)(dst[56:]) = [4]byte(src[56:])
	dst[60] = src[60]
}

func errUnvalidated(p int) error {
	return fmt.Errorf("partlog/segment: append of unvalidated bytes at %d", p)
}

// AppendAbortedTxn records an aborted transaction in the segment's
// .txnindex. Owner only.
func (s *Segment) AppendAbortedTxn(e index.AbortedTxn) error {
	if !s.active {
		return ErrSealed
	}
	return s.txnIndex.Append(e)
}

// ShouldRoll reports whether an append of size bytes covering offsets
// [firstOffset, lastOffset] with largest timestamp maxTimestamp must go to
// a new segment (recovery.md §3.3). segmentMs ≤ 0 disables the time rule;
// now is called only when the rule needs the wall clock. AppendLeader
// makes the same tests (it declines where the clock is needed):
// TestAppendLeaderMatchesAppend keeps the two in step.
func (s *Segment) ShouldRoll(size int64, lastOffset, maxTimestamp int64, segmentMs, jitterMs int64, now func() time.Time) bool {
	cur := s.size.Load()
	// One unsigned compare covers lastOffset < base and a relative offset
	// beyond int32.
	if cur > s.cfg.SegmentBytes-size || uint64(lastOffset-s.base) > math.MaxInt32 || s.indexesFull {
		return true
	}
	if segmentMs > 0 && cur > 0 {
		var age int64
		if s.rollingTimestamp != batch.NoTimestamp && maxTimestamp != batch.NoTimestamp {
			age = maxTimestamp - s.rollingTimestamp
		} else {
			// Only here: reading the clock costs more than the
			// rest of the check (bench/RESULTS.md, ShouldRoll).
			age = now().Sub(s.created).Milliseconds()
		}
		if age > segmentMs-jitterMs {
			return true
		}
	}
	return false
}
