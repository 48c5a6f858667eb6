package segment

import (
	"encoding/binary"
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
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
// caller (batch.Check on each), to the end of the active segment. For
// each batch it copies the 61-byte header first, stamps the base offset
// and leader epoch (Assign), then copies the rest, so a crash can never
// leave a CRC-valid batch with the client's offsets behind the published
// end (recovery.md §9 item 7). src is never modified and no CRC is
// computed. The new size is published after everything is in place.
//
// Index entries follow Kafka's cadence (recovery.md §3.2): one offset
// entry, and a time entry when the largest timestamp grew, for an append
// that starts after more than IndexIntervalBytes since the last entry.
// Append does not allocate. Owner only.
func (s *Segment) Append(src []byte, st Stamp, out *Appended) error {
	if !s.active {
		return ErrSealed
	}
	pos := s.size.Load()
	data := s.log.Bytes()
	if int64(len(src)) > int64(len(data))-pos {
		return fmt.Errorf("%w: %d bytes at position %d of %d", ErrFull, len(src), pos, len(data))
	}
	dst := data[pos : pos+int64(len(src))]
	*out = Appended{Position: pos, FirstOffset: -1, MaxTimestamp: batch.NoTimestamp}
	next := st.NextOffset
	maxTs, offMaxTs := batch.NoTimestamp, int64(-1)
	for p := 0; p < len(src); {
		n := int(binary.BigEndian.Uint32(src[p+batch.OffBatchLength:])) + batch.LogOverhead
		if n < batch.HeaderSize || n > len(src)-p {
			return fmt.Errorf("partlog/segment: append of unvalidated bytes at %d", p)
		}
		copy(dst[p:p+batch.HeaderSize], src[p:p+batch.HeaderSize])
		v := batch.View(dst[p : p+n])
		if st.Assign {
			v.SetBaseOffset(next)
			v.SetPartitionLeaderEpoch(st.LeaderEpoch)
		}
		copy(dst[p+batch.HeaderSize:p+n], src[p+batch.HeaderSize:p+n])
		last := v.LastOffset()
		if out.FirstOffset < 0 {
			out.FirstOffset = v.BaseOffset()
		}
		if ts := v.MaxTimestamp(); ts > maxTs {
			maxTs, offMaxTs = ts, last
		}
		next = last + 1
		out.Batches++
		p += n
	}
	out.LastOffset = next - 1
	out.MaxTimestamp, out.OffsetOfMaxTimestamp = maxTs, offMaxTs
	if !index.CanConvertToRelative(s.base, out.LastOffset) || out.FirstOffset < s.base {
		return fmt.Errorf("%w: offsets %d..%d in segment %d", ErrOffsetOverflow, out.FirstOffset, out.LastOffset, s.base)
	}
	if pos == 0 {
		s.rollingTimestamp = maxTs
	}
	if maxTs > s.maxTimestamp {
		s.maxTimestamp, s.offsetOfMaxTimestamp = maxTs, offMaxTs
	}
	if s.bytesSinceIndex > s.cfg.IndexIntervalBytes {
		if err := s.offsetIndex.Append(out.LastOffset, int32(pos)); err != nil {
			return err
		}
		if _, err := s.timeIndex.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, false); err != nil {
			return err
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(len(src))
	s.nextOffset.Store(next)
	s.size.Store(pos + int64(len(src)))
	if s.prefaulter != nil {
		s.prefaulter.Advance(pos + int64(len(src)))
	}
	return nil
}

// AppendAbortedTxn records an aborted transaction in the segment's
// .txnindex. Owner only.
func (s *Segment) AppendAbortedTxn(e index.AbortedTxn) error {
	if !s.active {
		return ErrSealed
	}
	return s.txnIndex.Append(e)
}
