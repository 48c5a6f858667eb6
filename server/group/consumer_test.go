package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a Topics of fixed topics: id i+1 in the first byte for
// the i-th name given.
type fakeTopics struct {
	names []string
	parts map[string]int32
}

func newFakeTopics(kv ...any) *fakeTopics {
	f := &fakeTopics{parts: map[string]int32{}}
	for i := 0; i < len(kv); i += 2 {
		f.names = append(f.names, kv[i].(string))
		f.parts[kv[i].(string)] = int32(kv[i+1].(int))
	}
	return f
}

func (f *fakeTopics) id(name string) [16]byte {
	var id [16]byte
	id[0] = byte(slices.Index(f.names, name) + 1)
	return id
}

func (f *fakeTopics) TopicByName(name string) ([16]byte, int32, bool) {
	n, ok := f.parts[name]
	return f.id(name), n, ok
}

func (f *fakeTopics) TopicByID(id [16]byte) (string, int32, bool) {
	if i := int(id[0]) - 1; i >= 0 && i < len(f.names) {
		return f.names[i], f.parts[f.names[i]], true
	}
	return "", 0, false
}

func (f *fakeTopics) TopicNames() []string { return slices.Clone(f.names) }

// cgHarness drives consumer-group heartbeats against a harness.
type cgHarness struct {
	*harness
	topics *fakeTopics
}

func newCGHarness(t *testing.T, topics *fakeTopics) *cgHarness {
	h := newHarness(t, Config{})
	h.c.SetTopics(topics)
	return &cgHarness{h, topics}
}

// hb is a ConsumerGroupHeartbeat under construction.
type hb struct {
	*kmsg.ConsumerGroupHeartbeatRequest
}

func joinHB(group, member string, topics ...string) hb {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID = group, member
	r.RebalanceTimeoutMillis = 30_000
	r.SubscribedTopicNames = topics
	if r.SubscribedTopicNames == nil {
		r.SubscribedTopicNames = []string{}
	}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return hb{r}
}

func plainHB(group, member string, epoch int32) hb {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = group, member, epoch
	return hb{r}
}

// owning sets the partitions the member says it owns.
func (r hb) owning(f *fakeTopics, a map[string][]int32) hb {
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, name := range slices.Sorted(maps.Keys(a)) {
		t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		t.TopicID = f.id(name)
		t.Partitions = a[name]
		r.Topics = append(r.Topics, t)
	}
	return r
}

func (h *cgHarness) hb(r hb) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	return h.handle(r.ConsumerGroupHeartbeatRequest).(*kmsg.ConsumerGroupHeartbeatResponse)
}

// ok sends a heartbeat that must succeed and returns its epoch and
// assignment ("t:0,1 u:2", "-" when the response has none).
func (h *cgHarness) ok(r hb) (int32, string) {
	h.t.Helper()
	resp := h.hb(r)
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		h.t.Fatalf("heartbeat %+v: error %d %s", r.ConsumerGroupHeartbeatRequest, resp.ErrorCode, msg)
	}
	return resp.MemberEpoch, h.assignment(resp.Assignment)
}

func (h *cgHarness) assignment(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) string {
	if a == nil {
		return "-"
	}
	var parts []string
	for _, t := range a.Topics {
		name, _, _ := h.topics.TopicByID(t.TopicID)
		var ps []string
		for _, p := range t.Partitions {
			ps = append(ps, fmt.Sprint(p))
		}
		parts = append(parts, name+":"+strings.Join(ps, ","))
	}
	return strings.Join(parts, " ")
}

// TestConsumerHeartbeatChecks: the request rules Kafka's
// GroupCoordinatorService applies before the group, and the member and
// epoch rules of the group.
func TestConsumerHeartbeatChecks(t *testing.T) {
	h := newCGHarness(t, newFakeTopics("t", 2))
	h.ok(joinHB("g", "m1", "t"))
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		req  hb
		code int16
	}{
		{"empty member id", joinHB("g", "", "t"), errInvalidRequest},
		{"empty group", joinHB(" ", "m", "t"), errInvalidRequest},
		{"blank instance id", func() hb { r := joinHB("g", "m", "t"); r.InstanceID = str(""); return r }(), errInvalidRequest},
		{"blank rack", func() hb { r := joinHB("g", "m", "t"); r.RackID = str(" "); return r }(), errInvalidRequest},
		{"join without rebalance timeout", func() hb { r := joinHB("g", "m", "t"); r.RebalanceTimeoutMillis = -1; return r }(), errInvalidRequest},
		{"join owning partitions", joinHB("g", "m", "t").owning(h.topics, map[string][]int32{"t": {0}}), errInvalidRequest},
		{"join with null owned", func() hb { r := joinHB("g", "m", "t"); r.Topics = nil; return r }(), errInvalidRequest},
		{"join without subscription", func() hb { r := joinHB("g", "m"); r.SubscribedTopicNames = nil; return r }(), errInvalidRequest},
		{"epoch -2 without instance", plainHB("g", "m1", -2), errInvalidRequest},
		{"epoch -3", plainHB("g", "m1", -3), errInvalidRequest},
		{"unknown assignor", func() hb { r := joinHB("g", "m", "t"); r.ServerAssignor = str("sticky"); return r }(), errUnsupportedAssignor},
		{"bad regex", func() hb { r := joinHB("g", "m"); r.SubscribedTopicRegex = str("("); return r }(), errInvalidRegularExpression},
		{"unknown member", plainHB("g", "nobody", 2), errUnknownMemberID},
		{"unknown group", plainHB("nogroup", "m1", 2), errGroupIDNotFound},
		{"epoch ahead", plainHB("g", "m1", 3), errFencedMemberEpoch},
		{"leave unknown member", plainHB("g", "nobody", -1), errUnknownMemberID},
		{"leave unknown group", plainHB("nogroup", "m", -1), errGroupIDNotFound},
	} {
		if got := h.hb(tc.req).ErrorCode; got != tc.code {
			t.Errorf("%s: error %d, want %d", tc.name, got, tc.code)
		}
	}
	// A classic group with members is not a consumer group.
	h.stableGroup("classic", 1)
	if got := h.hb(joinHB("classic", "m", "t")).ErrorCode; got != errGroupIDNotFound {
		t.Errorf("join of a classic group: error %d", got)
	}
}

// TestConsumerReconcile: a second member takes half the partitions only
// once the first has revoked them; epochs move as Kafka's do.
func TestConsumerReconcile(t *testing.T) {
	h := newCGHarness(t, newFakeTopics("t", 4))
	if e, a := h.ok(joinHB("g", "a", "t")); e != 2 || a != "t:0,1,2,3" {
		t.Fatalf("first member: epoch %d assignment %s", e, a)
	}
	// b joins: group epoch 2; b must wait for a to release.
	if e, a := h.ok(joinHB("g", "b", "t")); e != 3 || a != "" {
		t.Fatalf("second member: epoch %d assignment %q", e, a)
	}
	if s := h.describeConsumer("g").State; s != "Reconciling" {
		t.Fatalf("state %s", s)
	}
	// a is told to revoke (its epoch stays 1 until it has).
	e, a := h.ok(plainHB("g", "a", 2).owning(h.topics, map[string][]int32{"t": {0, 1, 2, 3}}))
	if e != 2 || a != "t:0,1" {
		t.Fatalf("revocation: epoch %d assignment %s", e, a)
	}
	// Still owning them: nothing moves.
	if e, a := h.ok(plainHB("g", "a", 2).owning(h.topics, map[string][]int32{"t": {0, 1, 2, 3}})); e != 2 || a != "-" {
		t.Fatalf("still revoking: epoch %d assignment %s", e, a)
	}
	if e, a := h.ok(plainHB("g", "b", 3)); e != 3 || a != "-" {
		t.Fatalf("b before the release: epoch %d assignment %s", e, a)
	}
	// Revoked: a moves to epoch 2, then b gets its partitions.
	if e, _ := h.ok(plainHB("g", "a", 2).owning(h.topics, map[string][]int32{"t": {0, 1}})); e != 3 {
		t.Fatalf("after revoking: epoch %d", e)
	}
	if e, a := h.ok(plainHB("g", "b", 3)); e != 3 || a != "t:2,3" {
		t.Fatalf("b after the release: epoch %d assignment %s", e, a)
	}
	if s := h.describeConsumer("g").State; s != "Stable" {
		t.Fatalf("state %s", s)
	}
	// A heartbeat at the previous epoch owning only assigned partitions
	// is taken (its last response was lost); owning others, fenced.
	if got := h.hb(plainHB("g", "a", 2).owning(h.topics, map[string][]int32{"t": {0}})).ErrorCode; got != 0 {
		t.Fatalf("previous epoch, owned subset: error %d", got)
	}
	if got := h.hb(plainHB("g", "a", 2).owning(h.topics, map[string][]int32{"t": {3}})).ErrorCode; got != errFencedMemberEpoch {
		t.Fatalf("previous epoch, not a subset: error %d", got)
	}
	// b leaves: epoch 3, a gets everything.
	if r := h.hb(plainHB("g", "b", -1)); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	if e, a := h.ok(plainHB("g", "a", 3)); e != 4 || a != "t:0,1,2,3" {
		t.Fatalf("after the leave: epoch %d assignment %s", e, a)
	}
}

// TestConsumerTimeouts: a member silent for the session timeout is
// fenced; one that does not revoke within its rebalance timeout too.
func TestConsumerTimeouts(t *testing.T) {
	h := newCGHarness(t, newFakeTopics("t", 2))
	h.ok(joinHB("g", "a", "t"))
	h.ok(joinHB("g", "b", "t"))
	h.advance(consumerSessionTimeout - time.Second)
	h.ok(plainHB("g", "a", 2).owning(h.topics, map[string][]int32{"t": {0, 1}})) // told to revoke one
	h.advance(2 * time.Second)
	if d := h.describeConsumer("g"); len(d.Members) != 1 || d.Members[0].MemberID != "a" {
		t.Fatalf("after b's session: %+v", d.Members)
	}
	// a finishes its revocation and, alone again, gets everything at
	// the epoch b's departure made (3).
	if e, a := h.ok(plainHB("g", "a", 2).owning(h.topics, map[string][]int32{"t": {0}})); e != 4 || a != "t:0,1" {
		t.Fatalf("a alone: epoch %d assignment %s", e, a)
	}
	// c joins (epoch 4); a is told to revoke and does not: fenced after
	// its rebalance timeout (30 s), which bumps the epoch to 5.
	h.ok(joinHB("g", "c", "t"))
	if e, a := h.ok(plainHB("g", "a", 4).owning(h.topics, map[string][]int32{"t": {0, 1}})); e != 4 || a == "t:0,1" {
		t.Fatalf("a told to revoke: epoch %d assignment %s", e, a)
	}
	h.advance(29 * time.Second)
	h.ok(plainHB("g", "c", 5))
	h.advance(2 * time.Second)
	if got := h.hb(plainHB("g", "a", 4)).ErrorCode; got != errUnknownMemberID {
		t.Fatalf("a after its rebalance timeout: error %d", got)
	}
	if e, a := h.ok(plainHB("g", "c", 5)); e != 6 || a != "t:0,1" {
		t.Fatalf("c: epoch %d assignment %s", e, a)
	}
}

// TestConsumerStaticMember: a static member leaving with epoch -2 keeps
// its partitions for its instance, which rejoins under a new member id;
// an instance id in use is UNRELEASED_INSTANCE_ID.
func TestConsumerStaticMember(t *testing.T) {
	h := newCGHarness(t, newFakeTopics("t", 2))
	inst := "i1"
	j := joinHB("g", "a", "t")
	j.InstanceID = &inst
	h.ok(j)
	j2 := joinHB("g", "a2", "t")
	j2.InstanceID = &inst
	if got := h.hb(j2).ErrorCode; got != errUnreleasedInstanceID {
		t.Fatalf("instance in use: error %d", got)
	}
	l := plainHB("g", "a", -2)
	l.InstanceID = &inst
	if r := h.hb(l); r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("temporary leave: %+v", r)
	}
	if e, a := h.ok(j2); e != 2 || a != "t:0,1" {
		t.Fatalf("rejoin: epoch %d assignment %s", e, a)
	}
	f := plainHB("g", "a", 2)
	f.InstanceID = &inst
	if got := h.hb(f).ErrorCode; got != errFencedInstanceID {
		t.Fatalf("old member id: error %d", got)
	}
}

// TestConsumerGroupOffsets: commits and fetches from consumer-protocol
// members are checked against member epochs (Kafka's
// ConsumerGroup.validateOffsetCommit and validateOffsetFetch).
func TestConsumerGroupOffsets(t *testing.T) {
	h := newCGHarness(t, newFakeTopics("t", 2))
	h.ok(joinHB("g", "a", "t"))
	offs := map[string]map[int32]int64{"t": {0: 5}}
	for _, tc := range []struct {
		name   string
		v      int16
		member string
		epoch  int32
		code   int16
	}{
		{"v8 from a member", 8, "a", 2, errUnsupportedVersion},
		{"current epoch", 9, "a", 2, errNone},
		{"epoch ahead", 9, "a", 3, errStaleMemberEpoch},
		{"epoch before the assignment", 9, "a", 1, errStaleMemberEpoch},
		{"unknown member", 9, "x", 2, errUnknownMemberID},
		{"no member, group not empty", 9, "", -1, errUnknownMemberID},
	} {
		if got := h.commit(commitReq(tc.v, "g", tc.member, tc.epoch, offs))["t/0"]; got != tc.code {
			t.Errorf("%s: error %d, want %d", tc.name, got, tc.code)
		}
	}
	fetch := func(member *string, epoch int32) int16 {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 9
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberID, rg.MemberEpoch = "g", member, epoch
		r.Groups = append(r.Groups, rg)
		return h.handle(r).(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode
	}
	a, x := "a", "x"
	for _, tc := range []struct {
		member *string
		epoch  int32
		code   int16
	}{{nil, -1, errNone}, {&a, 2, errNone}, {&a, 3, errStaleMemberEpoch}, {&x, 2, errUnknownMemberID}} {
		if got := fetch(tc.member, tc.epoch); got != tc.code {
			t.Errorf("fetch %v/%d: error %d, want %d", tc.member, tc.epoch, got, tc.code)
		}
	}
	// Not deletable while a member is in; offsets of a subscribed topic
	// neither.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"g"}
	if got := h.handle(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; got != errNonEmptyGroup {
		t.Fatalf("delete: error %d", got)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	ot := kmsg.NewOffsetDeleteRequestTopic()
	ot.Topic = "t"
	ot.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	od.Topics = append(od.Topics, ot)
	if got := h.handle(od).(*kmsg.OffsetDeleteResponse).Topics[0].Partitions[0].ErrorCode; got != errGroupSubscribedToTopic {
		t.Fatalf("offset delete: error %d", got)
	}
	// Empty again: anyone commits with epoch -1, a classic member may
	// join (the group becomes classic, its offsets kept).
	h.ok(plainHB("g", "a", -1))
	if got := h.commit(commitReq(9, "g", "", -1, map[string]map[int32]int64{"t": {1: 9}}))["t/1"]; got != 0 {
		t.Fatalf("simple commit to the empty group: %d", got)
	}
	if r := h.join(joinReq(9, "g", "")); r.ErrorCode != errMemberIDRequired {
		t.Fatalf("classic join of the empty consumer group: %+v", r)
	}
	if got, _ := h.fetch(9, "g", nil, false); got["t/0"] != 5 || got["t/1"] != 9 {
		t.Fatalf("offsets after the conversion: %v", got)
	}
}

// TestConsumerListAndDescribe: the group as ListGroups, DescribeGroups and
// ConsumerGroupDescribe show it.
func TestConsumerListAndDescribe(t *testing.T) {
	h := newCGHarness(t, newFakeTopics("t", 2, "u", 1))
	h.ok(joinHB("g", "a", "t"))
	h.stableGroup("c", 1)
	r := kmsg.NewPtrListGroupsRequest()
	r.Version = 5
	r.TypesFilter = []string{"Consumer"}
	resp := h.handle(r).(*kmsg.ListGroupsResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].Group != "g" || resp.Groups[0].GroupType != "consumer" ||
		resp.Groups[0].ProtocolType != "consumer" || resp.Groups[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", resp.Groups)
	}
	if d := h.describe(6, "g"); d.ErrorCode != errGroupIDNotFound || d.State != "Dead" {
		t.Fatalf("DescribeGroups of a consumer group: %+v", d)
	}
	d := h.describeConsumer("g")
	if d.Epoch != 2 || d.AssignmentEpoch != 2 || d.AssignorName != "uniform" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	m := d.Members[0]
	if m.MemberID != "a" || m.MemberEpoch != 2 || m.MemberType != 1 || !slices.Equal(m.SubscribedTopics, []string{"t"}) ||
		len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "t" ||
		!slices.Equal(m.TargetAssignment.TopicPartitions[0].Partitions, []int32{0, 1}) {
		t.Fatalf("member: %+v", m)
	}
	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Groups = []string{"c", "missing"}
	for _, g := range h.handle(cd).(*kmsg.ConsumerGroupDescribeResponse).Groups {
		if g.ErrorCode != errGroupIDNotFound {
			t.Fatalf("describe %s: %+v", g.Group, g)
		}
	}
	// A classic join of the consumer group with a member is refused.
	if r := h.join(joinReq(9, "g", "x")); r.ErrorCode != errInconsistentGroupProtocol {
		t.Fatalf("classic join: %+v", r)
	}
}

// TestConsumerMetadataChange: a subscribed topic growing bumps the group
// epoch and assigns the new partition.
func TestConsumerMetadataChange(t *testing.T) {
	h := newCGHarness(t, newFakeTopics("t", 1))
	h.ok(joinHB("g", "a", "t", "later"))
	h.topics.parts["t"] = 2
	if e, a := h.ok(plainHB("g", "a", 2)); e != 3 || a != "t:0,1" {
		t.Fatalf("after growth: epoch %d assignment %s", e, a)
	}
	h.topics.names = append(h.topics.names, "later")
	h.topics.parts["later"] = 1
	if e, a := h.ok(plainHB("g", "a", 3)); e != 4 || a != "later:0 t:0,1" && a != "t:0,1 later:0" {
		t.Fatalf("after creation: epoch %d assignment %s", e, a)
	}
	// A regular expression subscription (whole names).
	re := "t|lat.*"
	j := joinHB("g2", "b")
	j.SubscribedTopicNames = nil
	j.SubscribedTopicRegex = &re
	if _, a := h.ok(j); !strings.Contains(a, "t:0,1") || !strings.Contains(a, "later:0") {
		t.Fatalf("regex: %s", a)
	}
}

func (h *cgHarness) describeConsumer(group string) kmsg.ConsumerGroupDescribeResponseGroup {
	h.t.Helper()
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Version = 1
	r.Groups = []string{group}
	return h.handle(r).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
}

// TestAssignors: the range assignor's ranges, and the uniform assignor's
// balance and stickiness, with one subscription and with several.
func TestAssignors(t *testing.T) {
	tid := func(b byte) [16]byte { return [16]byte{b} }
	count := func(a map[string]map[tpid]bool) map[string]int {
		out := map[string]int{}
		for id, ps := range a {
			out[id] = len(ps)
		}
		return out
	}
	inst := "z"
	r := assignRange([]assignee{
		{id: "b", topics: map[[16]byte]int32{tid(1): 5}},
		{id: "a", topics: map[[16]byte]int32{tid(1): 5, tid(2): 2}},
		{id: "c", instance: &inst, topics: map[[16]byte]int32{tid(1): 5}},
	})
	// Static c first, then a, b: t1 ranges 0-1, 2-3, 4; t2 all to a.
	want := map[string][]tpid{
		"c": {{tid(1), 0}, {tid(1), 1}},
		"a": {{tid(1), 2}, {tid(1), 3}, {tid(2), 0}, {tid(2), 1}},
		"b": {{tid(1), 4}},
	}
	for id, ps := range want {
		if got := sortedParts(r[id]); !slices.Equal(got, ps) {
			t.Errorf("range %s: %v, want %v", id, got, ps)
		}
	}
	sub := map[[16]byte]int32{tid(1): 7}
	u := assignUniform([]assignee{{id: "a", topics: sub}, {id: "b", topics: sub}}, nil)
	if c := count(u); c["a"]+c["b"] != 7 || c["a"] < 3 || c["b"] < 3 {
		t.Fatalf("uniform: %v", c)
	}
	// A third member: the others keep what they can.
	u2 := assignUniform([]assignee{{id: "a", topics: sub}, {id: "b", topics: sub}, {id: "c", topics: sub}}, u)
	kept := 0
	for _, id := range []string{"a", "b"} {
		for p := range u2[id] {
			if u[id][p] {
				kept++
			}
		}
	}
	if c := count(u2); c["a"]+c["b"]+c["c"] != 7 || c["c"] < 2 || kept < 5 {
		t.Fatalf("uniform with a third member: %v, %d kept", c, kept)
	}
	// Different subscriptions: each partition to a subscriber, balanced.
	h := assignUniform([]assignee{
		{id: "a", topics: map[[16]byte]int32{tid(1): 4}},
		{id: "b", topics: map[[16]byte]int32{tid(1): 4, tid(2): 4}},
	}, nil)
	if c := count(h); c["a"] != 4 || c["b"] != 4 {
		t.Fatalf("heterogeneous: %v", c)
	}
	for p := range h["a"] {
		if p.topic != tid(1) {
			t.Fatalf("a got %v, not subscribed", p)
		}
	}
}

// TestConsumerGroupRestart: a consumer group's membership is not kept
// across a restart, its type, epoch and offsets are: a member's next
// heartbeat is UNKNOWN_MEMBER_ID (it joins again, as Kafka's clients do
// on that error), where a group id never seen is GROUP_ID_NOT_FOUND.
func TestConsumerGroupRestart(t *testing.T) {
	h := newCGHarness(t, newFakeTopics("t", 2))
	h.ok(joinHB("g", "a", "t"))
	h.ok(joinHB("g", "b", "t"))
	if got := h.commit(commitReq(9, "g", "a", 2, map[string]map[int32]int64{"t": {0: 4}}))["t/0"]; got != 0 {
		t.Fatalf("commit: %d", got)
	}
	h.reopen(Config{})
	h.c.SetTopics(h.topics)
	if got := h.hb(plainHB("g", "a", 3)).ErrorCode; got != errUnknownMemberID {
		t.Fatalf("heartbeat after the restart: error %d", got)
	}
	if got := h.hb(plainHB("never", "a", 3)).ErrorCode; got != errGroupIDNotFound {
		t.Fatalf("heartbeat to an unknown group: error %d", got)
	}
	if e, a := h.ok(joinHB("g", "a", "t")); e != 4 || a != "t:0,1" {
		t.Fatalf("rejoin: epoch %d assignment %s", e, a)
	}
	if got, _ := h.fetch(9, "g", nil, false); got["t/0"] != 4 {
		t.Fatalf("offsets: %v", got)
	}
}
