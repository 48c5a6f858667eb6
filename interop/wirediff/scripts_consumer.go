package wirediff

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgHeartbeat builds a ConsumerGroupHeartbeat v1 of member (a client-made
// id, as from v1 on) at epoch, or, with kept, at the epoch its last answer
// gave (cgSave) plus epoch. join sends the full request of a joining
// member (subscription, rebalance timeout, no owned partitions); owned,
// when not nil, names the partitions of topic the member owns.
type cgHeartbeat struct {
	group, member string
	epoch         int32
	kept          bool
	join          bool
	topics        []string
	topic         string
	owned         []int32
	instance      *string
	noTimeout     bool
}

func (h cgHeartbeat) Req(e *Env) kmsg.Request {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch, r.InstanceID = h.group, h.member, h.epoch, h.instance
	if h.kept {
		r.MemberEpoch += int32(e.Get(h.member + ".epoch"))
	}
	if h.join {
		r.RebalanceTimeoutMillis = 30000
		if h.noTimeout {
			r.RebalanceTimeoutMillis = -1
		}
		r.SubscribedTopicNames = h.topics
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if h.owned != nil {
		id, _ := e.topicID(h.topic)
		t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		t.TopicID, t.Partitions = id, h.owned
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{t}
	}
	return r
}

// cgSave keeps the member epoch a heartbeat answered.
func cgSave(member string) func(*Env, kmsg.Response) {
	return func(e *Env, r kmsg.Response) {
		if hr := r.(*kmsg.ConsumerGroupHeartbeatResponse); hr.ErrorCode == 0 {
			e.Set(member+".epoch", int64(hr.MemberEpoch))
		}
	}
}

func consumerDescribe(groups ...string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Version, r.Groups = 1, groups
		return r
	}
}

// memberCommit commits offset to partitions as a consumer-protocol member
// (OffsetCommit v9+ carries the member epoch in Generation): at the epoch
// kept for epochOf plus delta ("" : -1, a simple consumer's).
func memberCommit(version int16, group, member, epochOf string, delta int32, topic string, offset int64, parts ...int32) func(*Env) kmsg.Request {
	return func(e *Env) kmsg.Request {
		r := commitOffsets(version, group, "", topic, offset, parts...)(e).(*kmsg.OffsetCommitRequest)
		r.MemberID, r.Generation = member, -1
		if epochOf != "" {
			r.Generation = int32(e.Get(epochOf+".epoch")) + delta
		}
		return r
	}
}

func memberFetch(group, member string, delta int32, topic string, parts ...int32) func(*Env) kmsg.Request {
	return func(e *Env) kmsg.Request {
		r := fetchOffsets(9, group, topic, parts...)(e).(*kmsg.OffsetFetchRequest)
		r.Groups[0].MemberID, r.Groups[0].MemberEpoch = &member, int32(e.Get(member+".epoch"))+delta
		return r
	}
}

// ConsumerGroupScripts are KIP-848 consumer groups: a member joining, a
// second one taking half the partitions once the first has revoked them,
// the epochs checked on heartbeats and on commits and fetches, the
// listings and descriptions, leaving.
func ConsumerGroupScripts() []*Script {
	const (
		t = "cg"
		g = "cg-group"
	)
	a, b := "cg-member-a", "cg-member-b"
	return []*Script{
		{Name: "consumer groups", Steps: seq(
			create(t, 2, nil),
			Step{Name: "join without a rebalance timeout", Req: cgHeartbeat{group: g, member: a, join: true, topics: []string{t}, noTimeout: true}.Req},
			Step{Name: "heartbeat to an unknown group", Req: cgHeartbeat{group: g, member: a, epoch: 1}.Req},
			Step{Name: "a joins", Req: cgHeartbeat{group: g, member: a, join: true, topics: []string{t}}.Req, Save: cgSave(a)},
			Step{Name: "a heartbeats owning both", Req: cgHeartbeat{group: g, member: a, kept: true, topic: t, owned: []int32{0, 1}}.Req},
			Step{Name: "a heartbeats at a later epoch", Req: cgHeartbeat{group: g, member: a, kept: true, epoch: 1}.Req},
			Step{Name: "a heartbeats at an older epoch", Req: cgHeartbeat{group: g, member: a, kept: true, epoch: -1}.Req},
			Step{Name: "heartbeat of an unknown member", Req: cgHeartbeat{group: g, member: "cg-x", kept: true}.Req},
			// Kafka computes a group's target assignment at most once a
			// second (group.consumer.assignment.interval.ms), partlog at
			// once (server/doc.go): the script waits that second.
			Step{Name: "b joins", Sleep: 1100 * time.Millisecond, Req: cgHeartbeat{group: g, member: b, join: true, topics: []string{t}}.Req, Save: cgSave(b)},
			Step{Name: "describe while reconciling", Req: consumerDescribe(g, "cg-none")},
			Step{Name: "a is told to revoke", Req: cgHeartbeat{group: g, member: a, kept: true, topic: t, owned: []int32{0, 1}}.Req, Save: cgSave(a)},
			Step{Name: "b waits", Req: cgHeartbeat{group: g, member: b, kept: true}.Req, Save: cgSave(b)},
			Step{Name: "a has revoked", Req: cgHeartbeat{group: g, member: a, kept: true, topic: t, owned: []int32{0}}.Req, Save: cgSave(a)},
			Step{Name: "b gets its partition", Req: cgHeartbeat{group: g, member: b, kept: true}.Req, Save: cgSave(b)},
			Step{Name: "describe when stable", Req: consumerDescribe(g)},
			Step{Name: "commit v9 at the member epoch", Req: memberCommit(9, g, a, a, 0, t, 3, 0)},
			Step{Name: "commit v9 at a later epoch", Req: memberCommit(9, g, a, a, 1, t, 3, 0)},
			Step{Name: "commit v9 of a partition the member does not own", Req: memberCommit(9, g, a, a, 0, t, 3, 1)},
			Step{Name: "commit v8 from a member", Req: memberCommit(8, g, a, a, 0, t, 3, 0)},
			Step{Name: "commit v9 of an unknown member", Req: memberCommit(9, g, "cg-x", a, 0, t, 3, 0)},
			Step{Name: "simple commit while it has members", Req: memberCommit(9, g, "", "", -1, t, 3, 0)},
			Step{Name: "fetch v9 at the member epoch", Req: memberFetch(g, a, 0, t, 0, 1)},
			Step{Name: "fetch v9 at an older epoch", Req: memberFetch(g, a, -1, t, 0)},
			Step{Name: "list consumer groups", Req: listGroups(5), Post: KeepPrefixed("Groups", "Group", "cg-")},
			Step{Name: "describe with the classic API", Req: describeGroups(5, g)},
			Step{Name: "describe with the classic API v6", Req: describeGroups(6, g)},
			Step{Name: "delete while it has members", Req: deleteGroups(2, g)},
			Step{Name: "delete offsets of a subscribed topic", Req: offsetDelete(g, t, 0)},
			Step{Name: "b leaves", Req: cgHeartbeat{group: g, member: b, epoch: -1}.Req},
			Step{Name: "b leaves again", Req: cgHeartbeat{group: g, member: b, epoch: -1}.Req},
			Step{Name: "a gets both", Sleep: 1100 * time.Millisecond, Req: cgHeartbeat{group: g, member: a, kept: true}.Req, Save: cgSave(a)},
			Step{Name: "a leaves", Req: cgHeartbeat{group: g, member: a, epoch: -1}.Req},
			Step{Name: "describe when empty", Req: consumerDescribe(g)},
			Step{Name: "list when empty", Req: listGroups(5), Post: KeepPrefixed("Groups", "Group", "cg-")},
			Step{Name: "delete the group", Req: deleteGroups(2, g)},
			Step{Name: "fetch offsets of the deleted group", Req: fetchOffsets(8, g, t, 0)},
		)},
	}
}
