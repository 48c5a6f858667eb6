package group

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topics is what the coordinator needs to know of the server's topics for
// KIP-848 consumer groups, whose members subscribe to topics by name (or
// regular expression) and are assigned partitions by topic id.
type Topics interface {
	// TopicByName returns the id and partition count of a topic.
	TopicByName(name string) (id [16]byte, partitions int32, ok bool)
	// TopicByID returns the name and partition count of a topic.
	TopicByID(id [16]byte) (name string, partitions int32, ok bool)
	// TopicNames returns the names of every topic.
	TopicNames() []string
}

// SetTopics gives the coordinator the server's topics. Until it is called
// consumer groups see no topic: their members are assigned nothing.
func (c *Coordinator) SetTopics(t Topics) {
	c.mu.Lock()
	c.topics = t
	c.mu.Unlock()
}

// Consumer-group defaults, Kafka's group.consumer.* settings.
const (
	consumerSessionTimeout    = 45 * time.Second // group.consumer.session.timeout.ms
	consumerHeartbeatInterval = 5 * time.Second  // group.consumer.heartbeat.interval.ms
	defaultAssignor           = "uniform"        // the first of group.consumer.assignors
)

// assignors are the server-side assignors a member may name, as Kafka's
// group.consumer.assignors default lists them.
var assignors = []string{"uniform", "range"}

// mstate is a KIP-848 member's reconciliation state (Kafka's MemberState).
type mstate int8

const (
	mStable               mstate = iota // owns its target, or waits for nothing
	mUnrevokedPartitions                // must revoke partitions before it moves on
	mUnreleasedPartitions               // waits for partitions other members still own
)

// tpid is a partition named by topic id.
type tpid struct {
	topic     [16]byte
	partition int32
}

// cgroup is a consumer group of the KIP-848 protocol (Kafka's
// ConsumerGroup). Its membership lives in memory only (package doc).
type cgroup struct {
	epoch       int32 // the group epoch: bumped by every change of membership, subscription or subscribed metadata
	assignEpoch int32 // the epoch the target assignment was computed at
	members     map[string]*cmember
	static      map[string]string // instance id -> member id
	target      map[string]map[tpid]bool
	// metadata is the subscribed topics' names, ids and partition
	// counts as last seen: a change bumps the group epoch.
	metadata string
}

// newCgroup returns an empty consumer group at epoch (a new group starts
// at 1, as Kafka's ModernGroup does; its first member makes it 2).
func newCgroup(epoch int32) *cgroup {
	return &cgroup{epoch: epoch, assignEpoch: epoch, members: map[string]*cmember{}, static: map[string]string{}, target: map[string]map[tpid]bool{}}
}

// cmember is a member of a consumer group (Kafka's ConsumerGroupMember).
type cmember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	epoch, prevEpoch int32
	state            mstate
	rebalanceTimeout time.Duration
	assignor         string // "" when the member names none
	topics           []string
	regex            string
	// assigned and revoking map partitions to the epoch they were
	// assigned at (Kafka's assignment epochs, which OffsetCommit checks).
	assigned map[tpid]int32
	revoking map[tpid]int32
	// deadline ends the member's session; revokeBy ends the time it has
	// to revoke partitions (its rebalance timeout).
	deadline, revokeBy time.Time
}

func (m *cmember) clone() *cmember {
	n := *m
	n.topics = slices.Clone(m.topics)
	n.assigned = maps.Clone(m.assigned)
	n.revoking = maps.Clone(m.revoking)
	return &n
}

func (m *cmember) reconciledTo(epoch int32) bool { return m.state == mStable && m.epoch == epoch }

// state is the group's state as Kafka names it (ConsumerGroupState).
func (g *cgroup) state() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.assignEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if !m.reconciledTo(g.assignEpoch) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// ownerEpoch returns the epoch of the member owning a partition (assigned
// or still to revoke), -1 when no member does.
func (g *cgroup) ownerEpoch(p tpid, except string) int32 {
	for id, m := range g.members {
		if id == except {
			continue
		}
		if _, ok := m.assigned[p]; ok {
			return m.epoch
		}
		if _, ok := m.revoking[p]; ok {
			return m.epoch
		}
	}
	return -1
}

// preferredAssignor is the assignor most members name, else the default.
func (g *cgroup) preferredAssignor() string {
	count := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			count[m.assignor]++
		}
	}
	best := ""
	for _, name := range assignors {
		if count[name] > count[best] {
			best = name
		}
	}
	if best == "" {
		return defaultAssignor
	}
	return best
}

// hbError is a heartbeat's error code and message.
type hbError struct {
	code int16
	msg  string
}

func hbErr(code int16, format string, args ...any) *hbError {
	return &hbError{code, fmt.Sprintf(format, args...)}
}

// checkHeartbeat validates a ConsumerGroupHeartbeat as Kafka's
// GroupCoordinatorService does before it reaches the group.
func checkHeartbeat(r *kmsg.ConsumerGroupHeartbeatRequest) *hbError {
	blank := func(s *string) bool { return s != nil && strings.TrimSpace(*s) == "" }
	if (r.Version >= 1 || r.MemberEpoch > 0 || r.MemberEpoch == -1) && strings.TrimSpace(r.MemberID) == "" {
		return hbErr(errInvalidRequest, "MemberId can't be empty.")
	}
	switch {
	case strings.TrimSpace(r.Group) == "":
		return hbErr(errInvalidRequest, "GroupId can't be empty.")
	case blank(r.InstanceID):
		return hbErr(errInvalidRequest, "InstanceId can't be empty.")
	case blank(r.RackID):
		return hbErr(errInvalidRequest, "RackId can't be empty.")
	}
	regex := r.SubscribedTopicRegex
	if r.Version < 1 {
		regex = nil
	}
	switch {
	case r.MemberEpoch == 0:
		if r.RebalanceTimeoutMillis == -1 {
			return hbErr(errInvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
		}
		if r.Topics == nil || len(r.Topics) > 0 {
			return hbErr(errInvalidRequest, "TopicPartitions must be empty when (re-)joining.")
		}
		if r.SubscribedTopicNames == nil && regex == nil {
			return hbErr(errInvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case r.MemberEpoch == -2:
		if r.InstanceID == nil {
			return hbErr(errInvalidRequest, "InstanceId can't be null.")
		}
	case r.MemberEpoch < -2:
		return hbErr(errInvalidRequest, "MemberEpoch is invalid.")
	}
	if regex != nil && *regex != "" {
		if _, err := regexp.Compile(*regex); err != nil {
			return hbErr(errInvalidRegularExpression, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *regex, err)
		}
	}
	if r.ServerAssignor != nil && !slices.Contains(assignors, *r.ServerAssignor) {
		return hbErr(errUnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %s.",
			*r.ServerAssignor, strings.Join(assignors, ", "))
	}
	return nil
}

func (c *Coordinator) handleConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, ci clientInfo) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(e *hbError) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = e.code
		if e.msg != "" {
			resp.ErrorMessage = &e.msg
		}
		return resp
	}
	if !supported(req) {
		return fail(&hbError{code: errUnsupportedVersion})
	}
	if e := checkHeartbeat(req); e != nil {
		return fail(e)
	}
	if !c.lock() {
		return fail(&hbError{code: errCoordinatorNotAvailable})
	}
	defer c.unlock()
	var e *hbError
	if req.MemberEpoch < 0 {
		e = c.consumerLeave(req, resp)
	} else {
		e = c.consumerHeartbeat(req, ci, resp)
	}
	if e != nil {
		return fail(e)
	}
	return resp
}

// consumerGroup returns the consumer group of id. join (a heartbeat at
// epoch 0) creates it, or converts a classic group without members (its
// offsets kept), and records that in the state file: after a restart the
// group is a consumer group again, without members (package doc).
func (c *Coordinator) consumerGroup(id string, join bool) (*group, *hbError) {
	g := c.groups[id]
	switch {
	case g == nil && !join:
		return nil, hbErr(errGroupIDNotFound, "Consumer group %s not found.", id)
	case g != nil && g.consumer != nil:
		return g, nil
	case g != nil && !join:
		return nil, hbErr(errGroupIDNotFound, "Group %s is not a consumer group.", id)
	case g != nil && (len(g.members) > 0 || len(g.pending) > 0 || g.state != stateEmpty):
		// Kafka converts a classic group of consumer-protocol members
		// (group.consumer.migration.policy); this does not.
		return nil, hbErr(errGroupIDNotFound, "Group %s is a classic group with members: it is not converted to a consumer group.", id)
	}
	created := g == nil
	if created {
		g = newGroup(id)
		c.groups[id] = g
	}
	prev := *g
	g.consumer = newCgroup(1)
	g.protocolType, g.protocol, g.leader, g.stored = "", "", "", stored{}
	if err := c.saveLocked(); err != nil {
		if created {
			delete(c.groups, id)
		} else {
			*g = prev
		}
		return nil, &hbError{code: errCoordinatorNotAvailable}
	}
	return g, nil
}

func (c *Coordinator) consumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, ci clientInfo, resp *kmsg.ConsumerGroupHeartbeatResponse) *hbError {
	join := req.MemberEpoch == 0
	g, e := c.consumerGroup(req.Group, join)
	if e != nil {
		return e
	}
	cg := g.consumer
	memberID := req.MemberID
	if memberID == "" {
		memberID = newUUID()
	}
	owned := ownedPartitions(req.Topics)
	var old *cmember
	var replaced string // the member id a returning static member replaces
	if req.InstanceID == nil {
		old = cg.members[memberID]
		if old == nil && !join {
			return hbErr(errUnknownMemberID, "Member %s is not a member of group %s.", memberID, req.Group)
		}
	} else {
		inst := *req.InstanceID
		prevID, known := cg.static[inst]
		switch {
		case join && !known:
		case join:
			prev := cg.members[prevID]
			if prev.epoch != -2 {
				return hbErr(errUnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, inst, prevID)
			}
			old = prev.clone()
			old.id, old.epoch, old.prevEpoch = memberID, 0, 0
			replaced = prevID
		case !known:
			return hbErr(errUnknownMemberID, "Instance id %s is unknown.", inst)
		case prevID != memberID:
			return hbErr(errFencedInstanceID, "Static member %s with instance id %s is fenced by existing member %s.", memberID, inst, prevID)
		default:
			old = cg.members[prevID]
		}
	}
	if old != nil && replaced == "" {
		if e := checkMemberEpoch(old, req.MemberEpoch, owned); e != nil {
			return e
		}
	}
	if old == nil {
		old = &cmember{id: memberID, prevEpoch: -1}
	}
	m := old.clone()
	if req.InstanceID != nil {
		s := *req.InstanceID
		m.instanceID = &s
	}
	if req.RackID != nil {
		s := *req.RackID
		m.rackID = &s
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.rebalanceTimeout = ms(req.RebalanceTimeoutMillis)
	}
	if req.ServerAssignor != nil {
		m.assignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		m.topics = slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))))
	}
	if req.Version >= 1 && req.SubscribedTopicRegex != nil {
		m.regex = *req.SubscribedTopicRegex
	}
	m.clientID, m.clientHost = ci.id, ci.host

	// From here the heartbeat succeeds: the member joins the group.
	if replaced != "" {
		// The returning instance takes over the old member's target.
		target := cg.target[replaced]
		c.removeConsumerMember(g, replaced)
		cg.target[m.id] = target
	}
	subChanged := !slices.Equal(old.topics, m.topics) || old.regex != m.regex
	bump := subChanged || old.assignor != m.assignor
	cg.members[m.id] = m
	if m.instanceID != nil {
		cg.static[*m.instanceID] = m.id
	}
	if md := c.subscriptionMetadata(cg); md != cg.metadata {
		cg.metadata = md
		bump = true
	}
	if bump {
		cg.epoch++
	}
	if cg.assignEpoch < cg.epoch {
		c.assign(cg)
	}
	prev := old
	if subChanged || !m.reconciledTo(cg.assignEpoch) {
		c.reconcile(cg, m, subChanged, owned)
	}
	now := c.now()
	m.deadline = now.Add(consumerSessionTimeout)
	if m.state == mUnrevokedPartitions {
		if m.revokeBy.IsZero() || prev.state != mUnrevokedPartitions || prev.epoch != m.epoch {
			m.revokeBy = now.Add(m.rebalanceTimeout)
		}
	} else {
		m.revokeBy = time.Time{}
	}
	resp.MemberID = &m.id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(consumerHeartbeatInterval / time.Millisecond)
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || (req.Version >= 1 && req.SubscribedTopicRegex != nil)) && req.Topics != nil
	if join || full || !maps.Equal(prev.assigned, m.assigned) {
		resp.Assignment = heartbeatAssignment(m.assigned)
	}
	return nil
}

// checkMemberEpoch is Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a
// member may heartbeat at its epoch, or at its previous one while it owns
// only partitions it is assigned (its last response was lost).
func checkMemberEpoch(m *cmember, epoch int32, owned map[tpid]bool) *hbError {
	switch {
	case epoch == 0:
		return nil
	case epoch > m.epoch:
		return hbErr(errFencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.epoch)
	case epoch < m.epoch:
		if epoch == m.prevEpoch && owned != nil && subset(owned, m.assigned) {
			return nil
		}
		return hbErr(errFencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.epoch)
	}
	return nil
}

func subset(owned map[tpid]bool, of map[tpid]int32) bool {
	for p := range owned {
		if _, ok := of[p]; !ok {
			return false
		}
	}
	return true
}

// ownedPartitions returns the partitions a heartbeat says the member
// owns; nil when it did not say.
func ownedPartitions(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) map[tpid]bool {
	if ts == nil {
		return nil
	}
	out := map[tpid]bool{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			out[tpid{t.TopicID, p}] = true
		}
	}
	return out
}

func heartbeatAssignment(assigned map[tpid]int32) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	for _, ps := range byTopic(slices.Collect(maps.Keys(assigned))) {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID = ps[0].topic
		for _, p := range ps {
			t.Partitions = append(t.Partitions, p.partition)
		}
		a.Topics = append(a.Topics, t)
	}
	if a.Topics == nil {
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	}
	return &a
}

// byTopic groups partitions by topic, topics and partitions in order.
func byTopic(ps []tpid) [][]tpid {
	sortTPIDs(ps)
	var out [][]tpid
	for i := 0; i < len(ps); {
		j := i + 1
		for j < len(ps) && ps[j].topic == ps[i].topic {
			j++
		}
		out = append(out, ps[i:j])
		i = j
	}
	return out
}

// subscribedTopics returns the ids and partition counts of the topics a
// member subscribes to (by name or regular expression) that exist.
func (c *Coordinator) subscribedTopics(m *cmember) map[[16]byte]int32 {
	out := map[[16]byte]int32{}
	if c.topics == nil {
		return out
	}
	for _, name := range c.memberTopicNames(m) {
		if id, n, ok := c.topics.TopicByName(name); ok {
			out[id] = n
		}
	}
	return out
}

// memberTopicNames returns the names a member subscribes to: its list and
// the topics its regular expression matches (whole names, as Java's
// Pattern.matches), sorted.
func (c *Coordinator) memberTopicNames(m *cmember) []string {
	names := slices.Clone(m.topics)
	if m.regex != "" && c.topics != nil {
		if re, err := regexp.Compile("^(?:" + m.regex + ")$"); err == nil {
			for _, t := range c.topics.TopicNames() {
				if re.MatchString(t) {
					names = append(names, t)
				}
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// subscriptionMetadata describes every subscribed topic (name, id,
// partition count): a change (a topic created, deleted or grown) bumps
// the group epoch, as Kafka's metadata hash does.
func (c *Coordinator) subscriptionMetadata(cg *cgroup) string {
	var names []string
	for _, m := range cg.members {
		names = append(names, c.memberTopicNames(m)...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var b strings.Builder
	for _, name := range names {
		if c.topics == nil {
			break
		}
		if id, n, ok := c.topics.TopicByName(name); ok {
			fmt.Fprintf(&b, "%q:%x:%d;", name, id, n)
		}
	}
	return b.String()
}

// assign computes the target assignment of every member at the group
// epoch with the preferred assignor.
func (c *Coordinator) assign(cg *cgroup) {
	var ms []assignee
	for id, m := range cg.members {
		ms = append(ms, assignee{id: id, instance: m.instanceID, topics: c.subscribedTopics(m)})
	}
	if cg.preferredAssignor() == "range" {
		cg.target = assignRange(ms)
	} else {
		cg.target = assignUniform(ms, cg.target)
	}
	cg.assignEpoch = cg.epoch
}

// reconcile moves a member towards its target assignment (Kafka's
// CurrentAssignmentBuilder): partitions it must give up are revoked
// first, at its current epoch; then it takes the new epoch with the
// partitions of its target that no other member still owns.
func (c *Coordinator) reconcile(cg *cgroup, m *cmember, subChanged bool, owned map[tpid]bool) {
	switch m.state {
	case mStable:
		if m.epoch != cg.assignEpoch {
			c.nextAssignment(cg, m, m.epoch, owned)
		} else if subChanged {
			c.dropUnsubscribed(m, owned)
		}
	case mUnrevokedPartitions:
		if ownsAny(owned, m.revoking) {
			if subChanged {
				c.dropUnsubscribed(m, owned)
			}
			return
		}
		c.nextAssignment(cg, m, m.epoch, owned)
	case mUnreleasedPartitions:
		c.nextAssignment(cg, m, m.epoch, owned)
	}
}

// ownsAny reports whether the member still owns any of ps; a heartbeat
// that does not list its partitions is taken as owning them.
func ownsAny(owned map[tpid]bool, ps map[tpid]int32) bool {
	if owned == nil {
		return true
	}
	for p := range owned {
		if _, ok := ps[p]; ok {
			return true
		}
	}
	return false
}

// dropUnsubscribed revokes the partitions of topics the member no longer
// subscribes to, keeping its epoch (Kafka's updateCurrentAssignment).
func (c *Coordinator) dropUnsubscribed(m *cmember, owned map[tpid]bool) {
	subs := c.subscribedTopics(m)
	assigned, revoking := maps.Clone(m.assigned), maps.Clone(m.revoking)
	if revoking == nil {
		revoking = map[tpid]int32{}
	}
	changed := false
	for p, e := range m.assigned {
		if _, ok := subs[p.topic]; !ok {
			delete(assigned, p)
			revoking[p] = e
			changed = true
		}
	}
	if !changed {
		return
	}
	m.prevEpoch = m.epoch
	m.assigned = assigned
	if len(revoking) > 0 && ownsAny(owned, revoking) {
		m.state, m.revoking = mUnrevokedPartitions, revoking
	}
}

// nextAssignment is Kafka's computeNextAssignment.
func (c *Coordinator) nextAssignment(cg *cgroup, m *cmember, epoch int32, owned map[tpid]bool) {
	subs := c.subscribedTopics(m)
	target := cg.target[m.id]
	assigned := map[tpid]int32{}
	revoking := map[tpid]int32{}
	var pending []tpid
	unreleased := false
	for p, e := range m.assigned {
		_, sub := subs[p.topic]
		if target[p] && sub {
			assigned[p] = e
		} else {
			revoking[p] = e
		}
	}
	for p := range target {
		if _, sub := subs[p.topic]; !sub {
			continue
		}
		if _, ok := assigned[p]; ok {
			continue
		}
		if _, mine := m.revoking[p]; !mine && cg.ownerEpoch(p, m.id) != -1 {
			unreleased = true
			continue
		}
		pending = append(pending, p)
	}
	if len(revoking) > 0 && ownsAny(owned, revoking) {
		m.prevEpoch, m.epoch = m.epoch, epoch
		m.state, m.assigned, m.revoking = mUnrevokedPartitions, assigned, revoking
		return
	}
	for _, p := range pending {
		assigned[p] = cg.assignEpoch
	}
	m.prevEpoch, m.epoch = m.epoch, cg.assignEpoch
	m.assigned, m.revoking = assigned, nil
	m.state = mStable
	if unreleased {
		m.state = mUnreleasedPartitions
	}
}

// consumerLeave handles a heartbeat at epoch -1 (leave) or -2 (a static
// member leaving for a while, its partitions kept for it).
func (c *Coordinator) consumerLeave(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *hbError {
	g := c.groups[req.Group]
	if g == nil || g.consumer == nil {
		return hbErr(errGroupIDNotFound, "Group %s not found.", req.Group)
	}
	cg := g.consumer
	id := req.MemberID
	if req.InstanceID != nil {
		cur, ok := cg.static[*req.InstanceID]
		switch {
		case !ok:
			return hbErr(errUnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		case cur != req.MemberID:
			return hbErr(errFencedInstanceID, "Static member %s with instance id %s is fenced by existing member %s.", req.MemberID, *req.InstanceID, cur)
		}
		if req.MemberEpoch == -2 {
			m := cg.members[cur]
			m.epoch, m.revoking, m.revokeBy = -2, nil, time.Time{}
			for p := range m.assigned {
				m.assigned[p] = 0
			}
			resp.MemberID, resp.MemberEpoch = &m.id, -2
			return nil
		}
	} else if cg.members[id] == nil {
		return hbErr(errUnknownMemberID, "Member %s is not a member of group %s.", id, req.Group)
	}
	c.fenceConsumerMember(g, id)
	resp.MemberID, resp.MemberEpoch = &req.MemberID, req.MemberEpoch
	return nil
}

// fenceConsumerMember removes a member (it left, or its session or
// rebalance timeout passed) and bumps the group epoch.
func (c *Coordinator) fenceConsumerMember(g *group, id string) {
	cg := g.consumer
	c.removeConsumerMember(g, id)
	cg.epoch++
	cg.metadata = c.subscriptionMetadata(cg)
	if len(cg.members) == 0 {
		cg.assignEpoch = cg.epoch
	}
}

func (c *Coordinator) removeConsumerMember(g *group, id string) {
	cg := g.consumer
	m := cg.members[id]
	if m == nil {
		return
	}
	delete(cg.members, id)
	delete(cg.target, id)
	if m.instanceID != nil && cg.static[*m.instanceID] == id {
		delete(cg.static, *m.instanceID)
	}
}

// expireConsumer fences one member whose session or rebalance timeout has
// passed; false when none has.
func (c *Coordinator) expireConsumer(g *group, now time.Time) bool {
	for id, m := range g.consumer.members {
		if due(m.deadline, now) || due(m.revokeBy, now) {
			c.fenceConsumerMember(g, id)
			return true
		}
	}
	return false
}

// consumerDeadlines calls f with every deadline of the group's members.
func (g *cgroup) deadlines(f func(time.Time)) {
	for _, m := range g.members {
		f(m.deadline)
		f(m.revokeBy)
	}
}

func (c *Coordinator) handleConsumerDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	top := c.enter(req)
	if top == errNone {
		defer c.unlock()
	}
	for _, id := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group, dg.ErrorCode = id, top
		if top != errNone {
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g := c.groups[id]
		if g == nil || g.consumer == nil {
			dg.ErrorCode = errGroupIDNotFound
			msg := fmt.Sprintf("Group %s is not a consumer group.", id)
			if g == nil {
				msg = fmt.Sprintf("Group %s not found.", id)
			}
			dg.ErrorMessage = &msg
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		cg := g.consumer
		dg.State, dg.Epoch, dg.AssignmentEpoch = cg.state(), cg.epoch, cg.assignEpoch
		dg.AssignorName = cg.preferredAssignor()
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOperations
		}
		for _, mid := range slices.Sorted(maps.Keys(cg.members)) {
			m := cg.members[mid]
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
			dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
			dm.SubscribedTopics = slices.Clone(m.topics)
			if dm.SubscribedTopics == nil {
				dm.SubscribedTopics = []string{}
			}
			dm.SubscribedTopicRegex = &m.regex
			owns := slices.Collect(maps.Keys(m.assigned))
			owns = slices.AppendSeq(owns, maps.Keys(m.revoking))
			dm.Assignment = c.describeAssignment(owns)
			dm.TargetAssignment = c.describeAssignment(slices.Collect(maps.Keys(cg.target[m.id])))
			dm.MemberType = 1
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) describeAssignment(ps []tpid) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, tps := range byTopic(ps) {
		t := kmsg.AssignmentTopicPartition{TopicID: tps[0].topic}
		if c.topics != nil {
			name, _, ok := c.topics.TopicByID(t.TopicID)
			if !ok {
				continue // a deleted topic is not described, as in Kafka
			}
			t.Topic = name
		}
		for _, p := range tps {
			t.Partitions = append(t.Partitions, p.partition)
		}
		a.TopicPartitions = append(a.TopicPartitions, t)
	}
	return a
}

// validateConsumerCommit checks an OffsetCommit or TxnOffsetCommit to a
// consumer group (Kafka's ConsumerGroup.validateOffsetCommit): it returns
// the request's error, or a check of each partition (nil: none needed).
func (c *Coordinator) validateConsumerCommit(cg *cgroup, memberID string, epoch int32, txn bool, version int16) (int16, func(topic string, partition int32) int16) {
	if epoch < 0 && len(cg.members) == 0 {
		return errNone, nil
	}
	if txn && epoch == -1 && memberID == "" {
		return errNone, nil
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return errUnknownMemberID, nil
	case !txn && version < 9:
		return errUnsupportedVersion, nil
	case epoch == m.epoch:
		return errNone, nil
	case epoch > m.epoch:
		return errStaleMemberEpoch, nil
	}
	return errNone, func(topic string, partition int32) int16 {
		var id [16]byte
		if c.topics != nil {
			id, _, _ = c.topics.TopicByName(topic)
		}
		p := tpid{id, partition}
		e, ok := m.assigned[p]
		if !ok {
			e, ok = m.revoking[p]
		}
		if !ok || epoch < e {
			return errStaleMemberEpoch
		}
		return errNone
	}
}

// consumerOf returns the consumer group of id, nil when id is not one.
func (c *Coordinator) consumerOf(id string) *cgroup {
	if g := c.groups[id]; g != nil {
		return g.consumer
	}
	return nil
}

// validateConsumerFetch checks the member fields of an OffsetFetch (v9+)
// to a consumer group.
func validateConsumerFetch(cg *cgroup, memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return errNone
	}
	id := ""
	if memberID != nil {
		id = *memberID
	}
	m := cg.members[id]
	switch {
	case m == nil:
		return errUnknownMemberID
	case m.epoch != epoch:
		return errStaleMemberEpoch
	}
	return errNone
}

// newUUID returns a random UUID in Kafka's form (URL-safe base64 without
// padding), as the coordinator makes member ids for
// ConsumerGroupHeartbeat v0.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(b[:])
}
