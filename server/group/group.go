package group

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"slices"
	"time"
)

// state is a group's state in the classic protocol.
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

// String returns the name Kafka uses on the wire (ListGroups,
// DescribeGroups).
func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	}
	return "Dead"
}

// newMemberJoinTimeout bounds how long a member that has never completed
// a join may wait in a rebalance (Kafka's NewMemberJoinTimeoutMs): its
// client cannot heartbeat yet, so its session timeout does not apply.
const newMemberJoinTimeout = 5 * time.Minute

// maxMetadataSize is Kafka's default offset.metadata.max.bytes.
const maxMetadataSize = 4096

type protocol struct {
	name     string
	metadata []byte
}

// joinResult is what a JoinGroup call answers; it travels to a waiting
// call through member.joinWait.
type joinResult struct {
	err            int16
	memberID       string
	generation     int32
	protocolType   *string
	protocol       *string
	leader         string
	skipAssignment bool
	members        []joinMember
}

type joinMember struct {
	id         string
	instanceID *string
	metadata   []byte
}

// syncResult is what a SyncGroup call answers.
type syncResult struct {
	err          int16
	protocolType *string
	protocol     *string
	assignment   []byte
}

// memberInfo is what a classic member joined as: live in member, persisted
// in storedMember, copied whole between them.
type memberInfo struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
}

type member struct {
	memberInfo
	protocolType string
	protocols    []protocol
	assignment   []byte

	// isNew is set until the member's first join completes.
	isNew bool
	// deadline is when the member's session expires; zero when no
	// expiration is scheduled (the member waits in a rebalance).
	deadline time.Time
	// joinWait and syncWait are the channels (buffered, one value) of
	// the JoinGroup and SyncGroup calls waiting for an answer; nil when
	// none waits.
	joinWait chan joinResult
	syncWait chan syncResult
}

func (m *member) awaitingJoin() bool { return m.joinWait != nil }
func (m *member) awaitingSync() bool { return m.syncWait != nil }

// metadataFor returns the member's metadata for the named protocol.
func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// supports reports whether the member lists the named protocol.
func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.name == name {
			return true
		}
	}
	return false
}

// matches reports whether protocols are the ones the member joined with
// (same names, same metadata, same order).
func (m *member) matches(protocols []protocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b protocol) bool {
		return a.name == b.name && bytes.Equal(a.metadata, b.metadata)
	})
}

// vote returns the member's most preferred protocol among candidates.
func (m *member) vote(candidates map[string]bool) string {
	for _, p := range m.protocols {
		if candidates[p.name] {
			return p.name
		}
	}
	return ""
}

func (m *member) answerJoin(r joinResult) bool { return answer(&m.joinWait, r) }

func (m *member) answerSync(r syncResult) bool { return answer(&m.syncWait, r) }

// answer hands r to the request waiting on *wait, if any, which then no
// longer waits.
func answer[T any](wait *chan T, r T) bool {
	if *wait == nil {
		return false
	}
	*wait <- r
	*wait = nil
	return true
}

type topicPartition struct {
	topic     string
	partition int32
}

// offset is one committed (or staged) offset. seq orders commits: a
// transactional offset applied at commit time loses against a plain
// commit made after it was staged, as in Kafka.
type offset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMs    int64
	seq         uint64
}

// staged holds one producer's transactional offsets for a group until
// CompleteTxn.
type staged struct {
	epoch   int16
	offsets map[topicPartition]offset
}

// stored is the group metadata as last persisted (Kafka's GroupMetadata
// record): it is written at the end of each rebalance, not at every
// membership change, and a restart resumes from it.
type stored struct {
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      []storedMember
}

// storedMember is a member as persisted: its join facts, its metadata for
// the chosen protocol and its assignment.
type storedMember struct {
	memberInfo
	metadata   []byte
	assignment []byte
}

type group struct {
	id           string
	state        state
	protocolType string
	protocol     string
	generation   int32
	leader       string

	members []*member // in join order; the order picks a new leader
	byID    map[string]*member
	static  map[string]string // instance id -> member id
	// pending holds member ids handed out with MEMBER_ID_REQUIRED and
	// not yet joined, with their expiry.
	pending     map[string]time.Time
	pendingSync map[string]bool

	// Rebalance timing: joinDeadline while PreparingRebalance; initial
	// marks Kafka's initial delayed join (the group was Empty), which
	// only completes at its deadline, extended while new members come.
	joinDeadline     time.Time
	initial          bool
	initialRemaining time.Duration
	newMemberAdded   bool
	syncDeadline     time.Time

	offsets map[topicPartition]offset
	txn     map[int64]*staged // producer id -> staged offsets

	stored stored

	// consumer is set while the group is a KIP-848 consumer group
	// (consumer.go); the classic fields above are then unused but for
	// the offsets.
	consumer *cgroup

	// idleSince is when the group was first seen holding nothing.
	idleSince time.Time
}

func newGroup(id string) *group {
	return &group{
		id:          id,
		byID:        map[string]*member{},
		static:      map[string]string{},
		pending:     map[string]time.Time{},
		pendingSync: map[string]bool{},
		offsets:     map[topicPartition]offset{},
		txn:         map[int64]*staged{},
	}
}

// idle reports whether the group holds nothing: Empty, no members or
// member ids handed out, no offsets committed or staged.
func (g *group) idle() bool {
	return g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 && len(g.txn) == 0 &&
		(g.consumer == nil || len(g.consumer.members) == 0)
}

func (g *group) has(id string) bool { return g.byID[id] != nil }

func (g *group) isLeader(id string) bool { return g.leader != "" && g.leader == id }

func (g *group) canRebalance() bool {
	return g.state == stateStable || g.state == stateCompletingRebalance || g.state == stateEmpty
}

// add puts a member into the group (GroupMetadata.add): the first member
// sets the protocol type and, without a leader, leads.
func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members = append(g.members, m)
	g.byID[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	delete(g.pending, m.id)
}

// remove takes a member out of the group; a new leader is the oldest
// remaining member. The caller answers its waiting calls first.
func (g *group) remove(id string) {
	m := g.byID[id]
	if m != nil {
		delete(g.byID, id)
		g.members = slices.DeleteFunc(g.members, func(x *member) bool { return x == m })
		if m.instanceID != nil && g.static[*m.instanceID] == id {
			delete(g.static, *m.instanceID)
		}
	}
	if g.isLeader(id) {
		g.leader = ""
		if len(g.members) > 0 {
			g.leader = g.members[0].id
		}
	}
	delete(g.pending, id)
	delete(g.pendingSync, id)
}

// replaceStatic gives a static member a new member id (a restarted
// instance rejoining), fencing calls still waiting under the old id.
func (g *group) replaceStatic(instanceID, oldID, newID string) *member {
	m := g.byID[oldID]
	m.answerJoin(joinResult{err: errFencedInstanceID, memberID: oldID, generation: -1})
	m.answerSync(syncResult{err: errFencedInstanceID})
	delete(g.byID, oldID)
	m.id = newID
	g.byID[newID] = m
	if g.leader == oldID {
		g.leader = newID
	}
	g.static[instanceID] = newID
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	return m
}

// allJoined reports whether every member waits in JoinGroup and no
// member id handed out is still to come (hasAllMembersJoined).
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if !m.awaitingJoin() {
			return false
		}
	}
	return true
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// candidates returns the protocols every member supports.
func (g *group) candidates() map[string]bool {
	out := map[string]bool{}
	if len(g.members) == 0 {
		return out
	}
	for _, p := range g.members[0].protocols {
		all := true
		for _, m := range g.members[1:] {
			if !m.supports(p.name) {
				all = false
				break
			}
		}
		if all {
			out[p.name] = true
		}
	}
	return out
}

// supportsProtocols reports whether a member of the given type listing
// names may join: an Empty group takes any non-empty type and list; a
// live group wants its type and one protocol every member supports.
func (g *group) supportsProtocols(protocolType string, protocols []protocol) bool {
	if g.state == stateEmpty {
		return protocolType != "" && len(protocols) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol for the next generation: each member
// votes for its most preferred protocol that all members support; the
// most votes win, a tie going to the protocol voted for first.
func (g *group) selectProtocol() string {
	cand := g.candidates()
	votes := map[string]int{}
	var order []string
	for _, m := range g.members {
		v := m.vote(cand)
		if votes[v] == 0 {
			order = append(order, v)
		}
		votes[v]++
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// electJoinedLeader makes sure the leader is a member that rejoined
// (maybeElectNewJoinedLeader); false when no member rejoined.
func (g *group) electJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.byID[g.leader].awaitingJoin() {
		return true
	}
	for _, m := range g.members {
		if m.awaitingJoin() {
			g.leader = m.id
			return true
		}
	}
	return false
}

// memberList returns the members as the leader's JoinGroup response
// lists them, with their metadata for the selected protocol.
func (g *group) memberList() []joinMember {
	out := make([]joinMember, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, joinMember{id: m.id, instanceID: m.instanceID, metadata: m.metadataFor(g.protocol)})
	}
	return out
}

func (g *group) protocolTypePtr() *string {
	if g.protocolType == "" && len(g.members) == 0 {
		return nil
	}
	s := g.protocolType
	return &s
}

func (g *group) protocolPtr() *string {
	if g.protocol == "" {
		return nil
	}
	s := g.protocol
	return &s
}

// snapshot records the group's metadata as it is now, with the given
// assignment per member, as the state to persist.
func (g *group) snapshot(assignment map[string][]byte) stored {
	s := stored{protocolType: g.protocolType, protocol: g.protocol, generation: g.generation, leader: g.leader}
	if g.state == stateEmpty {
		s.leader = ""
		return s
	}
	for _, m := range g.members {
		s.members = append(s.members, storedMember{
			memberInfo: m.memberInfo, metadata: m.metadataFor(g.protocol), assignment: assignment[m.id],
		})
	}
	return s
}

// hasPendingTxn reports whether a transactional offset is staged for tp.
func (g *group) hasPendingTxn(tp topicPartition) bool {
	for _, s := range g.txn {
		if _, ok := s.offsets[tp]; ok {
			return true
		}
	}
	return false
}

// newMemberID returns prefix-<random UUID>, as Kafka forms member ids
// (client id or group instance id, then a UUID).
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
