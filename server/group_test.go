package server

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// stubGroups is a GroupHandler for the routing tests: it answers
// JoinGroup with a fixed member id and records the transactional calls.
type stubGroups struct {
	mu        sync.Mutex
	handled   []int16
	staged    []string
	completed []bool
}

func (g *stubGroups) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, bool) {
	g.mu.Lock()
	g.handled = append(g.handled, req.Key())
	g.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version = r.Version
		resp.MemberID = "member-1"
		return resp, true
	case *kmsg.HeartbeatRequest:
		resp := kmsg.NewPtrHeartbeatResponse()
		resp.Version = r.Version
		return resp, true
	}
	return nil, false
}

func (g *stubGroups) CommitTxnOffsets(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	g.mu.Lock()
	g.staged = append(g.staged, req.Group)
	g.mu.Unlock()
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = req.Version
	return resp
}

func (g *stubGroups) CompleteTxn(producerID int64, producerEpoch int16, commit bool) error {
	g.mu.Lock()
	g.completed = append(g.completed, commit)
	g.mu.Unlock()
	return nil
}

func (g *stubGroups) Close() error { return nil }

func TestGroupRequestsRouted(t *testing.T) {
	g := &stubGroups{}
	ts := startTest(t, Config{Groups: g})
	rc := dial(t, ts.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	if n := len(roundTrip[*kmsg.ApiVersionsResponse](rc, av).ApiKeys); n != len(apis)+len(groupAPIs) {
		t.Fatalf("%d keys advertised with a group coordinator, want %d", n, len(apis)+len(groupAPIs))
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"g"}
	if c := roundTrip[*kmsg.FindCoordinatorResponse](rc, fc).Coordinators[0]; c.ErrorCode != 0 || c.NodeID != 0 {
		t.Fatalf("FindCoordinator: %+v", c)
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version = 9
	jg.Group, jg.ProtocolType = "g", "consumer"
	if r := roundTrip[*kmsg.JoinGroupResponse](rc, jg); r.MemberID != "member-1" {
		t.Fatalf("JoinGroup not routed: %+v", r)
	}
	// A group request the handler declines is answered, not dropped.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	roundTrip[*kmsg.ListGroupsResponse](rc, lg)

	// A transaction with offsets: staged through CommitTxnOffsets,
	// completed by EndTxn.
	createTopic(t, rc, "gt", 1)
	id := "gtx"
	p := initPID(t, rc, &id, 60000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "gt", 0)
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version = 3
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, p.ProducerID, p.ProducerEpoch, "g"
	if c := roundTrip[*kmsg.AddOffsetsToTxnResponse](rc, ao).ErrorCode; c != 0 {
		t.Fatalf("AddOffsetsToTxn: %d", c)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.Version = 3
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = id, "g", p.ProducerID, p.ProducerEpoch
	roundTrip[*kmsg.TxnOffsetCommitResponse](rc, tc)
	if c := endTxn(t, rc, id, p.ProducerID, p.ProducerEpoch, true); c != 0 {
		t.Fatalf("EndTxn: %d", c)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.staged) != 1 || len(g.completed) != 1 || !g.completed[0] {
		t.Fatalf("staged %v, completed %v", g.staged, g.completed)
	}
}

func TestFindCoordinatorWithoutGroups(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 2
	fc.CoordinatorKey, fc.CoordinatorType = "g", 0
	if c := roundTrip[*kmsg.FindCoordinatorResponse](rc, fc).ErrorCode; c != errCoordinatorNotAvailable {
		t.Fatalf("group coordinator without groups: %d", c)
	}
	fc.CoordinatorType = 1
	if r := roundTrip[*kmsg.FindCoordinatorResponse](rc, fc); r.ErrorCode != 0 || r.Port == 0 {
		t.Fatalf("transaction coordinator: %+v", r)
	}
}
