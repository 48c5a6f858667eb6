package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/mirror"
)

// StartMirror starts a mirror session src → dst (mirror.md §2.5):
// LOG_ALIGNMENT truncates dst to the position src recorded for its own
// last mirror from dst's cluster (LMO, lowered to the first local batch
// whose epoch is above LME), or to 0 when src has none; EPOCH_FENCING
// raises dst's epoch to src's + 10 when src's is above dst's - 3; then
// MIRRORING.
func (h *Harness) StartMirror(src, dst *Partition) error {
	if dst.source != nil {
		return fmt.Errorf("sim: %s already mirrors %s", dst, dst.source)
	}
	if src.source == dst {
		return fmt.Errorf("sim: %s mirrors %s: loop", src, dst)
	}
	target := int64(0)
	how := "no position for us → 0"
	if src.hasPos && src.posSource == dst.c.ID {
		target = min(src.posOffset, dst.log.LogEndOffset())
		lme := src.posEpoch
		err := forEachBatch(dst.log, 0, target, func(v batch.View, _ *batch.BatchHeader) error {
			if v.PartitionLeaderEpoch() > lme {
				target = v.BaseOffset()
				return errStop
			}
			return nil
		})
		if err != nil {
			return err
		}
		how = fmt.Sprintf("position (LME %d, LMO %d) → %d", src.posEpoch, src.posOffset, target)
	}
	if dst.mp != nil {
		pos, err := src.mp.LastMirrorPosition(dst.c.ID, topicID(dst.Topic), 0)
		if err != nil && !errors.Is(err, mirror.ErrNotFound) {
			return err
		}
		how = "no position for us → 0"
		if pos.Found {
			how = fmt.Sprintf("position (LME %d, LMO %d)", pos.Epoch, pos.Offset)
		}
		leo := dst.log.LogEndOffset()
		sess, err := dst.mp.Start(mirror.StartRequest{MirrorName: src.c.Name + "-" + dst.c.Name, SourceClusterID: src.c.ID,
			TopicID: topicID(dst.Topic), SourcePosition: pos, SourceLeaderEpoch: src.epoch, SourceMirrorsFromUs: src.source == dst})
		if err != nil {
			return fmt.Errorf("sim: start %s → %s: %w", src, dst, err)
		}
		target = dst.log.LogEndOffset()
		how += fmt.Sprintf(" → %d", target)
		if target < leo {
			dst.pruneExpiries(target)
		}
		dst.session = sess
		dst.epoch = dst.mp.LeaderEpoch()
	} else {
		if err := dst.truncate(target); err != nil {
			return err
		}
		if err := dst.log.Flush(); err != nil {
			return err
		}
		if se := src.epoch; se > dst.epoch-FenceMargin {
			dst.epoch = se + FenceIncrement
		}
	}
	dst.source = src
	dst.stopped = false
	dst.sess = &session{src: src, dst: dst, from: target, active: true}
	h.sessions = append(h.sessions, dst.sess)
	h.note("start mirror %s → %s: %s; epoch %d; MIRRORING", src.c.Name, dst, how, dst.epoch)
	return nil
}

// truncate cuts the log at offset as a protocol step (alignment or stop).
func (p *Partition) truncate(offset int64) error {
	if offset >= p.log.LogEndOffset() {
		return nil
	}
	if err := p.log.TruncateTo(offset); err != nil {
		return err
	}
	p.pruneExpiries(offset)
	if p.pidmap != nil && offset == 0 {
		p.pidmap.Reset()
	}
	p.log.SetHighWatermark(p.log.LogEndOffset())
	return nil
}

// pruneExpiries forgets the expiration events above a truncation point.
func (p *Partition) pruneExpiries(offset int64) {
	kept := p.expiries[:0]
	for _, e := range p.expiries {
		if e.offset <= offset {
			kept = append(kept, e)
		}
	}
	p.expiries = kept
}

// Fetch runs dst's mirror fetch loop until it has everything its source
// has below the source's high watermark (nothing if the source cluster
// is down). It reports how many batches were appended.
func (h *Harness) Fetch(dst *Partition) (int, error) {
	src := dst.source
	if src == nil || src.c.down || dst.c.down {
		return 0, nil
	}
	if err := h.reconcile(dst, src); err != nil {
		return 0, err
	}
	n := 0
	for {
		leo := dst.log.LogEndOffset()
		rv, err := src.log.Read(leo, 16<<10, src.log.HighWatermark())
		if err != nil {
			return n, fmt.Errorf("sim: fetch %s from %s at %d: %w", dst, src, leo, err)
		}
		if len(rv.Records) == 0 {
			rv.Release()
			break
		}
		k, err := h.mirrorAppend(dst, rv.Records)
		rv.Release()
		if err != nil {
			return n, err
		}
		n += k
	}
	if n > 0 {
		h.note("%s fetched %d batch(es) from %s; LEO %d", dst, n, src, dst.log.LogEndOffset())
	}
	return n, nil
}

// reconcile truncates dst where its log diverges from src's, as a
// follower does with the last fetched epoch (mirror.md §2.5, "later
// divergence"): for dst's latest epoch E, src's end offset of E is the
// start of src's first epoch above E (or src's log end); dst is cut there
// if it holds more, and the check repeats with dst's new latest epoch.
func (h *Harness) reconcile(dst, src *Partition) error {
	for {
		leo := dst.log.LogEndOffset()
		es := dst.log.LeaderEpochs()
		if len(es) == 0 || leo == 0 {
			return nil
		}
		e := es[len(es)-1].Epoch
		end := src.log.LogEndOffset()
		for _, se := range src.log.LeaderEpochs() {
			if se.Epoch > e {
				end = se.StartOffset
				break
			}
		}
		if end >= leo {
			return nil
		}
		if err := dst.truncate(end); err != nil {
			return err
		}
		h.note("%s diverges from %s at epoch %d: truncated %d → %d", dst, src, e, leo, dst.log.LogEndOffset())
	}
}

// mirrorAppend appends one fetch response: the local epoch is raised
// above every fetched batch's (EPOCH_FENCING), the producer ids are
// rewritten for the rewriting strategies, then AppendAsMirror.
func (h *Harness) mirrorAppend(dst *Partition, fetched []byte) (int, error) {
	top, n := int32(-1), 0
	it := batch.NewIterator(fetched, 0)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		top = max(top, v.PartitionLeaderEpoch())
		n++
	}
	if dst.mp != nil {
		_, err := dst.mp.AppendMirror(dst.session, fetched)
		if errors.Is(err, mirror.ErrEpochFenced) { // fenced to the batch epoch + 10: retry
			_, err = dst.mp.AppendMirror(dst.session, fetched)
		}
		dst.epoch = dst.mp.LeaderEpoch()
		if err != nil {
			return 0, fmt.Errorf("sim: mirror append to %s: %w", dst, err)
		}
		return n, nil
	}
	if top > dst.epoch-FenceMargin {
		dst.epoch = top + FenceIncrement
	}
	records := fetched
	if h.strategy.Rewrites() {
		records = append([]byte(nil), fetched...)
		if err := RewritePIDs(records, dst.mapper(dst.source.c)); err != nil {
			return 0, err
		}
	}
	if _, err := dst.log.AppendAsMirror(records); err != nil {
		return 0, fmt.Errorf("sim: mirror append to %s: %w", dst, err)
	}
	dst.log.SetHighWatermark(dst.log.LogEndOffset())
	return n, nil
}

// mapper returns the producer-id rewrite of the strategy for batches
// fetched from cluster src.
func (p *Partition) mapper(src *Cluster) func(int64) (int64, error) {
	switch p.c.h.strategy {
	case Negation:
		return func(pid int64) (int64, error) { return Negate(pid), nil }
	case IdempotentNegation:
		return func(pid int64) (int64, error) { return NegateIdempotent(pid), nil }
	case BitField:
		return func(pid int64) (int64, error) {
			return p.pidmap.Map(src.ID, src.msb, src.lsb, pid, p.c.h.clock)
		}
	}
	return func(pid int64) (int64, error) { return pid, nil }
}

// Stop ends dst's mirror session (mirror.md §2.7 with TRUNCATE_LSO): the
// fetcher stops, the log is truncated to its last stable offset and
// flushed, the position (LME, LMO) is recorded, the leader epoch goes to
// E_stop = max(local, LME)+1, and with the barrier strategy the
// MIRROR_PID_RESET barrier is appended at E_stop and flushed. Then the
// partition accepts local producers.
func (h *Harness) Stop(dst *Partition) error {
	src := dst.source
	if src == nil {
		return fmt.Errorf("sim: %s is not mirroring", dst)
	}
	if dst.mp != nil {
		return h.stopWithMirror(dst, src)
	}
	dst.source = nil // S1: no mirror append after this
	dst.log.SetHighWatermark(dst.log.LogEndOffset())
	before := dst.log.LogEndOffset()
	lso := dst.log.LastStableOffset()
	if h.keepOpen && !h.strategy.WritesBarrier() {
		lso = before
	}
	if err := dst.truncate(lso); err != nil { // S2
		return err
	}
	if err := dst.log.Flush(); err != nil {
		return err
	}
	lmo := dst.log.LogEndOffset() // S3
	lme := int32(-1)
	if es := dst.log.LeaderEpochs(); len(es) > 0 {
		lme = es[len(es)-1].Epoch
	}
	dst.epoch = max(dst.epoch, lme) + 1 // S4
	msg := fmt.Sprintf("stop mirror on %s: truncated %d → %d; LME %d, LMO %d; E_stop %d", dst, before, lmo, lme, lmo, dst.epoch)
	if h.strategy.WritesBarrier() { // S6 (no transaction is open after S2)
		ts := h.tick()
		name := "CB(" + dst.c.Name + ")"
		h.owners[ts] = name
		records := batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: dst.epoch, Timestamp: ts}, src.c.ID)
		info, err := dst.log.AppendAsCoordinator(records, dst.epoch)
		if err != nil {
			return fmt.Errorf("sim: barrier on %s: %w", dst, err)
		}
		if err := dst.log.Flush(); err != nil {
			return err
		}
		dst.log.SetHighWatermark(dst.log.LogEndOffset())
		msg += fmt.Sprintf("; %s at %d src=%s", name, info.FirstOffset, src.c.Name)
		if err := h.dumpBarrier(dst, info.FirstOffset); err != nil {
			return err
		}
	} else {
		msg += "; no barrier (" + h.strategy.String() + ")"
	}
	dst.posSource, dst.posEpoch, dst.posOffset, dst.hasPos = src.c.ID, lme, lmo, true
	dst.stopped = true
	h.compareSession(dst.sess, lmo)
	dst.sess.active = false
	dst.sess = nil
	h.note("%s; STOPPED", msg)
	return nil
}

// stopWithMirror runs package mirror's crash-safe stop (TRUNCATE_LSO).
func (h *Harness) stopWithMirror(dst, src *Partition) error {
	dst.source = nil
	before := dst.log.LogEndOffset()
	r, err := dst.mp.Stop(context.Background(), mirror.TruncateLSO)
	if err != nil {
		return fmt.Errorf("sim: stop %s: %w", dst, err)
	}
	if r.TruncatedFrom >= 0 && r.LastMirrorOffset < before {
		dst.pruneExpiries(r.LastMirrorOffset)
	}
	dst.epoch = r.StopLeaderEpoch
	ts := int64(-1)
	_ = forEachBatch(dst.log, r.BarrierOffset, r.BarrierOffset+1, func(v batch.View, _ *batch.BatchHeader) error {
		ts = v.MaxTimestamp()
		return errStop
	})
	name := "CB(" + dst.c.Name + ")"
	h.owners[ts] = name
	if err := h.dumpBarrier(dst, r.BarrierOffset); err != nil {
		return err
	}
	dst.posSource, dst.posEpoch, dst.posOffset, dst.hasPos = src.c.ID, r.LastMirrorEpoch, r.LastMirrorOffset, true
	dst.stopped = true
	h.compareSession(dst.sess, r.LastMirrorOffset)
	dst.sess.active = false
	dst.sess = nil
	h.note("stop mirror on %s (package mirror): truncated %d → %d; LME %d, LMO %d; E_stop %d; %s at %d src=%s; STOPPED",
		dst, before, r.LastMirrorOffset, r.LastMirrorEpoch, r.LastMirrorOffset, r.StopLeaderEpoch, name, r.BarrierOffset, src.c.Name)
	return nil
}

// Expire runs producer expiration on p as if its clock had moved past
// producer.id.expiration.ms (per node: other clusters' clocks do not move).
func (h *Harness) Expire(p *Partition) int {
	p.c.skewMs += 2 * expirationMs
	n := p.log.ExpireProducers()
	p.expiries = append(p.expiries, expiry{offset: p.log.LogEndOffset(), nowMs: h.clock + p.c.skewMs})
	h.note("%s: producer ids expire by time (%d removed)", p, n)
	return n
}

// FetchAll runs every active session's fetch loop until nothing moves.
func (h *Harness) FetchAll() error {
	for {
		moved := 0
		for _, s := range h.sessions {
			if !s.active {
				continue
			}
			n, err := h.Fetch(s.dst)
			if err != nil {
				return err
			}
			moved += n
		}
		if moved == 0 {
			return nil
		}
	}
}

// dumpBarrier renders the barrier at offset as the dump tool does: the
// batch header line and the decoded control record.
func (h *Harness) dumpBarrier(p *Partition, offset int64) error {
	var d BarrierDump
	err := forEachBatch(p.log, offset, offset+1, func(v batch.View, _ *batch.BatchHeader) error {
		d = renderBarrier(p.String(), v)
		return errStop
	})
	if err != nil {
		return err
	}
	if d.Header == "" {
		return errors.New("sim: barrier not found after its append")
	}
	h.res.Barriers = append(h.res.Barriers, d)
	return nil
}

// BarrierDump is a barrier as the dump tool prints it.
type BarrierDump struct {
	Node   string `json:"node"`
	Offset int64  `json:"offset"`
	Header string `json:"header"`
	Record string `json:"record"`
}

func renderBarrier(node string, v batch.View) BarrierDump {
	d := BarrierDump{Node: node, Offset: v.BaseOffset()}
	d.Header = fmt.Sprintf("baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t %s: %d size: %d magic: %d compresscodec: %s crc: %d",
		v.BaseOffset(), v.LastOffset(), v.RecordsCount(), v.BaseSequence(), v.LastSequence(), v.ProducerID(),
		v.ProducerEpoch(), v.PartitionLeaderEpoch(), v.IsTransactional(), v.IsControl(), v.TimestampType(),
		v.MaxTimestamp(), v.Size(), v.Magic(), v.Compression(), v.CRC())
	var r batch.Record
	if t, _, err := v.ControlRecord(nil, &r); err == nil {
		val, err := batch.DecodeControlValue(t, r.Value)
		if m, ok := val.(batch.MirrorPidReset); ok && err == nil {
			d.Record = fmt.Sprintf("| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [] MirrorPidReset %s",
				r.Offset, v.TimestampType(), r.Timestamp, r.KeySize(), r.ValueSize(), r.Sequence, m.JSON())
		}
	}
	return d
}
