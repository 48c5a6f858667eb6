package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apply appends one partition's fetched batches.
func (l *mirrorLink) apply(ctx context.Context, mp *mirrorPart, rp *kmsg.FetchResponseTopicPartition) bool {
	p := mp.p
	setErr := func(msg string) { // as note: the source high watermark is no longer known
		l.mu.Lock()
		mp.lastErr = msg
		mp.sourceHW = -1
		l.mu.Unlock()
	}
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		if err := l.outOfRange(ctx, mp); err != nil {
			setErr(err.Error())
		}
		return false
	case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.LeaderNotAvailable.Code,
		kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.UnknownTopicID.Code:
		l.markLeadersUnknown([]*mirrorPart{mp})
		setErr("source: " + kerr.ErrorForCode(rp.ErrorCode).Error())
		return false
	default:
		setErr("source: " + kerr.ErrorForCode(rp.ErrorCode).Error())
		return false
	}
	l.mu.Lock()
	mp.sourceHW = rp.HighWatermark
	mp.lastErr = ""
	l.mu.Unlock()
	recs := wholeBatchesFrom(rp.RecordBatches, p.log.LogEndOffset())
	if err := l.checkDivergence(ctx, mp, recs); err != nil {
		setErr(err.Error())
		return false
	}
	// One append takes at most a segment (the Log refuses more): a fetch
	// brings up to 4 MiB, a topic's segment.bytes can be 1 MiB.
	for rest := recs; len(rest) > 0; {
		var chunk []byte
		_, segmentBytes := p.settings()
		chunk, rest = batchesUpTo(rest, segmentBytes)
		_, err := p.mirror.AppendMirror(mp.session, chunk)
		if errors.Is(err, mirror.ErrEpochFenced) {
			// The local epoch was raised above the batch's: same bytes again.
			_, err = p.mirror.AppendMirror(mp.session, chunk)
		}
		l.host.followMirrorEpoch(p)
		if err != nil {
			l.mu.Lock()
			mp.lastErr = err.Error()
			if !errors.Is(err, mirror.ErrEpochFenced) {
				mp.stopped = true // stopped, paused, failed or deleted: no more fetches
			}
			l.mu.Unlock()
			if !errors.Is(err, mirror.ErrNotMirroring) && !errors.Is(err, mirror.ErrFencedSession) {
				l.host.logf("mirror %s %s: %v", l.name, p.tp, err)
			}
			return false
		}
	}
	if len(recs) > 0 {
		l.host.mirrored(p)
	}
	if rp.LogStartOffset > p.log.LogStartOffset() && rp.LogStartOffset <= p.log.LogEndOffset() {
		if err := p.mirror.AdvanceLogStart(mp.session, rp.LogStartOffset); err != nil {
			setErr(err.Error())
		}
	}
	return len(recs) > 0
}

// checkDivergence runs when the first fetched batch has a leader
// epoch above the local log's latest: the source changed leaders (or
// stopped mirroring and took writes) since the last mirrored batch, and it
// may have truncated what we mirrored first, as a mirror in the middle of
// a chain does when it stops with TRUNCATE_LSO. Fetching on from the local
// log end would then join two histories silently. The source's end offset
// of our latest epoch (OffsetForLeaderEpoch) says: below our log end, the
// logs diverged and the partition goes FAILED (divergence is not resolved,
// as in outOfRange); a source that no longer has that epoch cannot
// tell, and fetching goes on.
func (l *mirrorLink) checkDivergence(ctx context.Context, mp *mirrorPart, recs []byte) error {
	if len(recs) < batch.HeaderSize {
		return nil
	}
	local := mp.p.log.LatestEpoch()
	if local < 0 || batch.View(recs).PartitionLeaderEpoch() <= local {
		return nil
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = mp.p.tp.Topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = mp.p.tp.Partition, -1, local
	t.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{t}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(octx, l.cl.Broker(int(mp.leader)))
	if err != nil {
		return fmt.Errorf("offset for leader epoch at the source: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return errors.New("offset for leader epoch at the source: malformed response")
	}
	r := resp.Topics[0].Partitions[0]
	if r.ErrorCode != 0 {
		return fmt.Errorf("offset for leader epoch at the source: %w", kerr.ErrorForCode(r.ErrorCode))
	}
	leo := mp.p.log.LogEndOffset()
	if r.LeaderEpoch < 0 || r.EndOffset < 0 || r.EndOffset >= leo {
		return nil
	}
	err = fmt.Errorf("the source's epoch %d ends at %d (epoch %d), below the mirrored log end %d: the source truncated what was mirrored (divergence is not resolved; start the mirror again)",
		local, r.EndOffset, r.LeaderEpoch, leo)
	return l.fail(mp, err)
}

// outOfRange handles OFFSET_OUT_OF_RANGE: the source's log start
// moved past our log end (retention), so the local log restarts there;
// a source log ending below ours is a divergence the engine does not
// resolve (the partition goes FAILED).
func (l *mirrorLink) outOfRange(ctx context.Context, mp *mirrorPart) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = mp.p.tp.Topic
	for _, ts := range []int64{-2, -1} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = mp.p.tp.Partition
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = ts
		t.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
		req.Topics = []kmsg.ListOffsetsRequestTopic{t}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := req.RequestWith(lctx, l.cl.Broker(int(mp.leader)))
		cancel()
		if err != nil {
			return fmt.Errorf("list offsets at the source: %w", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return errors.New("list offsets at the source: malformed response")
		}
		r := resp.Topics[0].Partitions[0]
		if r.ErrorCode != 0 {
			return fmt.Errorf("list offsets at the source: %w", kerr.ErrorForCode(r.ErrorCode))
		}
		leo := mp.p.log.LogEndOffset()
		switch {
		case ts == -2 && r.Offset > leo:
			return mp.p.mirror.AdvanceLogStart(mp.session, r.Offset)
		case ts == -1 && r.Offset < leo:
			err := fmt.Errorf("the source's log ends at %d, below the mirrored log end %d (divergence is not resolved)", r.Offset, leo)
			return l.fail(mp, err)
		}
	}
	return nil
}

// batchesUpTo splits whole batches b into a prefix of at most limit
// bytes (at least one batch, whatever its size) and the rest. Bytes that
// do not frame go whole into the prefix (the append refuses them).
func batchesUpTo(b []byte, limit int64) (head, rest []byte) {
	w := batch.NewWalker(b)
	end := 0
	for v, ok := w.Next(); ok; v, ok = w.Next() {
		if end > 0 && int64(end+len(v)) > limit {
			break
		}
		end += len(v)
	}
	if end == 0 {
		return b, nil
	}
	return b[:end], b[end:]
}

// wholeBatchesFrom returns the prefix of fetched bytes made of whole
// batches, without the batches that end below from (a fetch may start
// inside a batch). A response cut inside a batch ends before it.
func wholeBatchesFrom(b []byte, from int64) []byte {
	w := batch.NewWalker(b)
	start := 0
	for v, ok := w.Next(); ok; v, ok = w.Next() {
		if v.LastOffset() < from {
			start = w.Offset()
			continue
		}
		for _, ok := w.Next(); ok; _, ok = w.Next() {
		}
		return b[start:w.Offset()]
	}
	return nil
}

// fail moves a fetched partition to FAILED (read-only, reason kept) and
// stops fetching it; a new start recovers it. It returns err. Only the
// session mp fetched for is failed (FailMirror): the verdict of a fetch
// that a stop overtook (the stop's barrier puts the log end one past the
// source's, so the loop's next fetch is out of range and looks like a
// divergence) must not make the stopped partition read-only again.
func (l *mirrorLink) fail(mp *mirrorPart, err error) error {
	_ = mp.p.mirror.FailMirror(mp.session, err)
	l.mu.Lock()
	mp.stopped = true
	l.mu.Unlock()
	return err
}
