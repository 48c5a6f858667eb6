package wirediff

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group request builders: each takes the group and reads the member id
// an earlier step kept (SaveMember).

func joinGroup(version int16, group, member string, topics ...string) func(*Env) kmsg.Request {
	return func(e *Env) kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Version = version
		r.Group = group
		r.SessionTimeoutMillis = 30000
		r.RebalanceTimeoutMillis = 10000
		r.MemberID = e.Str(member)
		r.ProtocolType = "consumer"
		md := kmsg.NewConsumerMemberMetadata()
		md.Version = 1
		md.Topics = topics
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", md.AppendTo(nil)
		r.Protocols = append(r.Protocols, p)
		return r
	}
}

// saveMember keeps a JoinGroup answer's member id and generation.
func saveMember(member string) func(*Env, kmsg.Response) {
	return func(e *Env, r kmsg.Response) {
		jr := r.(*kmsg.JoinGroupResponse)
		if jr.MemberID != "" {
			e.SetStr(member, jr.MemberID)
		}
		e.Set(member+".gen", int64(jr.Generation))
	}
}

func syncGroup(version int16, group, member, topic string, parts ...int32) func(*Env) kmsg.Request {
	return func(e *Env) kmsg.Request {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Version = version
		r.Group = group
		r.Generation = int32(e.Get(member + ".gen"))
		r.MemberID = e.Str(member)
		r.ProtocolType, r.Protocol = Str("consumer"), Str("range")
		a := kmsg.NewConsumerMemberAssignment()
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = topic, parts
		a.Topics = append(a.Topics, at)
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = e.Str(member), a.AppendTo(nil)
		r.GroupAssignment = append(r.GroupAssignment, ga)
		return r
	}
}

func heartbeat(version int16, group, member string) func(*Env) kmsg.Request {
	return func(e *Env) kmsg.Request {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Version = version
		r.Group, r.Generation, r.MemberID = group, int32(e.Get(member+".gen")), e.Str(member)
		return r
	}
}

func leaveGroup(version int16, group, member string) func(*Env) kmsg.Request {
	return func(e *Env) kmsg.Request {
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Version = version
		r.Group = group
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = e.Str(member)
		r.Members = append(r.Members, m)
		r.MemberID = e.Str(member)
		return r
	}
}

// commitOffsets commits offset to every partition named; member ""
// commits as a simple consumer (generation -1).
func commitOffsets(version int16, group, member, topic string, offset int64, parts ...int32) func(*Env) kmsg.Request {
	return func(e *Env) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version = version
		r.Group = group
		r.Generation, r.MemberID = -1, ""
		if member != "" {
			r.Generation, r.MemberID = int32(e.Get(member+".gen")), e.Str(member)
		}
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset
			md := "m"
			rp.Metadata = &md
			t.Partitions = append(t.Partitions, rp)
		}
		r.Topics = append(r.Topics, t)
		return r
	}
}

// fetchOffsets fetches a group's committed offsets (topic "" : all).
func fetchOffsets(version int16, group, topic string, parts ...int32) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = version
		if version < 8 {
			r.Group = group
			if topic != "" {
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic, t.Partitions = topic, parts
				r.Topics = append(r.Topics, t)
			}
			return r
		}
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		if topic != "" {
			t := kmsg.NewOffsetFetchRequestGroupTopic()
			t.Topic, t.Partitions = topic, parts
			g.Topics = append(g.Topics, t)
		}
		r.Groups = append(r.Groups, g)
		return r
	}
}

func describeGroups(version int16, groups ...string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Version, r.Groups = version, groups
		return r
	}
}

func listGroups(version int16, states ...string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrListGroupsRequest()
		r.Version, r.StatesFilter = version, states
		return r
	}
}

func deleteGroups(version int16, groups ...string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Version, r.Groups = version, groups
		return r
	}
}

func offsetDelete(group, topic string, parts ...int32) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = group
		t := kmsg.NewOffsetDeleteRequestTopic()
		t.Topic = topic
		for _, p := range parts {
			tp := kmsg.NewOffsetDeleteRequestTopicPartition()
			tp.Partition = p
			t.Partitions = append(t.Partitions, tp)
		}
		r.Topics = append(r.Topics, t)
		return r
	}
}

func findGroupCoordinator(version int16, group string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.Version = version
		r.CoordinatorKey, r.CoordinatorKeys = group, []string{group}
		return r
	}
}

// GroupScripts are the classic consumer group protocol and committed
// offsets: joins, syncs, heartbeats and leaves, commits and fetches of
// members and of simple consumers, the listings, and the deletion of
// offsets and of groups.
func GroupScripts() []*Script {
	const (
		t = "gr"
		g = "gr-group"
	)
	// A member's own fields (the client host, the protocol metadata
	// bytes) are compared; the member id is normalised.
	return []*Script{
		{Name: "groups", Steps: seq(
			create(t, 2, nil),
			produce("records", t, 0, Batch{N: 5}),
			Step{Name: "find coordinator v3", Req: findGroupCoordinator(3, g)},
			Step{Name: "find coordinator v4", Req: findGroupCoordinator(4, g)},
			Step{Name: "join without a member id", Req: joinGroup(9, g, "m", t), Save: saveMember("m")},
			Step{Name: "join with the member id", Req: joinGroup(9, g, "m", t), Save: saveMember("m")},
			Step{Name: "sync", Req: syncGroup(5, g, "m", t, 0, 1)},
			Step{Name: "heartbeat", Req: heartbeat(4, g, "m")},
			Step{Name: "commit as the member", Req: commitOffsets(8, g, "m", t, 3, 0, 1)},
			Step{Name: "commit to an unknown partition", Req: commitOffsets(8, g, "m", t, 3, 7)},
			Step{Name: "commit as a simple consumer while the group has members", Req: commitOffsets(8, g, "", t, 2, 0)},
			Step{Name: "fetch offsets v8", Req: fetchOffsets(8, g, t, 0, 1, 5)},
			Step{Name: "fetch offsets v7, all", Req: fetchOffsets(7, g, "")},
			Step{Name: "fetch offsets v1", Req: fetchOffsets(1, g, t, 0)},
			Step{Name: "describe", Req: describeGroups(5, g, "gr-none")},
			Step{Name: "list v4, stable", Req: listGroups(4, "Stable"), Post: KeepPrefixed("Groups", "Group", "gr-")},
			Step{Name: "delete while it has members", Req: deleteGroups(2, g)},
			Step{Name: "delete offsets of a subscribed topic", Req: offsetDelete(g, t, 0)},
			Step{Name: "leave", Req: leaveGroup(5, g, "m")},
			Step{Name: "describe after the leave", Req: describeGroups(5, g)},
			Step{Name: "heartbeat after the leave", Req: heartbeat(4, g, "m")},
			Step{Name: "delete offsets of partition 1", Req: offsetDelete(g, t, 1, 5)},
			Step{Name: "fetch offsets after the delete", Req: fetchOffsets(8, g, t, 0, 1)},
			Step{Name: "delete the group", Req: deleteGroups(2, g, "gr-none")},
			Step{Name: "describe the deleted group", Req: describeGroups(5, g)},
			Step{Name: "fetch offsets of the deleted group", Req: fetchOffsets(8, g, t, 0, 1)},
			Step{Name: "simple consumer commit", Req: commitOffsets(8, "gr-simple", "", t, 4, 0)},
			Step{Name: "simple consumer fetch", Req: fetchOffsets(8, "gr-simple", t, 0)},
			Step{Name: "list v5", Req: listGroups(5), Post: KeepPrefixed("Groups", "Group", "gr-")},
			Step{Name: "describe the simple consumer's group", Req: describeGroups(5, "gr-simple")},
			Step{Name: "delete offsets of an unknown group", Req: offsetDelete("gr-none", t, 0)},
		)},
	}
}
