package group

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinVersions are the JoinGroup versions the rebalance tests run at,
// with the SyncGroup, Heartbeat and LeaveGroup versions of the same era.
var joinVersions = []struct{ join, sync, hb, leave int16 }{
	{0, 0, 0, 0}, {3, 2, 2, 2}, {4, 3, 3, 3}, {5, 3, 3, 3}, {7, 5, 4, 4}, {9, 5, 4, 5},
}

// TestThreeMembersOneLeaves: three members join within the initial
// delay and form generation 1 with one leader; SyncGroup hands out the
// leader's assignment; one member leaves, the others see
// REBALANCE_IN_PROGRESS, rejoin, and form generation 2 without it.
func TestThreeMembersOneLeaves(t *testing.T) {
	for _, v := range joinVersions {
		t.Run(fmt.Sprintf("join-v%d", v.join), func(t *testing.T) {
			h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
			const grp = "g3"
			var chans []<-chan *kmsg.JoinGroupResponse
			for i := range 3 {
				id := h.memberID(v.join, grp)
				// Members prefer different protocols; only "range" and
				// "sticky" are common, and "sticky" gets more votes.
				names := [][]string{{"sticky", "range"}, {"range", "sticky", "rr"}, {"sticky", "rr", "range"}}[i]
				chans = append(chans, h.joinAsync(joinReq(v.join, grp, id, names...)))
				h.waitJoining(grp, i+1)
			}
			if got := h.state(grp); got != "PreparingRebalance" {
				t.Fatalf("state during the initial delay: %s", got)
			}
			// Each new member extends the initial delay once more.
			for range 10 {
				h.advance(time.Second)
			}
			var resps []*kmsg.JoinGroupResponse
			for _, ch := range chans {
				resps = append(resps, recv(t, ch))
			}
			leader := resps[0].LeaderID
			var ids []string
			for i, r := range resps {
				if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != leader {
					t.Fatalf("member %d: %+v", i, r)
				}
				if r.Protocol == nil || *r.Protocol != "sticky" {
					t.Fatalf("member %d: protocol %v, want sticky", i, r.Protocol)
				}
				if v.join >= 7 && (r.ProtocolType == nil || *r.ProtocolType != "consumer") {
					t.Fatalf("member %d: protocol type %v", i, r.ProtocolType)
				}
				if (r.MemberID == leader) != (len(r.Members) == 3) {
					t.Fatalf("member %d (leader %v) got %d members", i, r.MemberID == leader, len(r.Members))
				}
				ids = append(ids, r.MemberID)
			}
			if leader != ids[0] {
				t.Fatalf("leader %s, want the first member %s", leader, ids[0])
			}
			for _, m := range resps[0].Members {
				if string(m.ProtocolMetadata) != "meta-sticky" {
					t.Fatalf("leader sees metadata %q", m.ProtocolMetadata)
				}
			}
			// Followers sync first and wait; the leader's sync releases them.
			assign := map[string]string{ids[0]: "a0", ids[1]: "a1", ids[2]: "a2"}
			f1 := h.syncAsync(syncReq(v.sync, grp, ids[1], 1, nil))
			f2 := h.syncAsync(syncReq(v.sync, grp, ids[2], 1, nil))
			h.waitSyncing(grp, 2)
			l := recv(t, h.syncAsync(syncReq(v.sync, grp, ids[0], 1, assign)))
			for i, r := range []*kmsg.SyncGroupResponse{l, recv(t, f1), recv(t, f2)} {
				if r.ErrorCode != 0 || string(r.MemberAssignment) != fmt.Sprintf("a%d", i) {
					t.Fatalf("sync %d: %+v", i, r)
				}
				if v.sync >= 5 && (r.Protocol == nil || *r.Protocol != "sticky") {
					t.Fatalf("sync %d: protocol %v", i, r.Protocol)
				}
			}
			if got := h.state(grp); got != "Stable" {
				t.Fatalf("after sync: %s", got)
			}
			for _, id := range ids {
				if code := h.heartbeat(v.hb, grp, id, 1); code != 0 {
					t.Fatalf("heartbeat in Stable: %d", code)
				}
			}
			d := h.describe(0, grp)
			if d.State != "Stable" || d.Protocol != "sticky" || len(d.Members) != 3 || string(d.Members[1].MemberAssignment) != "a1" {
				t.Fatalf("describe: %+v", d)
			}

			// The third member leaves.
			lv := kmsg.NewPtrLeaveGroupRequest()
			lv.Version = v.leave
			lv.Group = grp
			if v.leave < 3 {
				lv.MemberID = ids[2]
			} else {
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = ids[2]
				lv.Members = []kmsg.LeaveGroupRequestMember{m}
			}
			lr := h.handle(lv).(*kmsg.LeaveGroupResponse)
			if lr.ErrorCode != 0 || (v.leave >= 3 && (len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0)) {
				t.Fatalf("leave: %+v", lr)
			}
			if got := h.state(grp); got != "PreparingRebalance" {
				t.Fatalf("after leave: %s", got)
			}
			for _, id := range ids[:2] {
				if code := h.heartbeat(v.hb, grp, id, 1); code != errRebalanceInProgress {
					t.Fatalf("heartbeat during the rebalance: %d", code)
				}
			}
			if code := h.heartbeat(v.hb, grp, ids[2], 1); code != errUnknownMemberID {
				t.Fatalf("heartbeat of the member that left: %d", code)
			}
			a := h.joinAsync(joinReq(v.join, grp, ids[0], "sticky", "range"))
			h.waitJoining(grp, 1)
			b := recv(t, h.joinAsync(joinReq(v.join, grp, ids[1], "range", "sticky", "rr")))
			ra := recv(t, a)
			for _, r := range []*kmsg.JoinGroupResponse{ra, b} {
				if r.ErrorCode != 0 || r.Generation != 2 || r.LeaderID != ids[0] {
					t.Fatalf("rejoin: %+v", r)
				}
			}
			if len(ra.Members) != 2 || len(b.Members) != 0 {
				t.Fatalf("members: leader %d, follower %d", len(ra.Members), len(b.Members))
			}
			if code := h.heartbeat(v.hb, grp, ids[0], 1); code != errIllegalGeneration {
				t.Fatalf("heartbeat with the old generation: %d", code)
			}
			fs := h.syncAsync(syncReq(v.sync, grp, ids[1], 2, nil))
			ls := recv(t, h.syncAsync(syncReq(v.sync, grp, ids[0], 2, map[string]string{ids[0]: "x0", ids[1]: "x1"})))
			if ls.ErrorCode != 0 || string(ls.MemberAssignment) != "x0" {
				t.Fatalf("leader sync gen 2: %+v", ls)
			}
			if r := recv(t, fs); r.ErrorCode != 0 || string(r.MemberAssignment) != "x1" {
				t.Fatalf("follower sync gen 2: %+v", r)
			}
			d = h.describe(5, grp)
			if d.State != "Stable" || len(d.Members) != 2 {
				t.Fatalf("describe after the rebalance: %+v", d)
			}
		})
	}
}

// TestNoInitialDelay: with no initial delay (the tests' setting) the
// first member forms generation 1 alone at once; a second member's join
// waits until the first, told by its heartbeat, rejoins. Real time.
func TestNoInitialDelay(t *testing.T) {
	h := newHarness(t, Config{Now: time.Now})
	const grp = "g"
	a := h.memberID(9, grp)
	ra := h.join(joinReq(9, grp, a))
	if ra.ErrorCode != 0 || ra.Generation != 1 || ra.LeaderID != a || len(ra.Members) != 1 {
		t.Fatalf("first join: %+v", ra)
	}
	if r := recv(t, h.syncAsync(syncReq(5, grp, a, 1, map[string]string{a: "all"}))); string(r.MemberAssignment) != "all" {
		t.Fatalf("sync: %+v", r)
	}
	b := h.memberID(9, grp)
	if code := h.heartbeat(4, grp, a, 1); code != 0 {
		t.Fatalf("heartbeat while b is pending: %d", code)
	}
	bch := h.joinAsync(joinReq(9, grp, b))
	h.waitJoining(grp, 1)
	if code := h.heartbeat(4, grp, a, 1); code != errRebalanceInProgress {
		t.Fatalf("heartbeat: %d, want REBALANCE_IN_PROGRESS", code)
	}
	ra = recv(t, h.joinAsync(joinReq(9, grp, a)))
	rb := recv(t, bch)
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != a || rb.LeaderID != a {
		t.Fatalf("generation 2: %+v / %+v", ra, rb)
	}
}

// TestSessionTimeout: a member that stops heartbeating is dropped after
// its session timeout and the group rebalances without it; one that
// heartbeats just in time stays.
func TestSessionTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	grp := "s"
	ids, gen := h.stableGroup(grp, 2)
	for range 4 {
		h.advance(9 * time.Second) // session timeout is 10s
		if code := h.heartbeat(4, grp, ids[0], gen); code != 0 {
			t.Fatalf("heartbeat: %d", code)
		}
		if code := h.heartbeat(4, grp, ids[1], gen); code != 0 {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	h.advance(9 * time.Second)
	if code := h.heartbeat(4, grp, ids[0], gen); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	h.advance(2 * time.Second) // ids[1] silent for 11s
	if code := h.heartbeat(4, grp, ids[1], gen); code != errUnknownMemberID {
		t.Fatalf("expired member's heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
	}
	if code := h.heartbeat(4, grp, ids[0], gen); code != errRebalanceInProgress {
		t.Fatalf("survivor's heartbeat: %d, want REBALANCE_IN_PROGRESS", code)
	}
	r := recv(t, h.joinAsync(joinReq(9, grp, ids[0])))
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
}

// TestSessionTimeoutByTimer: the coordinator's own timer expires a
// silent member without any request coming in (real clock, 100ms
// sessions).
func TestSessionTimeoutByTimer(t *testing.T) {
	h := newHarness(t, Config{Now: time.Now, MinSessionTimeout: time.Millisecond})
	grp := "timer"
	id := h.memberID(9, grp)
	req := joinReq(9, grp, id)
	req.SessionTimeoutMillis = 100
	if r := h.join(req); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	recv(t, h.syncAsync(syncReq(5, grp, id, 1, nil)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.state(grp)
		if st == "Empty" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member not expired by the timer: state %v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stableGroup forms a Stable group of n members at JoinGroup v9 and
// returns their ids (leader first) and the generation.
func (h *harness) stableGroup(grp string, n int) ([]string, int32) {
	h.t.Helper()
	// With no initial delay the first member forms a generation alone at
	// once; the others wait for it to rejoin with them.
	ids := []string{h.memberID(9, grp)}
	if r := h.join(joinReq(9, grp, ids[0])); r.ErrorCode != 0 {
		h.t.Fatalf("first join: %+v", r)
	}
	var chans []<-chan *kmsg.JoinGroupResponse
	for i := 1; i < n; i++ {
		ids = append(ids, h.memberID(9, grp))
		chans = append(chans, h.joinAsync(joinReq(9, grp, ids[i])))
		h.waitJoining(grp, i)
	}
	// Alone, the first member's rejoin is a retry, answered the same.
	chans = append(chans, h.joinAsync(joinReq(9, grp, ids[0])))
	var gen int32
	for _, ch := range chans {
		r := recv(h.t, ch)
		if r.ErrorCode != 0 {
			h.t.Fatalf("join: %+v", r)
		}
		gen = r.Generation
	}
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "for-" + id
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	for i, id := range ids {
		a := assign
		if i > 0 {
			a = nil
		}
		syncs = append(syncs, h.syncAsync(syncReq(5, grp, id, gen, a)))
	}
	for i, ch := range syncs {
		if r := recv(h.t, ch); r.ErrorCode != 0 || string(r.MemberAssignment) != "for-"+ids[i] {
			h.t.Fatalf("sync %d: %+v", i, r)
		}
	}
	return ids, gen
}

// TestRebalanceTimeout: a member that heartbeats but does not rejoin
// within the rebalance timeout is dropped; the ones that rejoined form
// the next generation.
func TestRebalanceTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	grp := "rt"
	ids, gen := h.stableGroup(grp, 2)
	a := h.joinAsync(joinReq(9, grp, ids[1], "range", "other")) // metadata change
	h.waitJoining(grp, 1)
	for range 5 {
		h.advance(5 * time.Second)
		if code := h.heartbeat(4, grp, ids[0], gen); code != errRebalanceInProgress {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	h.advance(5 * time.Second) // 30s: the rebalance timeout
	r := recv(t, a)
	if r.ErrorCode != 0 || r.Generation != gen+1 || r.LeaderID != ids[1] || len(r.Members) != 1 {
		t.Fatalf("join after the rebalance timeout: %+v (want ids[1] leading alone)", r)
	}
	if code := h.heartbeat(4, grp, ids[0], gen); code != errUnknownMemberID {
		t.Fatalf("dropped member's heartbeat: %d", code)
	}
}

// TestSyncTimeout: a member that does not send SyncGroup within the
// rebalance timeout after the join phase is dropped, and the group
// rebalances; the leader's waiting SyncGroup is sent back to rejoin.
func TestSyncTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	grp := "st"
	ids, gen := h.stableGroup(grp, 2)
	a := h.joinAsync(joinReq(9, grp, ids[0]))
	h.waitJoining(grp, 1)
	b := h.joinAsync(joinReq(9, grp, ids[1]))
	ra, rb := recv(t, a), recv(t, b)
	if ra.Generation != gen+1 || rb.Generation != gen+1 {
		t.Fatalf("rejoin: %+v %+v", ra, rb)
	}
	// Only the follower syncs; the leader never sends its assignment.
	fs := h.syncAsync(syncReq(5, grp, ids[1], gen+1, nil))
	h.waitSyncing(grp, 1)
	h.advance(31 * time.Second)
	if r := recv(t, fs); r.ErrorCode != errRebalanceInProgress {
		t.Fatalf("follower's sync: %+v, want REBALANCE_IN_PROGRESS", r)
	}
	if code := h.heartbeat(4, grp, ids[0], gen+1); code != errUnknownMemberID {
		t.Fatalf("leader that never synced: %d", code)
	}
	if got := h.state(grp); got != "PreparingRebalance" {
		t.Fatalf("state: %s", got)
	}
}

// TestPendingMemberHoldsRebalance: a member id handed out with
// MEMBER_ID_REQUIRED holds the rebalance until it joins or its session
// timeout passes.
func TestPendingMemberHoldsRebalance(t *testing.T) {
	h := newHarness(t, Config{})
	grp := "p"
	ids, gen := h.stableGroup(grp, 1)
	pending := h.memberID(9, grp)
	_ = pending
	a := h.joinAsync(joinReq(9, grp, ids[0]))
	h.waitJoining(grp, 1)
	select {
	case r := <-a:
		t.Fatalf("join completed while a member id is pending: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	h.advance(11 * time.Second)
	r := recv(t, a)
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("join: %+v", r)
	}
	// The expired id is unknown now.
	if r := h.join(joinReq(9, grp, pending)); r.ErrorCode != errUnknownMemberID {
		t.Fatalf("join with an expired pending id: %+v", r)
	}
}

// TestStaticMember: a static member restarting (known instance id, no
// member id) takes over its member without a rebalance in a Stable
// group; the old member id is fenced; JoinGroup v9 tells a static leader
// to skip the assignment.
func TestStaticMember(t *testing.T) {
	h := newHarness(t, Config{})
	grp := "static"
	inst := "instance-1"
	req := joinReq(5, grp, "")
	req.InstanceID = &inst
	r := h.join(req) // static members get their id at once, no MEMBER_ID_REQUIRED
	if r.ErrorCode != 0 || r.Generation != 1 || r.MemberID == "" || len(r.Members) != 1 ||
		r.Members[0].InstanceID == nil || *r.Members[0].InstanceID != inst {
		t.Fatalf("static join: %+v", r)
	}
	old := r.MemberID
	if s := recv(t, h.syncAsync(syncReq(3, grp, old, 1, map[string]string{old: "mine"}))); s.ErrorCode != 0 {
		t.Fatalf("sync: %+v", s)
	}
	for _, v := range []int16{5, 9} {
		req := joinReq(v, grp, "")
		req.InstanceID = &inst
		r2 := h.join(req)
		if r2.ErrorCode != 0 || r2.Generation != 1 || r2.MemberID == old {
			t.Fatalf("static rejoin v%d: %+v", v, r2)
		}
		if v >= 9 {
			if !r2.SkipAssignment || r2.LeaderID != r2.MemberID || len(r2.Members) != 1 {
				t.Fatalf("v9 static leader rejoin: %+v", r2)
			}
		} else if r2.LeaderID != old {
			t.Fatalf("v%d rejoin: leader %q, want the old id %q", v, r2.LeaderID, old)
		}
		if got := h.state(grp); got != "Stable" {
			t.Fatalf("state after the static rejoin: %s", got)
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version = 3
		hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = grp, old, 1, &inst
		if code := h.handle(hb).(*kmsg.HeartbeatResponse).ErrorCode; code != errFencedInstanceID {
			t.Fatalf("old id's heartbeat: %d, want FENCED_INSTANCE_ID", code)
		}
		hb.MemberID = r2.MemberID
		if code := h.handle(hb).(*kmsg.HeartbeatResponse).ErrorCode; code != 0 {
			t.Fatalf("new id's heartbeat: %d", code)
		}
		s := recv(t, h.syncAsync(syncReq(3, grp, r2.MemberID, 1, nil)))
		if s.ErrorCode != 0 || string(s.MemberAssignment) != "mine" {
			t.Fatalf("sync keeps the assignment: %+v", s)
		}
		old = r2.MemberID
	}
	// An administrator removes the static member by instance id.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version = 4
	lv.Group = grp
	m := kmsg.NewLeaveGroupRequestMember()
	m.InstanceID = &inst
	lv.Members = []kmsg.LeaveGroupRequestMember{m}
	lr := h.handle(lv).(*kmsg.LeaveGroupResponse)
	if lr.ErrorCode != 0 || len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0 {
		t.Fatalf("leave by instance id: %+v", lr)
	}
	if got := h.state(grp); got != "Empty" {
		t.Fatalf("state: %s", got)
	}
	// Holding nothing, the group goes away after Kafka's cleanup interval.
	h.advance(idleGroupLife - time.Second)
	if got := h.state(grp); got != "Empty" {
		t.Fatalf("state before the cleanup: %s", got)
	}
	h.advance(time.Second)
	if got := h.state(grp); got != "none" {
		t.Fatalf("idle group not dropped: %s", got)
	}
}

// TestJoinRetryInCompletingRebalance: a member whose join answer was lost
// joins again with the same metadata and gets the same answer.
func TestJoinRetryInCompletingRebalance(t *testing.T) {
	h := newHarness(t, Config{})
	grp := "retry"
	id := h.memberID(9, grp)
	r1 := h.join(joinReq(9, grp, id))
	r2 := h.join(joinReq(9, grp, id))
	if r2.ErrorCode != 0 || r2.Generation != r1.Generation || r2.LeaderID != id || len(r2.Members) != 1 {
		t.Fatalf("retry: %+v", r2)
	}
	if !bytes.Equal(r1.Members[0].ProtocolMetadata, r2.Members[0].ProtocolMetadata) {
		t.Fatal("metadata differs")
	}
	// A follower's JoinGroup in Stable with unchanged metadata is answered
	// with the current generation, no rebalance.
	ids, gen := h.stableGroup("retry2", 2)
	r := h.join(joinReq(9, "retry2", ids[1]))
	if r.ErrorCode != 0 || r.Generation != gen || h.state("retry2") != "Stable" {
		t.Fatalf("follower rejoin in Stable: %+v, state %s", r, h.state("retry2"))
	}
}

// TestCloseAnswersWaiters: Close answers waiting joins with
// COORDINATOR_NOT_AVAILABLE and later requests the same way.
func TestCloseAnswersWaiters(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: time.Minute})
	id := h.memberID(9, "c")
	ch := h.joinAsync(joinReq(9, "c", id))
	h.waitJoining("c", 1)
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.ErrorCode != errCoordinatorNotAvailable {
		t.Fatalf("waiting join after Close: %+v", r)
	}
	if code := h.heartbeat(4, "c", id, 0); code != errCoordinatorNotAvailable {
		t.Fatalf("heartbeat after Close: %d", code)
	}
	if err := h.c.CompleteTxn(1, 0, true); err != ErrClosed {
		t.Fatalf("CompleteTxn after Close: %v", err)
	}
	if err := h.c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestContextEnds: a JoinGroup whose context ends answers
// REBALANCE_IN_PROGRESS; the member stays in the rebalance.
func TestContextEnds(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: time.Minute})
	id := h.memberID(9, "ctx")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan kmsg.Response, 1)
	go func() {
		r, _ := h.c.Handle(ctx, joinReq(9, "ctx", id))
		done <- r
	}()
	h.waitJoining("ctx", 1)
	cancel()
	if r := recv(t, done).(*kmsg.JoinGroupResponse); r.ErrorCode != errRebalanceInProgress {
		t.Fatalf("join after cancel: %+v", r)
	}
	h.waitJoining("ctx", 1)
}

// TestCommitKeepsSession: an OffsetCommit of a member counts as a
// heartbeat (Kafka reschedules the session on it); a member that only
// commits stays, one that does nothing expires.
func TestCommitKeepsSession(t *testing.T) {
	h := newHarness(t, Config{})
	grp := "cs"
	ids, gen := h.stableGroup(grp, 2)
	for range 5 {
		h.advance(6 * time.Second)
		if got := h.commit(commitReq(9, grp, ids[0], gen, one)); got["t/0"] != 0 {
			t.Fatalf("commit: %v", got)
		}
		if code := h.heartbeat(4, grp, ids[1], gen); code != 0 {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	h.advance(11 * time.Second)
	if code := h.heartbeat(4, grp, ids[0], gen); code != errUnknownMemberID {
		t.Fatalf("member silent for 11s: %d, want UNKNOWN_MEMBER_ID", code)
	}
}
