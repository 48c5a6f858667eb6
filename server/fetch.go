package server

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkLeaderEpoch answers a request's current leader epoch (-1: not
// checked) against the epoch this node serves the partition at.
func checkLeaderEpoch(p *partition, current int32) int16 {
	switch {
	case current < 0 || current == p.epoch.Load():
		return errNone
	case current > p.epoch.Load():
		return errUnknownLeaderEpoch
	default:
		return errFencedLeaderEpoch
	}
}

// fetchPass is one reading of a fetch request.
type fetchPass struct {
	resp  *kmsg.FetchResponse
	views []*partlog.ReadView
	bytes int
	// watch: the partitions read and the high watermark each had, for
	// the long poll.
	watch []watched
	errs  bool
}

type watched struct {
	p  *partition
	hw int64
}

func (f *fetchPass) release() {
	for _, v := range f.views {
		v.Release()
	}
	f.views = nil
}

// fetch reads every partition up to the high watermark (read_uncommitted)
// or the last stable offset (read_committed, with the aborted
// transactions of the range read), within MaxBytes and each partition's
// max bytes, except that the first batch of the first partition with data
// is returned whole however large (Kafka's at-least-one-batch rule, so a
// consumer always progresses). With fewer than MinBytes it waits (on the
// high watermarks, Log.WaitHighWatermark) up to MaxWait.
func (s *Server) fetch(req *kmsg.FetchRequest) handled {
	if req.Version >= 7 && (req.SessionID != 0 || req.SessionEpoch > 0) {
		// No fetch sessions: every fetch is a full one (session id 0).
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		resp.ErrorCode = errFetchSessionIDNotFound
		return handled{resp: resp}
	}
	first := s.fetchOnce(req)
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if first.bytes >= int(req.MinBytes) || maxWait <= 0 || first.errs || len(first.watch) == 0 {
		return handled{resp: first.resp, release: first.release}
	}
	first.release()
	final := &fetchPass{}
	return handled{
		release: func() { final.release() },
		wait: func(ctx context.Context) kmsg.Response {
			ctx, cancel := context.WithTimeout(ctx, maxWait)
			defer cancel()
			watch := first.watch
			for {
				waitAny(ctx, watch)
				pass := s.fetchOnce(req)
				if pass.bytes >= int(req.MinBytes) || ctx.Err() != nil || pass.errs {
					*final = pass
					return pass.resp
				}
				pass.release()
				watch = pass.watch
			}
		},
	}
}

// waitAny returns when one of the partitions' high watermark is above
// the value seen, or ctx ends.
func waitAny(ctx context.Context, ws []watched) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.p.log.WaitHighWatermark(ctx, w.hw); err == nil {
				cancel()
			}
		}()
	}
	wg.Wait()
}

func (s *Server) fetchOnce(req *kmsg.FetchRequest) fetchPass {
	var f fetchPass
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	f.resp = resp
	remaining := int(req.MaxBytes)
	if req.Version < 3 || remaining <= 0 {
		remaining = 1 << 30
	}
	committed := req.IsolationLevel == 1
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		t.TopicID = rt.TopicID
		t.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			out := &t.Partitions[i]
			out.Default()
			out.Partition = rp.Partition
			out.RecordBatches = []byte{}
			p, code := s.partitionFor(rt.Topic, rp.Partition)
			if code == errNone {
				code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
			}
			if code != errNone {
				out.ErrorCode = code
				f.errs = true
				continue
			}
			off := p.log.Offsets()
			out.HighWatermark, out.LastStableOffset, out.LogStartOffset = off.HighWatermark, off.LastStableOffset, off.LogStartOffset
			if rp.FetchOffset < off.LogStartOffset || rp.FetchOffset > off.LogEndOffset {
				out.ErrorCode = errOffsetOutOfRange
				f.errs = true
				continue
			}
			upTo := off.HighWatermark
			if committed {
				upTo = off.LastStableOffset
				out.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			f.watch = append(f.watch, watched{p, off.HighWatermark})
			limit := remaining
			if pm := int(rp.PartitionMaxBytes); pm > 0 && pm < limit {
				limit = pm
			}
			if limit <= 0 && f.bytes > 0 {
				continue
			}
			v, err := p.log.Read(rp.FetchOffset, max(limit, 1), upTo)
			if err != nil {
				out.ErrorCode = partlog.KafkaErrorCode(err)
				f.errs = true
				continue
			}
			if len(v.Records) == 0 || (f.bytes > 0 && len(v.Records) > limit) {
				v.Release()
				continue
			}
			f.views = append(f.views, v)
			out.RecordBatches = v.Records
			f.bytes += len(v.Records)
			remaining -= len(v.Records)
			if committed {
				aborted, err := p.log.AbortedTransactions(rp.FetchOffset, endOfBatches(v.Records))
				if err != nil {
					out.ErrorCode = partlog.KafkaErrorCode(err)
					out.RecordBatches = []byte{}
					f.errs = true
					continue
				}
				for _, a := range aborted {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
					out.AbortedTransactions = append(out.AbortedTransactions, at)
				}
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return f
}

// endOfBatches returns the offset after the last batch of whole batches.
func endOfBatches(b []byte) int64 {
	end := int64(0)
	for len(b) >= 61 {
		base := int64(binary.BigEndian.Uint64(b[0:]))
		size := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		end = base + int64(int32(binary.BigEndian.Uint32(b[23:]))) + 1
		if size <= 12 || size > len(b) {
			break
		}
		b = b[size:]
	}
	return end
}

// listOffsets answers timestamps and the special values with
// Log.OffsetForTimestamp; "latest" is the high watermark
// (read_uncommitted) or the last stable offset (read_committed), and a
// timestamp lookup finds only offsets below it, as Kafka answers.
func (s *Server) listOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = req.Version
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			out := kmsg.NewListOffsetsResponseTopicPartition()
			out.Partition = rp.Partition
			out.Offset, out.Timestamp = -1, -1
			p, code := s.partitionFor(rt.Topic, rp.Partition)
			if code == errNone {
				code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
			}
			if code != errNone {
				out.ErrorCode = code
				t.Partitions = append(t.Partitions, out)
				continue
			}
			off := p.log.Offsets()
			fetchable := off.HighWatermark
			if req.IsolationLevel == 1 {
				fetchable = off.LastStableOffset
			}
			if rp.Timestamp == partlog.ListLatest {
				out.Offset, out.LeaderEpoch = fetchable, p.epoch.Load()
				t.Partitions = append(t.Partitions, out)
				continue
			}
			r, found, err := p.log.OffsetForTimestamp(rp.Timestamp)
			switch {
			case err != nil:
				out.ErrorCode = partlog.KafkaErrorCode(err)
			case found && (rp.Timestamp < 0 || r.Offset < fetchable):
				out.Offset, out.Timestamp, out.LeaderEpoch = r.Offset, r.Timestamp, r.LeaderEpoch
				if out.LeaderEpoch < 0 && rp.Timestamp < 0 {
					out.LeaderEpoch = p.epoch.Load()
				}
			}
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// offsetForLeaderEpoch answers with Log.EndOffsetForEpoch.
func (s *Server) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.Version = req.Version
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			out := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			out.Partition = rp.Partition
			p, code := s.partitionFor(rt.Topic, rp.Partition)
			if code == errNone {
				code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
			}
			if code != errNone {
				out.ErrorCode = code
				out.LeaderEpoch, out.EndOffset = -1, -1
				t.Partitions = append(t.Partitions, out)
				continue
			}
			epoch, end := p.log.EndOffsetForEpoch(rp.LeaderEpoch)
			if epoch == partlog.UndefinedEpoch && rp.LeaderEpoch == p.epoch.Load() && p.log.LatestEpoch() < 0 {
				// Nothing written yet at this node's epoch.
				epoch, end = p.epoch.Load(), p.log.LogEndOffset()
			}
			out.LeaderEpoch, out.EndOffset = epoch, end
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
