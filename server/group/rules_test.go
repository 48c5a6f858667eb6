package group

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestErrorRules drives one request at a time against a Stable group of
// two members (generation gen, leader ids[0]) and checks the error code
// Kafka's rules give.
func TestErrorRules(t *testing.T) {
	str := func(s string) *string { return &s }
	type env struct {
		ids []string
		gen int32
	}
	cases := []struct {
		name string
		req  func(e env) kmsg.Request
		want int16
	}{
		{"join: empty group id", func(e env) kmsg.Request { return joinReq(9, "", "") }, errInvalidGroupID},
		{"join: session below min", func(e env) kmsg.Request {
			r := joinReq(9, "x", "")
			r.SessionTimeoutMillis = 5999
			return r
		}, errInvalidSessionTimeout},
		{"join: session above max", func(e env) kmsg.Request {
			r := joinReq(9, "x", "")
			r.SessionTimeoutMillis = 30*60*1000 + 1
			return r
		}, errInvalidSessionTimeout},
		{"join: member id for an unknown group", func(e env) kmsg.Request { return joinReq(9, "nope", "m-1") }, errUnknownMemberID},
		{"join: unknown member id", func(e env) kmsg.Request { return joinReq(9, "g", "m-unknown") }, errUnknownMemberID},
		{"join: other protocol type", func(e env) kmsg.Request {
			r := joinReq(9, "g", "")
			r.ProtocolType = "connect"
			return r
		}, errInconsistentGroupProtocol},
		{"join: no common protocol", func(e env) kmsg.Request { return joinReq(9, "g", "", "roundrobin") }, errInconsistentGroupProtocol},
		{"join: new group without protocols", func(e env) kmsg.Request {
			r := joinReq(9, "fresh", "")
			r.Protocols = nil
			return r
		}, errInconsistentGroupProtocol},
		{"join: new group without protocol type", func(e env) kmsg.Request {
			r := joinReq(9, "fresh", "")
			r.ProtocolType = ""
			return r
		}, errInconsistentGroupProtocol},
		{"join v4: new member needs an id", func(e env) kmsg.Request { return joinReq(4, "g", "") }, errMemberIDRequired},
		{"join: unknown instance id with a member id", func(e env) kmsg.Request {
			r := joinReq(5, "g", e.ids[0])
			r.InstanceID = str("who")
			return r
		}, errUnknownMemberID},
		{"sync: empty group id", func(e env) kmsg.Request { return syncReq(5, "", e.ids[0], e.gen, nil) }, errInvalidGroupID},
		{"sync: unknown group", func(e env) kmsg.Request { return syncReq(5, "nope", e.ids[0], e.gen, nil) }, errUnknownMemberID},
		{"sync: unknown member", func(e env) kmsg.Request { return syncReq(5, "g", "m-x", e.gen, nil) }, errUnknownMemberID},
		{"sync: old generation", func(e env) kmsg.Request { return syncReq(5, "g", e.ids[1], e.gen-1, nil) }, errIllegalGeneration},
		{"sync: future generation", func(e env) kmsg.Request { return syncReq(5, "g", e.ids[1], e.gen+1, nil) }, errIllegalGeneration},
		{"sync v5: other protocol", func(e env) kmsg.Request {
			r := syncReq(5, "g", e.ids[1], e.gen, nil)
			r.Protocol = str("sticky")
			return r
		}, errInconsistentGroupProtocol},
		{"sync v5: other protocol type", func(e env) kmsg.Request {
			r := syncReq(5, "g", e.ids[1], e.gen, nil)
			r.ProtocolType = str("connect")
			return r
		}, errInconsistentGroupProtocol},
		{"sync v4: protocol not checked", func(e env) kmsg.Request {
			r := syncReq(4, "g", e.ids[1], e.gen, nil)
			r.Protocol = str("sticky")
			return r
		}, errNone},
		{"sync in Stable: assignment again", func(e env) kmsg.Request { return syncReq(0, "g", e.ids[1], e.gen, nil) }, errNone},
		{"heartbeat: empty group id", func(e env) kmsg.Request { return hbReq(4, "", e.ids[0], e.gen) }, errInvalidGroupID},
		{"heartbeat: unknown group", func(e env) kmsg.Request { return hbReq(4, "nope", e.ids[0], e.gen) }, errUnknownMemberID},
		{"heartbeat: unknown member", func(e env) kmsg.Request { return hbReq(0, "g", "m-x", e.gen) }, errUnknownMemberID},
		{"heartbeat: old generation", func(e env) kmsg.Request { return hbReq(1, "g", e.ids[0], e.gen-1) }, errIllegalGeneration},
		{"heartbeat: ok", func(e env) kmsg.Request { return hbReq(2, "g", e.ids[1], e.gen) }, errNone},
		{"heartbeat v3: unknown instance", func(e env) kmsg.Request {
			r := hbReq(3, "g", e.ids[1], e.gen)
			r.InstanceID = str("who")
			return r
		}, errUnknownMemberID},
		{"heartbeat v2: instance id ignored", func(e env) kmsg.Request {
			r := hbReq(2, "g", e.ids[1], e.gen)
			r.InstanceID = str("who")
			return r
		}, errNone},
		{"leave v0: empty group id", func(e env) kmsg.Request { return leaveReq(0, "", "m") }, errInvalidGroupID},
		{"leave v1: unknown member", func(e env) kmsg.Request { return leaveReq(1, "g", "m-x") }, errUnknownMemberID},
		{"leave v2: unknown group", func(e env) kmsg.Request { return leaveReq(2, "nope", "m-x") }, errUnknownMemberID},
		{"leave v3: unknown member", func(e env) kmsg.Request { return leaveReq(3, "g", "m-x") }, errUnknownMemberID},
		{"leave v5: unknown instance", func(e env) kmsg.Request {
			r := leaveReq(5, "g", "")
			r.Members[0].InstanceID = str("who")
			return r
		}, errUnknownMemberID},
		{"commit: member of the generation", func(e env) kmsg.Request { return commitReq(9, "g", e.ids[1], e.gen, one) }, errNone},
		{"commit v1: member of the generation", func(e env) kmsg.Request { return commitReq(1, "g", e.ids[1], e.gen, one) }, errNone},
		{"commit: old generation", func(e env) kmsg.Request { return commitReq(8, "g", e.ids[1], e.gen-1, one) }, errIllegalGeneration},
		{"commit: unknown member", func(e env) kmsg.Request { return commitReq(7, "g", "m-x", e.gen, one) }, errUnknownMemberID},
		{"commit: no member to a live group", func(e env) kmsg.Request { return commitReq(6, "g", "", -1, one) }, errUnknownMemberID},
		{"commit v0: simple commit to a live group", func(e env) kmsg.Request { return commitReq(0, "g", "", -1, one) }, errUnknownMemberID},
		{"commit: generation for an unknown group", func(e env) kmsg.Request { return commitReq(5, "nope", "m", 3, one) }, errIllegalGeneration},
		{"commit: simple commit, new group", func(e env) kmsg.Request { return commitReq(2, "simple", "", -1, one) }, errNone},
		{"commit: empty group id is a group", func(e env) kmsg.Request { return commitReq(9, "", "", -1, one) }, errNone},
		{"commit v7: unknown instance", func(e env) kmsg.Request {
			r := commitReq(7, "g", e.ids[1], e.gen, one)
			r.InstanceID = str("who")
			return r
		}, errUnknownMemberID},
		{"commit: metadata too large", func(e env) kmsg.Request {
			r := commitReq(9, "g", e.ids[1], e.gen, one)
			r.Topics[0].Partitions[0].Metadata = str(strings.Repeat("m", 4097))
			return r
		}, errOffsetMetadataTooLarge},
		{"commit: metadata at the limit", func(e env) kmsg.Request {
			r := commitReq(9, "g", e.ids[1], e.gen, one)
			r.Topics[0].Partitions[0].Metadata = str(strings.Repeat("m", 4096))
			return r
		}, errNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			ids, gen := h.stableGroup("g", 2)
			resp := h.handle(tc.req(env{ids, gen}))
			if got := errorCode(t, resp); got != tc.want {
				t.Fatalf("error %d, want %d (%+v)", got, tc.want, resp)
			}
		})
	}
}

var one = map[string]map[int32]int64{"t": {0: 5}}

func hbReq(v int16, group, memberID string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.Generation = v, group, memberID, gen
	return r
}

func leaveReq(v int16, group, memberID string) *kmsg.LeaveGroupRequest {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group = v, group
	if v < 3 {
		r.MemberID = memberID
	} else {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = memberID
		r.Members = []kmsg.LeaveGroupRequestMember{m}
	}
	return r
}

// errorCode returns the one error a response carries: the top-level
// code, else the first non-zero member or partition code.
func errorCode(t *testing.T, resp kmsg.Response) int16 {
	t.Helper()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, m := range r.Members {
			if m.ErrorCode != 0 {
				return m.ErrorCode
			}
		}
		return 0
	case *kmsg.OffsetCommitResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
		return 0
	case *kmsg.TxnOffsetCommitResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
		return 0
	case *kmsg.OffsetFetchResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
		return 0
	case *kmsg.ListGroupsResponse:
		return r.ErrorCode
	case *kmsg.DescribeGroupsResponse:
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
		return 0
	case *kmsg.DeleteGroupsResponse:
		for _, g := range r.Groups {
			if g.ErrorCode != 0 && g.ErrorCode != errGroupIDNotFound {
				return g.ErrorCode
			}
		}
		return 0
	case *kmsg.OffsetDeleteResponse:
		return r.ErrorCode
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, g := range r.Groups {
			if g.ErrorCode != 0 && g.ErrorCode != errGroupIDNotFound {
				return g.ErrorCode
			}
		}
		return 0
	}
	t.Fatalf("unexpected response %T", resp)
	return 0
}

// TestCommitDuringRebalance: commits are taken during
// PreparingRebalance (the member learns of the rebalance from its
// heartbeat) but refused with REBALANCE_IN_PROGRESS in
// CompletingRebalance, before the member has its assignment.
func TestCommitDuringRebalance(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stableGroup("g", 2)
	ch := h.joinAsync(joinReq(9, "g", ids[0]))
	h.waitJoining("g", 1)
	if got := h.commit(commitReq(9, "g", ids[1], gen, one)); got["t/0"] != 0 {
		t.Fatalf("commit in PreparingRebalance: %v", got)
	}
	recv(t, h.joinAsync(joinReq(9, "g", ids[1])))
	recv(t, ch)
	if got := h.commit(commitReq(9, "g", ids[1], gen+1, one)); got["t/0"] != errRebalanceInProgress {
		t.Fatalf("commit in CompletingRebalance: %v", got)
	}
	// SyncGroup in PreparingRebalance is sent back to rejoin.
	ch = h.joinAsync(joinReq(9, "g", ids[0], "range", "new"))
	h.waitJoining("g", 1)
	if r := recv(t, h.syncAsync(syncReq(5, "g", ids[1], gen+1, nil))); r.ErrorCode != errRebalanceInProgress {
		t.Fatalf("sync in PreparingRebalance: %+v", r)
	}
	h.advance(31 * time.Second)
	recv(t, ch)
}
