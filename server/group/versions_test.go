package group

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupRequests returns one request of each kind Handle takes, at
// version v, aimed at a group of its own (so that its JoinGroup, alone,
// completes at once).
func groupRequests(v int16) []kmsg.Request {
	g := "g" + strconv.Itoa(int(v))
	inst := "i"
	j := joinReq(v, g, "")
	j.InstanceID = &inst
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = v
	lg.StatesFilter = []string{"stable"}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = v
	dg.Groups = []string{g, "missing"}
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = v
	f.Group = g
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = g
	f.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = v
	del.Groups = []string{"missing"}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Version = v
	od.Group = "s" + g
	cj := joinHB("c"+g, "m", "t").ConsumerGroupHeartbeatRequest
	cj.Version = v
	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Version = v
	cd.Groups = []string{"c" + g, "missing"}
	return []kmsg.Request{
		cj, cd, j, syncReq(v, g, "m", 1, nil), hbReq(v, g, "m", 1), leaveReq(v, g, "m"),
		commitReq(v, "s"+g, "", -1, one), f, lg, dg, txnReq(v, "s"+g, 1, 0, map[int32]int64{0: 1}), del, od,
	}
}

// TestEveryVersion: each request at each version Versions advertises is
// answered at that version with a response that encodes and decodes
// (the harness checks both); the version above is UNSUPPORTED_VERSION.
func TestEveryVersion(t *testing.T) {
	h := newHarness(t, Config{})
	adv := h.c.Versions()
	keys := slices.Sorted(maps.Keys(adv))
	want := []int16{8, 9, 11, 12, 13, 14, 15, 16, 28, 42, 47, 68, 69}
	if !slices.Equal(keys, want) {
		t.Fatalf("Versions keys %v, want %v", keys, want)
	}
	for _, key := range keys {
		max := adv[key]
		if kmax := kmsg.RequestForKey(key).MaxVersion(); max > kmax {
			t.Fatalf("key %d: advertised v%d above kmsg's v%d", key, max, kmax)
		}
		for v := int16(0); v <= max+1; v++ {
			for _, req := range groupRequests(v) {
				if req.Key() != key {
					continue
				}
				if v > req.MaxVersion() {
					continue // kmsg cannot encode it
				}
				resp := h.handle(req)
				code := errorCode(t, resp)
				if v > max && code != errUnsupportedVersion {
					t.Fatalf("key %d v%d: error %d, want UNSUPPORTED_VERSION", key, v, code)
				}
				if v <= max && code == errUnsupportedVersion {
					t.Fatalf("key %d v%d: UNSUPPORTED_VERSION for an advertised version", key, v)
				}
			}
		}
	}
	// A version that is not there at all.
	for _, req := range groupRequests(0) {
		req.SetVersion(-1)
		resp, ok := h.c.Handle(context.Background(), req)
		if !ok {
			t.Fatalf("%T not handled", req)
		}
		if code := errorCode(t, resp); code != errUnsupportedVersion {
			t.Fatalf("%T v-1: error %d", req, code)
		}
		req.SetVersion(100)
		resp, _ = h.c.Handle(context.Background(), req)
		if code := errorCode(t, resp); code != errUnsupportedVersion {
			t.Fatalf("%T v100: error %d", req, code)
		}
	}
	// Not a group request.
	for _, req := range []kmsg.Request{kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrFindCoordinatorRequest()} {
		if resp, ok := h.c.Handle(context.Background(), req); ok || resp != nil {
			t.Fatalf("%T handled", req)
		}
	}
}

// TestListAndDescribe: ListGroups with and without the state and type
// filters; DescribeGroups of Stable, rebalancing and unknown groups, with
// authorized operations on request.
func TestListAndDescribe(t *testing.T) {
	h := newHarness(t, Config{})
	ids, _ := h.stableGroup("stable", 2)
	h.commit(commitReq(9, "simple", "", -1, one))
	ctx := ContextWithClient(context.Background(), "client-7", "/10.0.0.7")
	first, _ := h.c.Handle(ctx, joinReq(9, "rebal", ""))
	id := first.(*kmsg.JoinGroupResponse).MemberID
	if resp, _ := h.c.Handle(ctx, joinReq(9, "rebal", id)); resp.(*kmsg.JoinGroupResponse).ErrorCode != 0 {
		t.Fatalf("join: %+v", resp)
	}
	list := func(v int16, states, types []string) map[string]string {
		r := kmsg.NewPtrListGroupsRequest()
		r.Version, r.StatesFilter, r.TypesFilter = v, states, types
		resp := h.handle(r).(*kmsg.ListGroupsResponse)
		out := map[string]string{}
		for _, g := range resp.Groups {
			out[g.Group] = g.ProtocolType + ":" + g.GroupState + ":" + g.GroupType
		}
		return out
	}
	if got := list(0, nil, nil); len(got) != 3 || got["stable"][:9] != "consumer:" || got["simple"][0] != ':' {
		t.Fatalf("list v0: %v", got)
	}
	if got := list(5, nil, nil); !maps.Equal(got, map[string]string{
		"stable": "consumer:Stable:classic", "simple": ":Empty:classic", "rebal": "consumer:CompletingRebalance:classic"}) {
		t.Fatalf("list v5: %v", got)
	}
	if got := list(4, []string{"STABLE", "empty"}, nil); len(got) != 2 || got["rebal"] != "" {
		t.Fatalf("list v4 states: %v", got)
	}
	if got := list(5, nil, []string{"consumer"}); len(got) != 0 {
		t.Fatalf("list v5 type consumer: %v", got)
	}
	if got := list(5, nil, []string{"Classic"}); len(got) != 3 {
		t.Fatalf("list v5 type classic: %v", got)
	}
	if got := list(3, []string{"Stable"}, nil); len(got) != 3 {
		t.Fatalf("list v3 ignores the filter it cannot carry: %v", got)
	}

	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 6
	r.Groups = []string{"stable", "rebal", "nope", "simple"}
	r.IncludeAuthorizedOperations = true
	resp := h.handle(r).(*kmsg.DescribeGroupsResponse)
	s, rb, nope, simple := resp.Groups[0], resp.Groups[1], resp.Groups[2], resp.Groups[3]
	if s.State != "Stable" || s.Protocol != "range" || s.ProtocolType != "consumer" || len(s.Members) != 2 ||
		s.Members[0].MemberID != ids[0] || string(s.Members[0].ProtocolMetadata) != "meta-range" ||
		string(s.Members[0].MemberAssignment) != "for-"+ids[0] || s.AuthorizedOperations != groupOperations {
		t.Fatalf("describe stable: %+v", s)
	}
	if rb.State != "CompletingRebalance" || rb.Protocol != "" || len(rb.Members) != 1 || len(rb.Members[0].ProtocolMetadata) != 0 ||
		rb.Members[0].ClientID != "client-7" || rb.Members[0].ClientHost != "/10.0.0.7" || rb.Members[0].MemberID[:9] != "client-7-" {
		t.Fatalf("describe rebalancing: %+v", rb)
	}
	if nope.ErrorCode != errGroupIDNotFound || nope.State != "Dead" || nope.ErrorMessage == nil {
		t.Fatalf("describe unknown v6: %+v", nope)
	}
	if simple.State != "Empty" || len(simple.Members) != 0 {
		t.Fatalf("describe simple: %+v", simple)
	}
	r.Version = 5
	r.IncludeAuthorizedOperations = false
	resp = h.handle(r).(*kmsg.DescribeGroupsResponse)
	if g := resp.Groups[2]; g.ErrorCode != 0 || g.State != "Dead" {
		t.Fatalf("describe unknown v5: %+v", g)
	}
	if resp.Groups[0].AuthorizedOperations != -2147483648 {
		t.Fatalf("operations not asked for: %d", resp.Groups[0].AuthorizedOperations)
	}
}
