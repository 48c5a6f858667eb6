package server

import (
	"errors"
	"path/filepath"
	"sort"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// describeLogDirs answers DescribeLogDirs (kafka-log-dirs): the one log
// directory, with each asked partition's size (Log.Size, the bytes of
// its segments' data) and an offset lag of 0 (the log end is the high
// watermark of the only replica). Topics null asks for every partition;
// an unknown topic or partition is left out, as Kafka leaves it. From v4
// the directory's total and usable bytes (statfs), from v3 a top-level
// error code.
func (s *Server) describeLogDirs(req *kmsg.DescribeLogDirsRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	resp.Version = req.Version
	d := kmsg.NewDescribeLogDirsResponseDir()
	d.Dir, _ = filepath.Abs(s.dir.Path())
	d.TotalBytes, d.UsableBytes = -1, -1
	if req.Version >= 4 {
		var st unix.Statfs_t
		if unix.Statfs(s.dir.Path(), &st) == nil {
			d.TotalBytes = int64(st.Blocks) * st.Bsize
			d.UsableBytes = int64(st.Bavail) * st.Bsize
		}
	}
	add := func(topic string, ps []*partition) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = topic
		for _, p := range ps {
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = p.tp.Partition, p.log.Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			d.Topics = append(d.Topics, dt)
		}
	}
	if req.Topics == nil {
		s.tmu.RLock()
		names := make([]string, 0, len(s.topics))
		for name := range s.topics {
			names = append(names, name)
		}
		s.tmu.RUnlock()
		sort.Strings(names)
		for _, name := range names {
			add(name, s.partitionsOf(name, nil))
		}
	}
	for _, rt := range req.Topics {
		add(rt.Topic, s.partitionsOf(rt.Topic, rt.Partitions))
	}
	resp.Dirs = append(resp.Dirs, d)
	return resp
}

// partitionsOf returns the served partitions of a topic among nums (all
// of them for nil), in the order asked.
func (s *Server) partitionsOf(topic string, nums []int32) []*partition {
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	t := s.topics[topic]
	if t == nil {
		return nil
	}
	var out []*partition
	if nums == nil {
		for _, p := range t.parts {
			if p != nil {
				out = append(out, p)
			}
		}
		return out
	}
	for _, n := range nums {
		if n >= 0 && int(n) < len(t.parts) && t.parts[n] != nil {
			out = append(out, t.parts[n])
		}
	}
	return out
}

// describeProducers answers DescribeProducers (kafka-transactions
// describe-producers): each partition's producer state (Log.Producers),
// as Kafka lists its active producers: epoch, last sequence, the last
// batch's timestamp, the coordinator epoch of its last marker, and the
// first offset of its open transaction.
func (s *Server) describeProducers(req *kmsg.DescribeProducersRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeProducersResponse()
	resp.Version = req.Version
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for _, n := range rt.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = n
			p, code := s.partitionFor(rt.Topic, n)
			if code != errNone {
				rp.ErrorCode = code
				t.Partitions = append(t.Partitions, rp)
				continue
			}
			entries := p.log.Producers()
			sort.Slice(entries, func(i, j int) bool { return entries[i].ProducerID < entries[j].ProducerID })
			for _, e := range entries {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = e.ProducerID, int32(e.ProducerEpoch)
				ap.LastSequence, ap.LastTimestamp = e.LastSequence, e.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = e.CoordinatorEpoch, e.CurrentTxnFirstOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// describeCluster answers DescribeCluster (the admin client's
// describeCluster): this node as the only broker and the controller.
func (s *Server) describeCluster(cc *connCtx, req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.Version = req.Version
	if req.Version >= 1 && req.EndpointType != 1 {
		// Only brokers are described (endpoint type 1); Kafka's brokers
		// refuse the controllers' type the same way.
		resp.ErrorCode = errUnsupportedEndpointType
		return resp
	}
	resp.EndpointType = 1
	resp.ClusterID = s.meta.clusterID()
	resp.ControllerID = s.cfg.NodeID
	host, port := cc.hostPort()
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, host, port
	resp.Brokers = append(resp.Brokers, b)
	resp.ClusterAuthorizedOperations = -2147483648
	return resp
}

// deleteRecords answers DeleteRecords (kafka-delete-records): the log
// start offset raised to the offset asked (-1: the high watermark), as
// Kafka's ReplicaManager.deleteRecords: past the high watermark is
// OFFSET_OUT_OF_RANGE, at or below the log start changes nothing; the
// answer is the log start offset after (the low watermark). Segments
// wholly below it are deleted at once (Log.SetLogStartOffset).
func (s *Server) deleteRecords(req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := kmsg.NewPtrDeleteRecordsResponse()
	resp.Version = req.Version
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			out := kmsg.NewDeleteRecordsResponseTopicPartition()
			out.Partition, out.LowWatermark = rp.Partition, -1
			p, code := s.partitionFor(rt.Topic, rp.Partition)
			if code == errNone && p.mirror.State().ReadOnly() {
				code = errPolicyViolation
			}
			if code == errNone {
				hw := p.log.HighWatermark()
				offset := rp.Offset
				if offset == -1 {
					offset = hw
				}
				switch {
				case offset < 0 || offset > hw:
					code = errOffsetOutOfRange
				default:
					if err := p.log.SetLogStartOffset(offset); err != nil {
						code = partlog.KafkaErrorCode(err)
						var oe *partlog.OffsetError
						if errors.As(err, &oe) {
							code = errOffsetOutOfRange
						}
					}
				}
				if code == errNone {
					out.LowWatermark = p.log.LogStartOffset()
				}
			}
			out.ErrorCode = code
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// describeTopicPartitions answers DescribeTopicPartitions (KIP-966; the
// admin client's describeTopics, kafka-topics --describe): the topics
// asked (every topic when none is named), in name order, each partition
// with this node as leader, replica and ISR and empty eligible-leader
// lists, at most ResponsePartitionLimit partitions (Kafka caps it at
// 2000) from the cursor on; NextCursor names where the next page starts.
func (s *Server) describeTopicPartitions(req *kmsg.DescribeTopicPartitionsRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	resp.Version = req.Version
	var names []string
	if len(req.Topics) == 0 {
		s.tmu.RLock()
		for name := range s.topics {
			names = append(names, name)
		}
		s.tmu.RUnlock()
	} else {
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
	}
	sort.Strings(names)
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > 2000 {
		limit = 2000
	}
	for _, name := range names {
		if c := req.Cursor; c != nil && name < c.Topic {
			continue
		}
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		n := name
		t.Topic = &n
		t.AuthorizedOperations = -2147483648
		tp := s.topicByName(name)
		if tp == nil {
			t.ErrorCode = errUnknownTopicOrPartition
			if !validTopicName(name) {
				t.ErrorCode = errInvalidTopic
			}
			resp.Topics = append(resp.Topics, t)
			continue
		}
		s.tmu.RLock()
		t.TopicID = tp.id
		parts := append([]*partition(nil), tp.parts...)
		s.tmu.RUnlock()
		from := int32(0)
		if c := req.Cursor; c != nil && name == c.Topic {
			from = c.Partition
		}
		for i, p := range parts {
			if int32(i) < from {
				continue
			}
			if limit == 0 {
				nc := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
				nc.Topic, nc.Partition = name, int32(i)
				resp.NextCursor = &nc
				break
			}
			limit--
			rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			rp.Partition = int32(i)
			if p == nil {
				rp.ErrorCode, rp.LeaderID = errUnknownTopicOrPartition, -1
			} else {
				rp.LeaderID, rp.LeaderEpoch = s.cfg.NodeID, p.epoch.Load()
				rp.Replicas, rp.ISR = []int32{s.cfg.NodeID}, []int32{s.cfg.NodeID}
				rp.EligibleLeaderReplicas, rp.LastKnownELR, rp.OfflineReplicas = []int32{}, []int32{}, []int32{}
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
		if resp.NextCursor != nil {
			break
		}
	}
	return resp
}
