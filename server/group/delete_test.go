package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func deleteGroupsReq(groups ...string) *kmsg.DeleteGroupsRequest {
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = 2
	r.Groups = groups
	return r
}

func offsetDeleteReq(group string, parts map[string][]int32) *kmsg.OffsetDeleteRequest {
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = group
	for topic, ps := range parts {
		t := kmsg.NewOffsetDeleteRequestTopic()
		t.Topic = topic
		for _, p := range ps {
			tp := kmsg.NewOffsetDeleteRequestTopicPartition()
			tp.Partition = p
			t.Partitions = append(t.Partitions, tp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// consumerJoinReq is joinReq with real consumer-protocol metadata
// subscribing to topics (what OffsetDelete's subscription check reads).
func consumerJoinReq(group, memberID string, topics ...string) *kmsg.JoinGroupRequest {
	r := joinReq(9, group, memberID)
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = topics
	r.Protocols[0].Metadata = md.AppendTo(nil)
	return r
}

// TestDeleteGroupsRules: Kafka's rules of DeleteGroups, group by group:
// unknown (and, once deleted, gone) GROUP_ID_NOT_FOUND, with members
// NON_EMPTY_GROUP, an empty group deleted with its offsets, an empty id
// INVALID_GROUP_ID; and they survive a restart as answered.
func TestDeleteGroupsRules(t *testing.T) {
	h := newHarness(t, Config{})
	h.commit(commitReq(9, "simple", "", -1, one))
	h.stableGroup("busy", 1)
	resp := h.handle(deleteGroupsReq("simple", "busy", "missing", "")).(*kmsg.DeleteGroupsResponse)
	want := map[string]int16{"simple": errNone, "busy": errNonEmptyGroup, "missing": errGroupIDNotFound, "": errInvalidGroupID}
	if len(resp.Groups) != len(want) {
		t.Fatalf("%d answers, want %d", len(resp.Groups), len(want))
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != want[g.Group] {
			t.Errorf("group %q: error %d, want %d", g.Group, g.ErrorCode, want[g.Group])
		}
	}
	if st := h.describe(5, "simple").State; st != "Dead" {
		t.Fatalf("deleted group describes %q, want Dead", st)
	}
	if got := h.fetchOffset("simple", "t", 0); got != -1 {
		t.Fatalf("deleted group's offset: %d, want -1", got)
	}
	if c := h.handle(deleteGroupsReq("simple")).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; c != errGroupIDNotFound {
		t.Fatalf("second delete: %d", c)
	}
	h.reopen(Config{})
	if got := h.fetchOffset("simple", "t", 0); got != -1 {
		t.Fatalf("deleted group's offset after a restart: %d, want -1", got)
	}
}

// TestOffsetDeleteRules: the subscription rule (a topic the members
// subscribe to keeps its offsets, GROUP_SUBSCRIBED_TO_TOPIC; another
// topic's are deleted), an Empty group subscribing to nothing, an
// unknown group GROUP_ID_NOT_FOUND.
func TestOffsetDeleteRules(t *testing.T) {
	h := newHarness(t, Config{})
	first := h.memberID(9, "sub")
	if r := h.join(consumerJoinReq("sub", first, "t")); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	h.handle(syncReq(5, "sub", first, 1, nil))
	offsets := map[string]map[int32]int64{"t": {0: 5}, "u": {0: 7}}
	if codes := h.commit(commitReq(9, "sub", first, 1, offsets)); codes[tpKey("t", 0)] != 0 || codes[tpKey("u", 0)] != 0 {
		t.Fatalf("commit: %v", codes)
	}
	resp := h.handle(offsetDeleteReq("sub", map[string][]int32{"t": {0}, "u": {0}})).(*kmsg.OffsetDeleteResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			codes[rt.Topic] = p.ErrorCode
		}
	}
	if resp.ErrorCode != 0 || codes["t"] != errGroupSubscribedToTopic || codes["u"] != errNone {
		t.Fatalf("delete while subscribed: top %d, per topic %v", resp.ErrorCode, codes)
	}
	if h.fetchOffset("sub", "t", 0) != 5 || h.fetchOffset("sub", "u", 0) != -1 {
		t.Fatalf("offsets after the delete: t %d u %d", h.fetchOffset("sub", "t", 0), h.fetchOffset("sub", "u", 0))
	}
	h.handle(leaveReq(5, "sub", first))
	if c := h.handle(offsetDeleteReq("sub", map[string][]int32{"t": {0}})).(*kmsg.OffsetDeleteResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("delete from an Empty group: %d", c)
	}
	if got := h.fetchOffset("sub", "t", 0); got != -1 {
		t.Fatalf("offset after the delete from the Empty group: %d", got)
	}
	if c := h.handle(offsetDeleteReq("missing", map[string][]int32{"t": {0}})).(*kmsg.OffsetDeleteResponse).ErrorCode; c != errGroupIDNotFound {
		t.Fatalf("unknown group: %d", c)
	}
}

// fetchOffset is one partition's committed offset (-1: none).
func (h *harness) fetchOffset(group, topic string, p int32) int64 {
	h.t.Helper()
	out, code := h.fetch(8, group, map[string][]int32{topic: {p}}, false)
	if code != 0 {
		h.t.Fatalf("fetch %s: %d", group, code)
	}
	return out[tpKey(topic, p)]
}
