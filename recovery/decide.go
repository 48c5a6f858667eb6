package recovery

import (
	"fmt"

	"github.com/partlog/partlog/batch"
)

// salvageWindow bounds the forward resynchronisation scan after a corrupt
// batch (recovery.md §2.8): how many bytes are searched for the start of a
// structurally valid batch.
const salvageWindow = 16 << 20

// pageSize is the granularity of the "page holding the recovery point"
// rule (recovery.md §2.8, §9 item 8).
const pageSize = 4096

// decide walks the segments in offset order, applying the outcome of each
// scan and the boundary rules between segments, and places the cut at the
// first failure (recovery.md §2.5, §7.1, §7.5–§7.8).
func (x *run) decide(segs []*seg) error {
	var prev *seg
	for i, s := range segs {
		if s.recover {
			r := s.scan
			if d := r.epochDrop; d != nil && d.pos < r.validEnd {
				x.epochDrops = true
				x.r.note(s.logName, kindEpochDecrease, "leader epoch decreases from %d to %d at offset %d (position %d); kept, as Kafka does", d.from, d.to, d.offset, d.pos)
			}
			s.keepEnd, s.batches = r.validEnd, r.batches
			s.firstBase, s.lastOffset = r.firstBase, r.lastOffset
			s.firstEpoch, s.lastEpoch, s.prevEpoch, s.lastPos = r.firstEpoch, r.lastEpoch, r.prevEpoch, r.lastPos
		}
		if prev != nil {
			stop, err := x.boundary(segs, i, prev, s)
			if err != nil {
				return err
			}
			if stop {
				return nil
			}
			if s.drop {
				continue
			}
		}
		if s.recover && s.scan.fail != failNone {
			if x.failure(segs, i) {
				return nil
			}
		}
		prev = s
	}
	return nil
}

// boundary applies the rules between the previous kept segment and s.
// stop is true when a cut was placed (everything from there on dropped).
func (x *run) boundary(segs []*seg, i int, prev, s *seg) (stop bool, err error) {
	if s.firstBase < 0 { // s holds no valid batch
		if s.base < prev.next() && !(s.recover && s.scan.fail != failNone && s.scan.fail != failZero) {
			x.r.problem(s.logName, -1, kindOverlap, "empty segment %d lies below the end %d of segment %d; replaced by one at %d",
				s.base, prev.next(), prev.base, prev.next())
			s.drop, s.dropWhy = true, fmt.Sprintf("empty segment below the end %d of segment %d", prev.next(), prev.base)
			if i == len(segs)-1 {
				x.createAt = prev.next()
			}
		}
		return false, nil
	}
	if s.firstBase <= prev.lastOffset {
		// Overlap (recovery.md §7.6): keep what Kafka serves, the later
		// segment; cut the earlier one before it.
		pos, last, n, err := x.positionOf(prev, s.firstBase)
		if err != nil {
			return false, err
		}
		x.r.problem(prev.logName, pos, kindOverlap, "segment %d overlaps segment %d from offset %d; offsets %d..%d of segment %d dropped",
			s.base, prev.base, s.firstBase, s.firstBase, prev.lastOffset, prev.base)
		x.setTruncation(prev, pos, s.firstBase, fmt.Sprintf("overlap with segment %d", s.base), ClassCorruptUnflushed, prev.keepEnd-pos)
		prev.keepEnd, prev.lastOffset, prev.batches = pos, last, n
		prev.cutWhy = fmt.Sprintf("offsets from %d overlap segment %d", s.firstBase, s.base)
		prev.recover = true
		return false, nil
	}
	if s.firstBase > prev.next() && prev.firstBase >= 0 && !prev.flushedDamage {
		// Legal in Kafka (a compacted topic, a follower's roll over the
		// leader's gap): a note, not damage.
		x.r.note(s.logName, kindGap, "offsets %d..%d are missing between segment %d and segment %d",
			prev.next(), s.firstBase-1, prev.base, s.base)
	}
	if e := s.firstEpoch; e >= 0 && prev.lastEpoch >= 0 && e < prev.lastEpoch {
		// Kept, as Kafka keeps it (see structural).
		x.epochDrops = true
		x.r.note(s.logName, kindEpochDecrease, "leader epoch decreases from %d to %d at offset %d (the first batch of segment %d); kept, as Kafka does",
			prev.lastEpoch, e, s.firstBase, s.base)
	}
	return false, nil
}

func indexOf(segs []*seg, s *seg) int {
	for i := range segs {
		if segs[i] == s {
			return i
		}
	}
	return -1
}

// failure handles the scan failure of segs[i]; it returns true when it
// placed the cut.
func (x *run) failure(segs []*seg, i int) bool {
	s := segs[i]
	r := s.scan
	laterData := -1
	for j := i + 1; j < len(segs); j++ {
		if holdsData(segs[j]) {
			laterData = j
			break
		}
	}
	if r.fail == failZero && laterData >= 0 && startsValid(segs[laterData]) && firstOffsetOf(segs[laterData]) >= s.next() {
		// Zeros after the data of a segment that is followed by data: a
		// trim was lost (recovery.md §7.2). Trim it, keep the rest. A
		// later segment that begins with invalid bytes is no such data: a
		// power cut can keep a sealed segment's trim and lose the data
		// before it, and the cut is then here.
		x.r.problem(s.logName, s.keepEnd, kindLostTrim, "%d bytes of zero padding after the data of segment %d (a lost trim) cut",
			s.size-s.keepEnd, s.base)
		s.trimmed = true
		s.cutWhy = "zero padding after the data (a lost trim)"
		return false
	}
	class := x.classify(segs, i, laterData >= 0)
	if class == ClassCorruptFlushed && r.fail != failStructural && x.whollyFlushed(segs, i, laterData >= 0) && !x.o.CutFlushed {
		// A segment Kafka's load would never scan: left as it is, its
		// indexes included, and reported (recovery.md E2).
		x.r.problem(s.logName, s.keepEnd, kindFlushedDamage,
			"%s: invalid data in segment %d, which lies wholly below the recovery point: %s; left as it is (Kafka's load neither scans nor cuts it; recover --apply --force cuts it)",
			ClassCorruptFlushed, s.base, r.reason)
		s.recover, s.why, s.keepEnd, s.flushedDamage = false, "", s.size, true
		return false
	}
	x.cutAt(segs, i, s.keepEnd, s.lastOffset, s.batches, class, r.reason, r.fail)
	return true
}

// whollyFlushed reports whether segs[i] lies wholly below the recovery
// point: before the segment holding it, or, with the clean-shutdown
// marker, any segment followed by data.
func (x *run) whollyFlushed(segs []*seg, i int, laterData bool) bool {
	if x.o.Clean {
		return laterData
	}
	rp := x.o.RecoveryPoint
	if rp <= 0 {
		return false
	}
	for j := i + 1; j < len(segs); j++ {
		if segs[j].base <= rp {
			return true
		}
	}
	return false
}

func holdsData(s *seg) bool {
	if !s.recover {
		return s.size > 0
	}
	return s.scan.batches > 0 || (s.scan.fail != failNone && s.scan.fail != failZero)
}

// startsValid reports whether s, which holds data, begins with a valid
// batch (or is trusted unscanned).
func startsValid(s *seg) bool { return !s.recover || s.scan.firstBase >= 0 }

func firstOffsetOf(s *seg) int64 {
	if s.firstBase >= 0 {
		return s.firstBase
	}
	return s.base
}

// classify returns the §2.8 class of an invalid region starting at the
// keep end of segs[i].
func (x *run) classify(segs []*seg, i int, laterData bool) string {
	s := segs[i]
	if x.flushed(segs, i, s.keepEnd, laterData) {
		return ClassCorruptFlushed
	}
	fail := s.scan.fail
	if fail == failStructural {
		return ClassCorruptUnflushed
	}
	if fail == failZero && !laterData {
		return ClassZeroTail
	}
	x.salvage(segs, i)
	if !laterData && x.r.Salvage == nil {
		return ClassTornTail
	}
	return ClassCorruptUnflushed
}

// flushed reports whether position pos of segs[i] holds data the log had
// declared durable: below the recovery point's position, outside the page
// holding it. A segment wholly below the recovery point's segment is
// flushed wherever the damage lies. With a clean-shutdown marker every
// segment followed by data was flushed, and the last one below the
// recovery point's position, the page holding it included (the close
// synced it whole; H3 keeps bytes after the data a torn tail): a corrupt
// first batch of a cleanly closed active segment is damage in durable
// data, not a torn write.
func (x *run) flushed(segs []*seg, i int, pos int64, laterData bool) bool {
	if x.o.Clean && laterData {
		return true
	}
	rp := x.o.RecoveryPoint
	if rp <= 0 {
		return false
	}
	rpSeg := -1
	for j, s := range segs {
		if s.base <= rp {
			rpSeg = j
		}
	}
	if rpSeg < 0 || i > rpSeg {
		return false
	}
	if i < rpSeg {
		return true
	}
	s := segs[i]
	m, done, err := x.mapSeg(s)
	if err != nil {
		return false
	}
	defer done()
	rpPos := s.keepEnd
	_ = guard(s.logPath, func() { rpPos = recoveryPointPosition(m.data, s.keepEnd, rp) })
	if x.o.Clean {
		return pos < rpPos
	}
	return pos < rpPos&^(pageSize-1)
}

// recoveryPointPosition returns the position in data (a segment's .log
// whose first validEnd bytes hold valid batches) where the data at or
// above offset rp begins: the first batch whose last offset is ≥ rp, or,
// when no batch found holds rp, the end of the last batch found. Past
// validEnd the damaged bytes are skipped by resynchronising on the next
// structurally valid batch (length, magic 2, CRC-32C) whose offsets follow
// the last ones found, so that damage below the recovery point does not
// hide where the recovery point lies.
func recoveryPointPosition(data []byte, validEnd, rp int64) int64 {
	end := validEnd
	found, last := int64(-1), int64(-1)
	walk(data[:validEnd], func(p int64, v batch.View) bool {
		if v.LastOffset() >= rp {
			found = p
			return false
		}
		last = v.LastOffset()
		return true
	})
	if found >= 0 {
		return found
	}
	q := validEnd + 1
	for q < int64(len(data)) {
		start, ok := resyncPosition(data, q)
		if !ok {
			return end
		}
		p := start
		it := batch.NewIterator(data[start:], start)
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			if v.BaseOffset() <= last {
				break // a stale batch out of offset order
			}
			if v.LastOffset() >= rp {
				return p
			}
			last = v.LastOffset()
			p += int64(len(v))
			end = p
		}
		q = p + 1
	}
	return end
}

// resyncPosition returns the first position at or after from (searching at
// most salvageWindow bytes) where a length, magic 2 and CRC-32C check out.
func resyncPosition(data []byte, from int64) (int64, bool) {
	end := min(int64(len(data)), from+salvageWindow)
	for q := from; q+batch.HeaderSize <= end; q++ {
		b := data[q:]
		if b[batch.OffMagic] != batch.MagicV2 {
			continue
		}
		if _, err := batch.Check(b); err != nil {
			continue
		}
		return q, true
	}
	return 0, false
}

// salvage looks for structurally valid batches after the invalid region
// of segs[i] and records what the cut loses (reporting only).
func (x *run) salvage(segs []*seg, i int) {
	s := segs[i]
	m, done, err := x.mapSeg(s)
	if err != nil {
		return
	}
	defer done()
	var sv *Salvage
	_ = guard(s.logPath, func() { sv = resync(m.data, s.keepEnd+1) })
	for j := i + 1; j < len(segs); j++ {
		t := segs[j]
		if t.recover && t.scan.batches > 0 {
			if sv == nil {
				sv = &Salvage{FirstOffset: t.scan.firstBase}
			}
			sv.Batches += t.scan.batches
			sv.LastOffset = t.scan.lastOffset
			sv.Bytes += t.scan.validEnd
		}
	}
	if sv != nil {
		x.r.Salvage = sv
		x.r.problem(s.logName, s.keepEnd, kindSalvage, "%d structurally valid batches (offsets %d..%d, %d bytes) follow the invalid region and are not kept",
			sv.Batches, sv.FirstOffset, sv.LastOffset, sv.Bytes)
	}
}

// resync scans data from position from for the first position where a
// length, magic 2 and CRC-32C check out, then counts the valid batches
// from there. It searches at most salvageWindow bytes.
func resync(data []byte, from int64) *Salvage {
	q, ok := resyncPosition(data, from)
	if !ok {
		return nil
	}
	it := batch.NewIterator(data[q:], q)
	sv := &Salvage{FirstOffset: -1}
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if sv.FirstOffset < 0 {
			sv.FirstOffset = v.BaseOffset()
		}
		sv.Batches++
		sv.LastOffset = v.LastOffset()
		sv.Bytes += int64(len(v))
	}
	return sv
}

// cutAt places the cut at position pos of segs[i] (lastOffset and batches
// describe the kept prefix) and drops every later segment.
func (x *run) cutAt(segs []*seg, i int, pos, lastOffset int64, batches int, class, reason string, fail failKind) {
	s := segs[i]
	removed := s.size - pos
	for _, t := range segs[i+1:] {
		t.drop = true
		t.dropWhy = fmt.Sprintf("after the cut in segment %d at position %d", s.base, pos)
		removed += t.size
	}
	off := s.base
	if lastOffset >= 0 {
		off = lastOffset + 1
	}
	// The cause of every cut is a problem at the cut's exact position,
	// but zeros to the end of the last segment are not damage: they are
	// what a preallocated or reserved active segment holds after a crash
	// (partlog's own, or Kafka's with file.preallocate), no offset is
	// lost, and the cut is a change with a note.
	switch class {
	case ClassZeroTail:
		x.r.noteAt(s.logName, pos, kindCut, "%s: %s (%d bytes: the unwritten tail of the active segment; no offset lost)",
			class, reason, s.size-pos)
	case ClassCorruptFlushed:
		x.r.problem(s.logName, pos, kindCut, "%s: data below the recovery point is invalid: %s; offsets from %d would be cut",
			class, reason, off)
	default:
		x.r.problem(s.logName, pos, kindCut, "%s: %s; offsets from %d cut", class, reason, off)
	}
	s.cutWhy = fmt.Sprintf("%s at position %d: %s", class, pos, reason)
	s.keepEnd, s.lastOffset, s.batches = pos, lastOffset, batches
	if pos == 0 {
		s.firstBase = -1
	}
	s.recover = true
	if pos == 0 && i > 0 && (class == ClassCorruptUnflushed || class == ClassCorruptFlushed) && fail == failStructural {
		// A segment whose first batch does not belong to it (renamed to a
		// wrong base, C6) is dropped whole with its successors.
		s.drop, s.dropWhy = true, fmt.Sprintf("its first batch does not belong to it: %s", reason)
		x.r.problem(s.logName, 0, kindSegmentDropped, "segment %d dropped with every later segment", s.base)
	}
	x.setTruncation(s, pos, off, reason, class, removed)
}

func (x *run) setTruncation(s *seg, pos, off int64, reason, class string, removed int64) {
	if x.r.Truncation != nil {
		x.r.Truncation.BytesRemoved += removed
		return
	}
	x.r.Truncation = &Truncation{SegmentBaseOffset: s.base, Position: pos, Offset: off,
		BytesRemoved: removed, Reason: reason, Class: class}
}

// positionOf returns the position of the first batch of s whose last
// offset is ≥ target, with the last offset and count of the batches before
// it.
func (x *run) positionOf(s *seg, target int64) (pos, last int64, n int, err error) {
	m, done, err := x.mapSeg(s)
	if err != nil {
		return 0, 0, 0, err
	}
	defer done()
	pos, last = s.keepEnd, -1
	ferr := guard(s.logPath, func() {
		walk(m.data[:s.keepEnd], func(p int64, v batch.View) bool {
			if v.LastOffset() >= target {
				pos = p
				return false
			}
			last = v.LastOffset()
			n++
			return true
		})
	})
	return pos, last, n, ferr
}
