package server

import (
	"context"
	"encoding/binary"
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

// fetchWant is one partition a fetch asks for.
type fetchWant struct {
	rt *kmsg.FetchRequestTopic
	rp *kmsg.FetchRequestTopicPartition
}

// fetchWants returns the partitions of a fetch, each once, as Kafka's
// FetchRequest.fetchData reads them: a partition named twice is answered
// once, at its first place, with the last entry's offsets and limits.
func fetchWants(req *kmsg.FetchRequest) []fetchWant {
	type key struct {
		topic string
		part  int32
	}
	var wants []fetchWant
	var at map[key]int
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	if n > 1 {
		at = make(map[key]int, n)
	}
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if at != nil {
				k := key{rt.Topic, rp.Partition}
				if prev, ok := at[k]; ok {
					wants[prev].rp = rp
					continue
				}
				at[k] = len(wants)
			}
			wants = append(wants, fetchWant{rt: rt, rp: rp})
		}
	}
	return wants
}

// fetch reads every partition up to the high watermark (read_uncommitted)
// or the last stable offset (read_committed, with the aborted
// transactions of the range read), within the response limit (the
// request's MaxBytes, at most Config.FetchMaxBytes as Kafka's
// fetch.max.bytes caps it) and each partition's max bytes, except that
// the first batch of the first partition with data is returned whole
// however large (Kafka's at-least-one-batch rule, so a consumer always
// progresses). A partition named twice is read once (fetchWants). With
// fewer than MinBytes it waits up to MaxWait for a high watermark to
// move: one wait per request, on one channel every partition signals
// (Log.WatchHighWatermark), so a request of many partitions costs no
// goroutine per partition.
func (s *Server) fetch(req *kmsg.FetchRequest) handled {
	if req.Version >= 7 && (req.SessionID != 0 || req.SessionEpoch > 0) {
		// No fetch sessions: every fetch is a full one (session id 0).
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		resp.ErrorCode = errFetchSessionIDNotFound
		return handled{resp: resp}
	}
	wants := fetchWants(req)
	maxBytes := int(s.cfg.FetchMaxBytes)
	if req.Version >= 3 && req.MaxBytes > 0 {
		maxBytes = min(maxBytes, int(req.MaxBytes))
	}
	minBytes := min(int(req.MinBytes), maxBytes)
	first := s.fetchOnce(req, wants, maxBytes)
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if first.bytes >= minBytes || maxWait <= 0 || first.errs || len(first.watch) == 0 {
		return handled{resp: first.resp, release: first.release}
	}
	first.release()
	final := &fetchPass{}
	return handled{
		release: func() { final.release() },
		wait: func(ctx context.Context) kmsg.Response {
			ctx, cancel := context.WithTimeout(ctx, maxWait)
			defer cancel()
			moved := make(chan struct{}, 1)
			for _, w := range first.watch {
				defer w.p.log.WatchHighWatermark(moved)()
			}
			// A move between the first pass and the watch signalled
			// nothing: look once.
			for _, w := range first.watch {
				if w.p.log.HighWatermark() != w.hw {
					moved <- struct{}{}
					break
				}
			}
			for {
				select {
				case <-moved:
				case <-ctx.Done():
				}
				pass := s.fetchOnce(req, wants, maxBytes)
				if pass.bytes >= minBytes || ctx.Err() != nil || pass.errs {
					*final = pass
					return pass.resp
				}
				pass.release()
			}
		},
	}
}

func (s *Server) fetchOnce(req *kmsg.FetchRequest, wants []fetchWant, maxBytes int) fetchPass {
	var f fetchPass
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	f.resp = resp
	remaining := maxBytes
	committed := req.IsolationLevel == 1
	var t *kmsg.FetchResponseTopic
	for _, want := range wants {
		rt, rp := want.rt, want.rp
		if t == nil || t.Topic != rt.Topic || t.TopicID != rt.TopicID {
			// Consecutive partitions of one topic share its entry, as
			// Kafka's response groups them.
			resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
			t = &resp.Topics[len(resp.Topics)-1]
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
		}
		t.Partitions = append(t.Partitions, kmsg.NewFetchResponseTopicPartition())
		out := &t.Partitions[len(t.Partitions)-1]
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
