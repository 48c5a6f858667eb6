package group

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDeleteGroups deletes groups with their committed offsets, as
// Kafka's GroupCoordinator.handleDeleteGroups: a group with members
// cannot be deleted (NON_EMPTY_GROUP), an unknown one answers
// GROUP_ID_NOT_FOUND. The state file is rewritten once for the request;
// when that fails the groups are kept and COORDINATOR_NOT_AVAILABLE
// answered for them.
func (c *Coordinator) handleDeleteGroups(req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	top := c.enter(req)
	if top == errNone {
		defer c.unlock()
	}
	deleted := map[string]*group{}
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, top
		if g := c.groups[id]; top == errNone {
			switch {
			case id == "":
				rg.ErrorCode = errInvalidGroupID
			case g == nil || g.state == stateDead:
				rg.ErrorCode = errGroupIDNotFound
			case g.state != stateEmpty, g.consumer != nil && len(g.consumer.members) > 0:
				rg.ErrorCode = errNonEmptyGroup
			default:
				deleted[id] = g
				delete(c.groups, id)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	if len(deleted) == 0 {
		return resp
	}
	if err := c.saveLocked(); err != nil {
		maps.Copy(c.groups, deleted)
		for i := range resp.Groups {
			if _, ok := deleted[resp.Groups[i].Group]; ok {
				resp.Groups[i].ErrorCode = errCoordinatorNotAvailable
			}
		}
	}
	return resp
}

// subscribed reports whether a group's members subscribe to topic, as
// Kafka's GroupMetadata.isSubscribedToTopic: known only for the
// "consumer" protocol type (the topics of each member's metadata for the
// group's protocol); an Empty group subscribes to nothing; any other
// group is taken as subscribed. A consumer group subscribes to the topics
// its members name or match with their regular expressions.
func (c *Coordinator) subscribed(g *group, topic string) bool {
	if cg := g.consumer; cg != nil {
		for _, m := range cg.members {
			if slices.Contains(c.memberTopicNames(m), topic) {
				return true
			}
		}
		return false
	}
	if g.state == stateEmpty || len(g.members) == 0 {
		return false
	}
	if g.protocolType != "consumer" || g.protocol == "" {
		return true
	}
	for _, m := range g.members {
		md := kmsg.NewConsumerMemberMetadata()
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return true
		}
		for _, t := range md.Topics {
			if t == topic {
				return true
			}
		}
	}
	return false
}

// handleOffsetDelete deletes committed offsets of a group, as Kafka's
// GroupCoordinator.handleDeleteOffsets: an unknown group answers
// GROUP_ID_NOT_FOUND for the request; a partition of a topic the group's
// members subscribe to answers GROUP_SUBSCRIBED_TO_TOPIC and keeps its
// offset; the others are deleted (a partition without an offset too).
// The server answers partitions it does not have before it calls this.
func (c *Coordinator) handleOffsetDelete(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode = c.enter(req); resp.ErrorCode != errNone {
		return resp
	}
	defer c.unlock()
	g := c.groups[req.Group]
	if g == nil || g.state == stateDead {
		resp.ErrorCode = errGroupIDNotFound
		return resp
	}
	removed := map[topicPartition]offset{}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		sub := c.subscribed(g, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			tp := topicPartition{t.Topic, p.Partition}
			if sub {
				rp.ErrorCode = errGroupSubscribedToTopic
			} else if o, ok := g.offsets[tp]; ok {
				removed[tp] = o
				delete(g.offsets, tp)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(removed) == 0 {
		return resp
	}
	if err := c.saveLocked(); err != nil {
		maps.Copy(g.offsets, removed)
		resp.ErrorCode = errCoordinatorNotAvailable
		resp.Topics = nil
	}
	return resp
}
