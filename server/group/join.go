package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

// instanceID returns the request's group instance id when its version
// carries one.
func instanceID(p *string, version, since int16) *string {
	if version < since || p == nil {
		return nil
	}
	s := *p
	return &s
}

func (c *Coordinator) handleJoin(ctx context.Context, req *kmsg.JoinGroupRequest, ci clientInfo) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	var res joinResult
	if !supported(req) {
		res = joinResult{err: errUnsupportedVersion, memberID: req.MemberID, generation: -1}
	} else if !c.lock() {
		res = joinResult{err: errCoordinatorNotAvailable, memberID: req.MemberID, generation: -1}
	} else {
		var wait chan joinResult
		res, wait = c.join(req, ci)
		c.unlock()
		if wait != nil {
			select {
			case res = <-wait:
			case <-ctx.Done():
				res = joinResult{err: errRebalanceInProgress, memberID: req.MemberID, generation: -1}
			}
		}
	}
	resp.ErrorCode = res.err
	resp.MemberID = res.memberID
	resp.Generation = res.generation
	resp.ProtocolType = res.protocolType
	resp.Protocol = res.protocol
	resp.LeaderID = res.leader
	resp.SkipAssignment = res.skipAssignment
	for _, m := range res.members {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		jm.ProtocolMetadata = m.metadata
		resp.Members = append(resp.Members, jm)
	}
	return resp
}

// join runs JoinGroup under the lock (handleJoinGroup): it answers at
// once, or returns the channel the answer will come on.
func (c *Coordinator) join(req *kmsg.JoinGroupRequest, ci clientInfo) (joinResult, chan joinResult) {
	fail := func(code int16, memberID string) (joinResult, chan joinResult) {
		return joinResult{err: code, memberID: memberID, generation: -1}, nil
	}
	if req.Group == "" {
		return fail(errInvalidGroupID, req.MemberID)
	}
	session := ms(req.SessionTimeoutMillis)
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return fail(errInvalidSessionTimeout, req.MemberID)
	}
	rebalance := ms(req.RebalanceTimeoutMillis)
	if req.Version == 0 {
		rebalance = session // v0 has no rebalance timeout
	}
	rebalance = max(rebalance, 0)
	inst := instanceID(req.InstanceID, req.Version, 5)
	protocols := make([]protocol, 0, len(req.Protocols))
	for _, p := range req.Protocols {
		protocols = append(protocols, protocol{name: p.Name, metadata: p.Metadata})
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return fail(errUnknownMemberID, req.MemberID)
		}
		g = newGroup(req.Group)
		c.groups[req.Group] = g
	}
	if g.consumer != nil {
		if len(g.consumer.members) > 0 {
			// Kafka lets classic members into a consumer group
			// (group.consumer.migration.policy); this does not.
			return fail(errInconsistentGroupProtocol, req.MemberID)
		}
		g.consumer = nil // an empty consumer group becomes classic
	}
	nm := &member{
		memberInfo: memberInfo{
			clientID: ci.id, clientHost: ci.host, instanceID: inst,
			rebalanceTimeout: rebalance, sessionTimeout: session,
		},
		protocolType: req.ProtocolType, protocols: protocols,
	}
	var wait chan joinResult
	var res joinResult
	if req.MemberID == "" {
		res, wait = c.joinNew(g, nm, req.Version)
	} else {
		nm.id = req.MemberID
		res, wait = c.joinKnown(g, nm)
	}
	c.checkJoin(g)
	return res, wait
}

// await registers a JoinGroup call of m as waiting; a call the member had
// waiting already (a retry) is sent back to rejoin.
func await(m *member) chan joinResult {
	m.answerJoin(joinResult{err: errRebalanceInProgress, memberID: m.id, generation: -1})
	m.joinWait = make(chan joinResult, 1)
	return m.joinWait
}

func (c *Coordinator) joinNew(g *group, nm *member, version int16) (joinResult, chan joinResult) {
	if g.state == stateDead {
		return joinResult{err: errCoordinatorNotAvailable, generation: -1}, nil
	}
	if !g.supportsProtocols(nm.protocolType, nm.protocols) {
		return joinResult{err: errInconsistentGroupProtocol, generation: -1}, nil
	}
	prefix := nm.clientID
	if nm.instanceID != nil {
		prefix = *nm.instanceID
	}
	id := newMemberID(prefix)
	if nm.instanceID != nil {
		if old, ok := g.static[*nm.instanceID]; ok {
			return c.replaceStaticMember(g, old, id, nm, version >= 9)
		}
		nm.id = id
		return joinResult{}, c.addMember(g, nm)
	}
	if version >= 4 {
		// KIP-394: the member must come back with the id handed out;
		// until then it holds up the rebalance for one session timeout.
		g.pending[id] = c.now().Add(nm.sessionTimeout)
		return joinResult{err: errMemberIDRequired, memberID: id, generation: -1}, nil
	}
	nm.id = id
	return joinResult{}, c.addMember(g, nm)
}

// addMember adds a joining member and starts (or joins) a rebalance.
func (c *Coordinator) addMember(g *group, m *member) chan joinResult {
	m.isNew = true
	if g.state == statePreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m)
	wait := await(m)
	// A member that never completes a join may not hold the group for
	// ever: its own session cannot run before it has joined.
	m.deadline = c.now().Add(newMemberJoinTimeout)
	c.maybePrepareRebalance(g)
	return wait
}

// update replaces a member's protocols and timeouts with a rejoin's.
func update(m, nm *member) chan joinResult {
	m.protocols = nm.protocols
	m.rebalanceTimeout = nm.rebalanceTimeout
	m.sessionTimeout = nm.sessionTimeout
	if nm.clientID != "" || nm.clientHost != "" {
		m.clientID, m.clientHost = nm.clientID, nm.clientHost
	}
	return await(m)
}

// replaceStaticMember handles a known group instance id joining with no
// member id (a restarted static member): it takes over the old member
// under a new id; a Stable group whose protocol stays keeps its
// assignment without a rebalance.
func (c *Coordinator) replaceStaticMember(g *group, oldID, newID string, nm *member, skip bool) (joinResult, chan joinResult) {
	oldLeader := g.leader
	m := g.replaceStatic(*nm.instanceID, oldID, newID)
	c.heartbeat(m)
	wait := update(m, nm)
	switch g.state {
	case stateStable:
		if g.selectProtocol() != g.protocol {
			c.maybePrepareRebalance(g)
			return joinResult{}, wait
		}
		prev := g.stored
		g.stored = g.snapshot(assignments(g))
		if err := c.saveLocked(); err != nil {
			g.stored = prev
			m.answerJoin(joinResult{err: errCoordinatorNotAvailable, generation: g.generation,
				protocolType: g.protocolTypePtr(), protocol: g.protocolPtr(), leader: oldLeader})
			return joinResult{}, wait
		}
		r := joinResult{memberID: newID, generation: g.generation, protocolType: g.protocolTypePtr(),
			protocol: g.protocolPtr(), leader: oldLeader}
		if skip {
			// JoinGroup v9: the leader learns it leads but skips the
			// assignment, the group being stable.
			r.leader = g.leader
			if g.isLeader(newID) {
				r.members = g.memberList()
				r.skipAssignment = true
			}
		}
		m.answerJoin(r)
	case stateCompletingRebalance:
		// The old id may already be in the leader's assignment.
		c.prepareRebalance(g)
	}
	return joinResult{}, wait
}

func assignments(g *group) map[string][]byte {
	out := make(map[string][]byte, len(g.members))
	for _, m := range g.members {
		out[m.id] = m.assignment
	}
	return out
}

// validateMember checks that id is a member and, for a static member,
// that its instance id maps to id (validateCurrentMember).
func (g *group) validateMember(id string, inst *string) int16 {
	if inst != nil {
		cur, ok := g.static[*inst]
		if !ok {
			return errUnknownMemberID
		}
		if cur != id {
			return errFencedInstanceID
		}
		return errNone
	}
	if !g.has(id) {
		return errUnknownMemberID
	}
	return errNone
}

func (c *Coordinator) joinKnown(g *group, nm *member) (joinResult, chan joinResult) {
	id := nm.id
	fail := func(code int16) (joinResult, chan joinResult) {
		return joinResult{err: code, memberID: id, generation: -1}, nil
	}
	if g.state == stateDead {
		return fail(errCoordinatorNotAvailable)
	}
	if !g.supportsProtocols(nm.protocolType, nm.protocols) {
		return fail(errInconsistentGroupProtocol)
	}
	if _, ok := g.pending[id]; ok {
		if nm.instanceID != nil {
			// Pending ids are handed to dynamic members only.
			return fail(errUnknownMemberID)
		}
		return joinResult{}, c.addMember(g, nm)
	}
	if code := g.validateMember(id, nm.instanceID); code != errNone {
		return fail(code)
	}
	m := g.byID[id]
	current := func() joinResult {
		return joinResult{memberID: id, generation: g.generation, protocolType: g.protocolTypePtr(),
			protocol: g.protocolPtr(), leader: g.leader}
	}
	switch g.state {
	case statePreparingRebalance:
		wait := update(m, nm)
		c.maybePrepareRebalance(g)
		return joinResult{}, wait
	case stateCompletingRebalance:
		if m.matches(nm.protocols) {
			// A retry of a join whose answer was lost: answer again.
			r := current()
			if g.isLeader(id) {
				r.members = g.memberList()
			}
			return r, nil
		}
		wait := update(m, nm)
		c.maybePrepareRebalance(g)
		return joinResult{}, wait
	case stateStable:
		if g.isLeader(id) || !m.matches(nm.protocols) {
			// The leader rejoining forces a rebalance (for changes
			// only it sees, such as new partitions).
			wait := update(m, nm)
			c.maybePrepareRebalance(g)
			return joinResult{}, wait
		}
		return current(), nil
	}
	return fail(errUnknownMemberID)
}

func (c *Coordinator) handleSync(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	var res syncResult
	if !supported(req) {
		res.err = errUnsupportedVersion
	} else if !c.lock() {
		res.err = errCoordinatorNotAvailable
	} else {
		var wait chan syncResult
		res, wait = c.sync(req)
		c.unlock()
		if wait != nil {
			select {
			case res = <-wait:
			case <-ctx.Done():
				res = syncResult{err: errRebalanceInProgress}
			}
		}
	}
	resp.ErrorCode = res.err
	resp.ProtocolType = res.protocolType
	resp.Protocol = res.protocol
	resp.MemberAssignment = res.assignment
	return resp
}

func (c *Coordinator) sync(req *kmsg.SyncGroupRequest) (syncResult, chan syncResult) {
	fail := func(code int16) (syncResult, chan syncResult) { return syncResult{err: code}, nil }
	if req.Group == "" {
		return fail(errInvalidGroupID)
	}
	g := c.groups[req.Group]
	if g == nil {
		return fail(errUnknownMemberID)
	}
	if g.state == stateDead {
		return fail(errCoordinatorNotAvailable)
	}
	if code := g.validateMember(req.MemberID, instanceID(req.InstanceID, req.Version, 3)); code != errNone {
		return fail(code)
	}
	if req.Generation != g.generation {
		return fail(errIllegalGeneration)
	}
	if req.Version >= 5 {
		if req.ProtocolType != nil && *req.ProtocolType != g.protocolType {
			return fail(errInconsistentGroupProtocol)
		}
		if req.Protocol != nil && *req.Protocol != g.protocol {
			return fail(errInconsistentGroupProtocol)
		}
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case stateEmpty:
		return fail(errUnknownMemberID)
	case statePreparingRebalance:
		return fail(errRebalanceInProgress)
	case stateStable:
		c.syncDone(g, m.id)
		c.heartbeat(m)
		return syncResult{protocolType: g.protocolTypePtr(), protocol: g.protocolPtr(), assignment: m.assignment}, nil
	}
	// CompletingRebalance.
	m.answerSync(syncResult{err: errRebalanceInProgress})
	m.syncWait = make(chan syncResult, 1)
	wait := m.syncWait
	c.syncDone(g, m.id)
	if !g.isLeader(m.id) {
		return syncResult{}, wait
	}
	assign := make(map[string][]byte, len(g.members))
	for _, a := range req.GroupAssignment {
		if g.has(a.MemberID) {
			assign[a.MemberID] = a.MemberAssignment
		}
	}
	for _, x := range g.members {
		if assign[x.id] == nil {
			assign[x.id] = []byte{}
		}
	}
	prev := g.stored
	g.stored = g.snapshot(assign)
	if err := c.saveLocked(); err != nil {
		g.stored = prev
		c.propagateAssignmentError(g, errCoordinatorNotAvailable)
		c.maybePrepareRebalance(g)
		return syncResult{}, wait
	}
	pt, p := g.protocolTypePtr(), g.protocolPtr()
	for _, x := range g.members {
		x.assignment = assign[x.id]
		if x.answerSync(syncResult{protocolType: pt, protocol: p, assignment: x.assignment}) {
			c.heartbeat(x)
		}
	}
	g.state = stateStable
	return syncResult{}, wait
}

// syncDone notes that member id has sent SyncGroup this generation.
func (c *Coordinator) syncDone(g *group, id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.syncDeadline = time.Time{}
	}
}

func (c *Coordinator) handleHeartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if resp.ErrorCode = c.enter(req); resp.ErrorCode != errNone {
		return resp
	}
	defer c.unlock()
	resp.ErrorCode = c.heartbeatRequest(req)
	return resp
}

func (c *Coordinator) heartbeatRequest(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return errInvalidGroupID
	}
	g := c.groups[req.Group]
	if g == nil {
		return errUnknownMemberID
	}
	if g.state == stateDead {
		return errCoordinatorNotAvailable
	}
	if code := g.validateMember(req.MemberID, instanceID(req.InstanceID, req.Version, 3)); code != errNone {
		return code
	}
	if req.Generation != g.generation {
		return errIllegalGeneration
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case stateEmpty:
		return errUnknownMemberID
	case statePreparingRebalance:
		c.heartbeat(m)
		return errRebalanceInProgress
	}
	c.heartbeat(m)
	return errNone
}

func (c *Coordinator) handleLeave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	type leaving struct {
		id   string
		inst *string
	}
	var who []leaving
	if req.Version < 3 {
		who = []leaving{{id: req.MemberID}}
	} else {
		for _, m := range req.Members {
			who = append(who, leaving{id: m.MemberID, inst: m.InstanceID})
		}
	}
	codes := make([]int16, len(who))
	top := errNone
	switch {
	case !supported(req):
		top = errUnsupportedVersion
		codes = nil
	case req.Group == "":
		top = errInvalidGroupID
		codes = nil
	case !c.lock():
		top = errCoordinatorNotAvailable
		codes = nil
	default:
		g := c.groups[req.Group]
		for i, l := range who {
			codes[i] = c.leave(g, l.id, l.inst)
		}
		c.unlock()
	}
	if req.Version < 3 {
		if top == errNone && len(codes) > 0 {
			top = codes[0]
		}
		resp.ErrorCode = top
		return resp
	}
	resp.ErrorCode = top
	for i, l := range who {
		if codes == nil {
			break
		}
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = l.id
		rm.InstanceID = l.inst
		rm.ErrorCode = codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// leave removes one member on LeaveGroup: by member id, or, with an
// empty member id, by group instance id (an administrator's removal).
func (c *Coordinator) leave(g *group, id string, inst *string) int16 {
	if g == nil {
		return errUnknownMemberID
	}
	if g.state == stateDead {
		return errCoordinatorNotAvailable
	}
	if id == "" {
		if inst == nil {
			return errUnknownMemberID
		}
		cur, ok := g.static[*inst]
		if !ok {
			return errUnknownMemberID
		}
		c.removeMember(g, g.byID[cur])
		return errNone
	}
	if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		c.checkJoin(g)
		return errNone
	}
	if code := g.validateMember(id, inst); code != errNone {
		return code
	}
	c.removeMember(g, g.byID[id])
	return errNone
}
