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
	// From v13 a topic is named by its id alone (the name is empty).
	type key struct {
		topic string
		id    [16]byte
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
				k := key{rt.Topic, rt.TopicID, rp.Partition}
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
// goroutine per partition. The partitions are the request's, or with an
// incremental fetch its session's (fetch_session.go).
func (s *Server) fetch(cc *connCtx, req *kmsg.FetchRequest) handled {
	sf := cc.beginFetch(req)
	if sf.errCode != errNone {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		cc.finishFetch(sf, resp)
		return handled{resp: resp}
	}
	wants := sf.wants
	maxBytes := int(s.cfg.FetchMaxBytes)
	if req.Version >= 3 && req.MaxBytes > 0 {
		maxBytes = min(maxBytes, int(req.MaxBytes))
	}
	minBytes := min(int(req.MinBytes), maxBytes)
	first := s.fetchOnce(req, wants, maxBytes)
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if first.bytes >= minBytes || maxWait <= 0 || first.errs || len(first.watch) == 0 {
		cc.finishFetch(sf, first.resp)
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
			// nothing: look once. A move after its watch may have
			// filled the slot already, so the send must not wait.
			for _, w := range first.watch {
				if w.p.log.HighWatermark() != w.hw {
					select {
					case moved <- struct{}{}:
					default:
					}
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
					cc.finishFetch(sf, pass.resp)
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
		// A partition answered with an error carries no offsets (-1), as
		// Kafka's error answers do.
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
		name, code := rt.Topic, errNone
		if req.Version >= 13 {
			var ok bool
			if name, ok = s.topicNameForID(rt.TopicID); !ok {
				code = errUnknownTopicID
			}
		}
		var p *partition
		if code == errNone {
			p, code = s.partitionFor(name, rp.Partition)
		}
		if code == errNone {
			code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
		}
		if code != errNone {
			out.ErrorCode = code
			f.errs = true
			continue
		}
		off := p.log.Offsets()
		if rp.FetchOffset < off.LogStartOffset || rp.FetchOffset > off.LogEndOffset {
			out.ErrorCode = errOffsetOutOfRange
			f.errs = true
			continue
		}
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = off.HighWatermark, off.LastStableOffset, off.LogStartOffset
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
			out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
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
				out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
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

// listTimestampFrom is the ListOffsets version from which a special
// timestamp may be asked; any other negative timestamp is
// UNSUPPORTED_VERSION, as Kafka answers.
var listTimestampFrom = map[int64]int16{
	partlog.ListLatest:        0,
	partlog.ListEarliest:      0,
	partlog.ListMaxTimestamp:  7,
	partlog.ListEarliestLocal: 8,
	partlog.ListLatestTiered:  9,
	-6:                        11, // earliest pending upload (KIP-1023)
}

// listOffsets answers timestamps and the special values with
// Log.OffsetForTimestamp, with Kafka's rules: a special timestamp only
// from the version that defines it; a partition named twice answered
// once, INVALID_REQUEST; "latest" is the last offset a consumer of the
// isolation level may fetch (the high watermark, the last stable offset
// read_committed, the log end below v2, which has no isolation level);
// a timestamp lookup and the max-timestamp lookup find only offsets
// below it (offset -1 otherwise); the tiered-storage lookups (-5, -6)
// find none, and the earliest local offset (-4) is the log start offset.
func (s *Server) listOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = req.Version
	type key struct {
		topic string
		part  int32
	}
	seen := map[key]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[key{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			n := seen[key{rt.Topic, rp.Partition}]
			if n < 0 {
				continue // a duplicate, answered at its first place
			}
			seen[key{rt.Topic, rp.Partition}] = -1
			out := kmsg.NewListOffsetsResponseTopicPartition()
			out.Partition = rp.Partition
			out.Offset, out.Timestamp, out.LeaderEpoch = -1, -1, -1
			code := errNone
			if n > 1 {
				code = errInvalidRequest
			}
			if from, ok := listTimestampFrom[rp.Timestamp]; code == errNone && rp.Timestamp < 0 && (!ok || req.Version < from) {
				code = errUnsupportedVersion
			}
			var p *partition
			if code == errNone {
				p, code = s.partitionFor(rt.Topic, rp.Partition)
			}
			if code == errNone {
				code = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
			}
			if code == errNone {
				code = s.listOffset(req, p, rp.Timestamp, &out)
			}
			out.ErrorCode = code
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// listOffset answers one partition's ListOffsets lookup into out.
func (s *Server) listOffset(req *kmsg.ListOffsetsRequest, p *partition, ts int64, out *kmsg.ListOffsetsResponseTopicPartition) int16 {
	off := p.log.Offsets()
	fetchable := off.LogEndOffset
	switch {
	case req.Version < 2:
	case req.IsolationLevel == 1:
		fetchable = off.LastStableOffset
	default:
		fetchable = off.HighWatermark
	}
	switch ts {
	case partlog.ListLatest:
		out.Offset, out.LeaderEpoch = fetchable, p.epoch.Load()
		return errNone
	case partlog.ListLatestTiered, -6:
		return errNone
	case partlog.ListEarliestLocal:
		ts = partlog.ListEarliest
	}
	r, found, err := p.log.OffsetForTimestamp(ts)
	switch {
	case err != nil:
		return partlog.KafkaErrorCode(err)
	case !found:
	case ts == partlog.ListEarliest:
		out.Offset, out.LeaderEpoch = r.Offset, r.LeaderEpoch
		if out.LeaderEpoch < 0 {
			out.LeaderEpoch = p.epoch.Load()
		}
	case r.Offset < fetchable:
		out.Offset, out.Timestamp, out.LeaderEpoch = r.Offset, r.Timestamp, r.LeaderEpoch
	}
	return errNone
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
