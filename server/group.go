package server

import "github.com/twmb/franz-go/pkg/kmsg"

// findCoordinator answers this node for transactional ids (type 1)
// always, and for groups (type 0) when a group coordinator is
// configured; otherwise COORDINATOR_NOT_AVAILABLE.
func (s *Server) findCoordinator(cc *connCtx, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = req.Version
	host, port := cc.hostPort()
	code := errNone
	switch req.CoordinatorType {
	case 0:
		if s.cfg.Groups == nil {
			code = errCoordinatorNotAvailable
		}
	case 1:
	default:
		code = errInvalidRequest
	}
	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.ErrorCode = key, code
		c.NodeID, c.Host, c.Port = -1, "", -1
		if code == errNone {
			c.NodeID, c.Host, c.Port = s.cfg.NodeID, host, port
		} else {
			msg := "no group coordinator on this node"
			if code == errInvalidRequest {
				msg = "unknown coordinator type"
			}
			c.ErrorMessage = &msg
		}
		return c
	}
	if req.Version >= 4 {
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, answer(k))
		}
		return resp
	}
	c := answer(req.CoordinatorKey)
	resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
	return resp
}

// unknownGroupPartitions answers, as Kafka's KafkaApis does before it
// calls the group coordinator, the partitions of an OffsetCommit or an
// OffsetDelete that this server does not have: UNKNOWN_TOPIC_OR_PARTITION
// for them, the others passed on. It returns nil when every partition is
// known (the request goes to the coordinator as it is); otherwise it
// asks the coordinator for the known ones itself and merges the answers.
func (s *Server) unknownGroupPartitions(req kmsg.Request) kmsg.Response {
	known := func(topic string, p int32) bool { _, code := s.partitionFor(topic, p); return code == errNone }
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		if r.Version >= 10 { // topics by id: the coordinator does not take them
			return nil
		}
		sub := *r
		var unknown bool
		sub.Topics, unknown = knownPartitions(r.Topics, known,
			func(t *kmsg.OffsetCommitRequestTopic) (string, *[]kmsg.OffsetCommitRequestTopicPartition) {
				return t.Topic, &t.Partitions
			},
			func(p kmsg.OffsetCommitRequestTopicPartition) int32 { return p.Partition })
		if !unknown {
			return nil
		}
		codes := partitionCodes{}
		if len(sub.Topics) > 0 {
			if resp, ok := s.cfg.Groups.Handle(s.ctx, &sub); ok {
				for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
					for _, p := range t.Partitions {
						codes.set(t.Topic, p.Partition, p.ErrorCode)
					}
				}
			}
		}
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.Version = r.Version
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes.get(t.Topic, p.Partition)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.OffsetDeleteRequest:
		sub := *r
		var unknown bool
		sub.Topics, unknown = knownPartitions(r.Topics, known,
			func(t *kmsg.OffsetDeleteRequestTopic) (string, *[]kmsg.OffsetDeleteRequestTopicPartition) {
				return t.Topic, &t.Partitions
			},
			func(p kmsg.OffsetDeleteRequestTopicPartition) int32 { return p.Partition })
		if !unknown {
			return nil
		}
		got, ok := s.cfg.Groups.Handle(s.ctx, &sub)
		if !ok {
			return nil
		}
		sr := got.(*kmsg.OffsetDeleteResponse)
		if sr.ErrorCode != errNone {
			return sr // the group's error answers the request (Kafka lists no partition)
		}
		codes := partitionCodes{}
		for _, t := range sr.Topics {
			for _, p := range t.Partitions {
				codes.set(t.Topic, p.Partition, p.ErrorCode)
			}
		}
		resp := kmsg.NewPtrOffsetDeleteResponse()
		resp.Version = r.Version
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes.get(t.Topic, p.Partition)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	return nil
}

// knownPartitions returns the topics of a request cut to the partitions
// known reports, without the topics left empty, and whether any
// partition was cut; topic gives a topic's name and partitions, part a
// partition's number (the request types differ only in their names).
func knownPartitions[T, P any](topics []T, known func(string, int32) bool,
	topic func(*T) (string, *[]P), part func(P) int32) (kept []T, unknown bool) {
	for _, t := range topics {
		name, ps := topic(&t)
		all := *ps
		*ps = nil
		for _, p := range all {
			if known(name, part(p)) {
				*ps = append(*ps, p)
			} else {
				unknown = true
			}
		}
		if len(*ps) > 0 {
			kept = append(kept, t)
		}
	}
	return kept, unknown
}

// partitionCodes are the error codes the group coordinator answered for
// the partitions of a request it was handed; any other partition of the
// request is unknown to the server.
type partitionCodes map[string]map[int32]int16

func (c partitionCodes) set(topic string, partition int32, code int16) {
	if c[topic] == nil {
		c[topic] = map[int32]int16{}
	}
	c[topic][partition] = code
}

func (c partitionCodes) get(topic string, partition int32) int16 {
	if code, ok := c[topic][partition]; ok {
		return code
	}
	return errUnknownTopicOrPartition
}
