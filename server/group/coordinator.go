package group

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a Coordinator.
type Config struct {
	// Dir is the directory of the coordinator's state file; it is
	// created when missing.
	Dir string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout
	// a member may ask for (Kafka's group.min.session.timeout.ms and
	// group.max.session.timeout.ms); 0 means 6s and 30m.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an Empty
	// group waits for more members (Kafka's
	// group.initial.rebalance.delay.ms, 3s there); 0 means none.
	InitialRebalanceDelay time.Duration
}

// ErrClosed is returned by calls on a closed Coordinator.
var ErrClosed = errors.New("partlog/server/group: coordinator closed")

// Coordinator is a single-node group coordinator for the classic group
// protocol. It is safe for concurrent use.
type Coordinator struct {
	cfg  Config
	now  func() time.Time
	path string

	mu     sync.Mutex
	closed bool
	groups map[string]*group
	seq    uint64 // orders offset commits (Kafka's log position)
	// lastSize is the size of the last state encoded.
	lastSize int
	timer    *time.Timer
	timerAt  time.Time
	// topics is the server's topics, for consumer groups (SetTopics).
	topics Topics
}

// Open loads the coordinator's state from cfg.Dir (creating the directory
// when missing) and starts its timer.
func Open(cfg Config) (*Coordinator, error) {
	if cfg.Dir == "" {
		return nil, errors.New("partlog/server/group: Config.Dir is empty")
	}
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = 6 * time.Second
	}
	if cfg.MaxSessionTimeout == 0 {
		cfg.MaxSessionTimeout = 30 * time.Minute
	}
	if cfg.MinSessionTimeout < 0 || cfg.MaxSessionTimeout < cfg.MinSessionTimeout || cfg.InitialRebalanceDelay < 0 {
		return nil, fmt.Errorf("partlog/server/group: invalid timeouts (session %v..%v, initial delay %v)",
			cfg.MinSessionTimeout, cfg.MaxSessionTimeout, cfg.InitialRebalanceDelay)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("partlog/server/group: %w", err)
	}
	c := &Coordinator{cfg: cfg, now: now, path: filepath.Join(cfg.Dir, StateFile), groups: map[string]*group{}}
	if err := c.load(); err != nil {
		return nil, err
	}
	c.timer = time.AfterFunc(time.Hour, c.onTimer)
	c.timer.Stop()
	c.mu.Lock()
	c.rearmLocked()
	c.mu.Unlock()
	return c, nil
}

// Close stops the coordinator's timer and answers every waiting JoinGroup
// and SyncGroup call with COORDINATOR_NOT_AVAILABLE, so their clients look
// for the coordinator again. Committed offsets are already durable.
// Later calls answer COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.timer.Stop()
	for _, g := range c.groups {
		for _, m := range g.members {
			m.answerJoin(joinResult{err: errCoordinatorNotAvailable, memberID: m.id, generation: -1})
			m.answerSync(syncResult{err: errCoordinatorNotAvailable})
		}
	}
	return nil
}

// versions are the highest versions implemented and tested, per API key.
var versions = map[int16]int16{
	8:  9, // OffsetCommit (v10 names topics by id)
	9:  9, // OffsetFetch (v10 names topics by id)
	11: 9, // JoinGroup
	12: 4, // Heartbeat
	13: 5, // LeaveGroup
	14: 5, // SyncGroup
	15: 6, // DescribeGroups
	16: 5, // ListGroups
	28: 5, // TxnOffsetCommit (CommitTxnOffsets; v6 names topics by id)
	42: 3, // DeleteGroups
	47: 0, // OffsetDelete
	68: 1, // ConsumerGroupHeartbeat
	69: 1, // ConsumerGroupDescribe
}

// Versions returns, per API key the coordinator handles, the highest
// version it implements and has tested; every version from 0 up is
// implemented. TxnOffsetCommit (28) is listed for CommitTxnOffsets.
func (c *Coordinator) Versions() map[int16]int16 {
	out := make(map[int16]int16, len(versions))
	for k, v := range versions {
		out[k] = v
	}
	return out
}

// clientKey is the context key of ContextWithClient.
type clientKey struct{}

type clientInfo struct{ id, host string }

// ContextWithClient returns a context carrying the client id and host of
// the connection a request came on; Handle records them for members
// (member ids begin with the client id; DescribeGroups shows both).
func ContextWithClient(ctx context.Context, clientID, clientHost string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{clientID, clientHost})
}

// Handle answers one group request at the request's version:
// *kmsg.JoinGroupRequest, SyncGroupRequest, HeartbeatRequest,
// LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest,
// ListGroupsRequest, DescribeGroupsRequest, TxnOffsetCommitRequest,
// DeleteGroupsRequest and OffsetDeleteRequest.
// JoinGroup and SyncGroup wait until the rebalance step completes or ctx
// ends (then they answer REBALANCE_IN_PROGRESS; the member stays in the
// rebalance, as in Kafka when a client goes away). A version above
// Versions gets UNSUPPORTED_VERSION in every error field. ok is false
// for any other request.
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (resp kmsg.Response, ok bool) {
	var ci clientInfo
	if v, ok := ctx.Value(clientKey{}).(clientInfo); ok {
		ci = v
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return c.handleJoin(ctx, r, ci), true
	case *kmsg.SyncGroupRequest:
		return c.handleSync(ctx, r), true
	case *kmsg.HeartbeatRequest:
		return c.handleHeartbeat(r), true
	case *kmsg.LeaveGroupRequest:
		return c.handleLeave(r), true
	case *kmsg.OffsetCommitRequest:
		return c.handleOffsetCommit(r), true
	case *kmsg.OffsetFetchRequest:
		return c.handleOffsetFetch(r), true
	case *kmsg.ListGroupsRequest:
		return c.handleListGroups(r), true
	case *kmsg.DescribeGroupsRequest:
		return c.handleDescribeGroups(r), true
	case *kmsg.TxnOffsetCommitRequest:
		return c.CommitTxnOffsets(r), true
	case *kmsg.DeleteGroupsRequest:
		return c.handleDeleteGroups(r), true
	case *kmsg.OffsetDeleteRequest:
		return c.handleOffsetDelete(r), true
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return c.handleConsumerHeartbeat(r, ci), true
	case *kmsg.ConsumerGroupDescribeRequest:
		return c.handleConsumerDescribe(r), true
	}
	return nil, false
}

// supported reports whether req's version is one Handle implements.
func supported(req kmsg.Request) bool {
	v := req.GetVersion()
	return v >= 0 && v <= versions[req.Key()]
}

// enter is a handler's preamble: the request's version checked, then the
// coordinator locked (lock). errNone means the lock is held and the
// caller unlocks; any other code answers the request.
func (c *Coordinator) enter(req kmsg.Request) int16 {
	if !supported(req) {
		return errUnsupportedVersion
	}
	if !c.lock() {
		return errCoordinatorNotAvailable
	}
	return errNone
}

// lock takes the coordinator lock and runs the expirations that are due;
// false (lock not held) when the coordinator is closed.
func (c *Coordinator) lock() bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.expireLocked()
	return true
}

// unlock re-arms the timer for the next deadline and releases the lock.
func (c *Coordinator) unlock() {
	c.rearmLocked()
	c.mu.Unlock()
}

func (c *Coordinator) onTimer() {
	if !c.lock() {
		return
	}
	c.timerAt = time.Time{}
	c.unlock()
}

// rearmLocked points the one timer of the coordinator at the earliest
// deadline of any group (session expiry, pending member expiry, join or
// sync deadline).
func (c *Coordinator) rearmLocked() {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	now := c.now()
	for id, g := range c.groups {
		if !g.idle() {
			g.idleSince = time.Time{}
		} else {
			// An Empty group without offsets holds nothing: Kafka's
			// periodic cleanup deletes it, and so does this, after the
			// same interval, so that group ids only tried do not pile up.
			if g.idleSince.IsZero() {
				g.idleSince = now
			}
			if !now.Before(g.idleSince.Add(idleGroupLife)) {
				delete(c.groups, id)
				continue
			}
			earlier(g.idleSince.Add(idleGroupLife))
		}
		if g.state == statePreparingRebalance {
			earlier(g.joinDeadline)
		}
		earlier(g.syncDeadline)
		for _, m := range g.members {
			earlier(m.deadline)
		}
		for _, t := range g.pending {
			earlier(t)
		}
		if g.consumer != nil {
			g.consumer.deadlines(earlier)
		}
	}
	if next.IsZero() {
		c.timer.Stop()
		c.timerAt = time.Time{}
		return
	}
	if next.Equal(c.timerAt) {
		return
	}
	c.timerAt = next
	c.timer.Reset(max(next.Sub(now), 0))
}

// idleGroupLife is how long a group that holds nothing (see group.idle)
// is kept: Kafka's offsets.retention.check.interval.ms.
const idleGroupLife = 10 * time.Minute

// expireLocked runs every expiration that is due at the clock's time.
func (c *Coordinator) expireLocked() {
	now := c.now()
	for _, g := range c.groups {
		// One expiry may make another due (a zero initial delay);
		// each pass removes a member or ends a phase, so this ends.
		for range 1000 {
			if !c.expireGroup(g, now) {
				break
			}
		}
	}
}

func due(t, now time.Time) bool { return !t.IsZero() && !now.Before(t) }

// expireGroup runs one due expiration of g; false when none was due.
func (c *Coordinator) expireGroup(g *group, now time.Time) bool {
	if g.consumer != nil {
		return c.expireConsumer(g, now)
	}
	for id, t := range g.pending {
		if due(t, now) {
			delete(g.pending, id)
			c.checkJoin(g)
			return true
		}
	}
	for _, m := range g.members {
		if !due(m.deadline, now) {
			continue
		}
		m.deadline = time.Time{}
		// A member waiting in a rebalance satisfies its heartbeats,
		// unless it never completed a join (onExpireHeartbeat).
		if !m.isNew && (m.awaitingJoin() || m.awaitingSync()) {
			return true
		}
		c.removeMember(g, m)
		return true
	}
	if g.state == statePreparingRebalance && due(g.joinDeadline, now) {
		c.onJoinDeadline(g)
		return true
	}
	if due(g.syncDeadline, now) {
		g.syncDeadline = time.Time{}
		c.onSyncDeadline(g)
		return true
	}
	return false
}

// heartbeat restarts m's session.
func (c *Coordinator) heartbeat(m *member) {
	m.deadline = c.now().Add(m.sessionTimeout)
}

// removeMember takes m out of g (a LeaveGroup or an expired session) and
// moves the group on: a live group rebalances, a rebalancing one may now
// complete. m's waiting calls answer UNKNOWN_MEMBER_ID.
func (c *Coordinator) removeMember(g *group, m *member) {
	m.answerJoin(joinResult{err: errUnknownMemberID, generation: -1})
	m.answerSync(syncResult{err: errUnknownMemberID})
	g.remove(m.id)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.maybePrepareRebalance(g)
	case statePreparingRebalance:
		c.checkJoin(g)
	}
}

func (c *Coordinator) maybePrepareRebalance(g *group) {
	if g.canRebalance() {
		c.prepareRebalance(g)
	}
}

// prepareRebalance starts a rebalance: members waiting in SyncGroup are
// sent back to JoinGroup, and the join phase gets its deadline (the
// initial delay for an Empty group, else the rebalance timeout).
func (c *Coordinator) prepareRebalance(g *group) {
	if g.state == stateCompletingRebalance {
		c.propagateAssignmentError(g, errRebalanceInProgress)
	}
	clear(g.pendingSync)
	g.syncDeadline = time.Time{}
	now := c.now()
	if g.state == stateEmpty {
		delay := c.cfg.InitialRebalanceDelay
		g.initial = true
		g.initialRemaining = max(g.rebalanceTimeout()-delay, 0)
		g.joinDeadline = now.Add(delay)
	} else {
		g.initial = false
		g.joinDeadline = now.Add(g.rebalanceTimeout())
	}
	g.state = statePreparingRebalance
	c.checkJoin(g)
}

// checkJoin completes the join phase when every member has joined (not
// during the initial delay, which only its deadline ends).
func (c *Coordinator) checkJoin(g *group) {
	if g.state == statePreparingRebalance && !g.initial && g.allJoined() {
		c.completeJoin(g)
	}
}

func (c *Coordinator) onJoinDeadline(g *group) {
	if g.initial && g.newMemberAdded && g.initialRemaining > 0 {
		g.newMemberAdded = false
		d := min(c.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining -= d
		g.joinDeadline = c.now().Add(d)
		return
	}
	c.completeJoin(g)
}

// completeJoin ends the join phase (onCompleteJoin): dynamic members that
// did not rejoin are dropped, the next generation starts, and every
// waiting JoinGroup call is answered (the leader gets the member list).
func (c *Coordinator) completeJoin(g *group) {
	for _, m := range slices.Clone(g.members) {
		if !m.awaitingJoin() && m.instanceID == nil {
			g.remove(m.id)
		}
	}
	g.initial = false
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Nobody rejoined: wait another rebalance timeout (at least a
		// second, so a zero timeout cannot spin) for the sessions of the
		// silent members to expire.
		g.joinDeadline = c.now().Add(max(g.rebalanceTimeout(), time.Second))
		return
	}
	g.generation++
	clear(g.pendingSync)
	g.joinDeadline = time.Time{}
	if len(g.members) == 0 {
		g.protocol = ""
		g.state = stateEmpty
		g.leader = ""
		prev := g.stored
		g.stored = g.snapshot(nil)
		if err := c.saveLocked(); err != nil {
			// Like Kafka, only the empty generation is not durable: an
			// older generation with no live members comes back.
			g.stored = prev
		}
		return
	}
	g.protocol = g.selectProtocol()
	g.state = stateCompletingRebalance
	res := joinResult{
		generation: g.generation, protocolType: g.protocolTypePtr(), protocol: g.protocolPtr(), leader: g.leader,
	}
	for _, m := range g.members {
		r := res
		r.memberID = m.id
		if g.isLeader(m.id) {
			r.members = g.memberList()
		}
		m.answerJoin(r)
		c.heartbeat(m)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	g.syncDeadline = c.now().Add(g.rebalanceTimeout())
}

// onSyncDeadline drops the members that did not send SyncGroup within
// the rebalance timeout after the join phase, and rebalances.
func (c *Coordinator) onSyncDeadline(g *group) {
	if g.state != stateCompletingRebalance && g.state != stateStable {
		return
	}
	if len(g.pendingSync) == 0 {
		return
	}
	for id := range g.pendingSync {
		if m := g.byID[id]; m != nil {
			m.answerJoin(joinResult{err: errUnknownMemberID, generation: -1})
			m.answerSync(syncResult{err: errUnknownMemberID})
		}
		g.remove(id)
	}
	c.prepareRebalance(g)
}

// propagateAssignmentError clears every assignment and answers the
// waiting SyncGroup calls with code.
func (c *Coordinator) propagateAssignmentError(g *group, code int16) {
	for _, m := range g.members {
		m.assignment = nil
		if m.answerSync(syncResult{err: code}) {
			c.heartbeat(m)
		}
	}
}
