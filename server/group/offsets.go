package group

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleOffsetCommit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	codes := newCommitCodes(req.Topics, func(t kmsg.OffsetCommitRequestTopic) int { return len(t.Partitions) })
	switch {
	case !supported(req):
		codes.all(errUnsupportedVersion)
	case !c.lock():
		codes.all(errCoordinatorNotAvailable)
	default:
		c.offsetCommit(req, codes)
		c.unlock()
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetCommit runs OffsetCommit under the lock (handleCommitOffsets,
// doCommitOffsets).
func (c *Coordinator) offsetCommit(req *kmsg.OffsetCommitRequest, codes commitCodes) {
	generation, memberID := req.Generation, req.MemberID
	if req.Version == 0 {
		generation, memberID = -1, ""
	}
	inst := instanceID(req.InstanceID, req.Version, 7)
	g := c.groups[req.Group]
	if g == nil {
		if generation >= 0 {
			// A commit from an older generation of a group this
			// coordinator no longer knows.
			if req.Version >= 9 {
				codes.all(errGroupIDNotFound)
			} else {
				codes.all(errIllegalGeneration)
			}
			return
		}
		g = newGroup(req.Group)
		c.groups[req.Group] = g
	}
	if g.consumer != nil {
		if !consumerCommitValid(c, g.consumer, memberID, generation, false, req.Version, req.Topics, func(t kmsg.OffsetCommitRequestTopic) (string, []int32) {
			var ps []int32
			for _, p := range t.Partitions {
				ps = append(ps, p.Partition)
			}
			return t.Topic, ps
		}, codes.all) {
			return
		}
	} else if code := c.validateCommit(g, generation, memberID, inst, false); code != errNone {
		codes.all(code)
		return
	}
	switch g.state {
	case stateCompletingRebalance:
		// The member has its new generation but not its assignment yet.
		codes.all(errRebalanceInProgress)
		return
	case stateStable, statePreparingRebalance:
		if m := g.byID[memberID]; m != nil {
			c.heartbeat(m)
		}
	}
	type change struct {
		tp      topicPartition
		old     offset
		existed bool
	}
	var changes []change
	now := c.now().UnixMilli()
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			o, code := c.newOffset(p.Offset, p.LeaderEpoch, req.Version >= 6, p.Metadata, now)
			if code != errNone {
				codes[i][j] = code
				continue
			}
			tp := topicPartition{t.Topic, p.Partition}
			old, existed := g.offsets[tp]
			changes = append(changes, change{tp, old, existed})
			g.offsets[tp] = o
		}
	}
	if len(changes) == 0 {
		return
	}
	if err := c.saveLocked(); err != nil {
		for k := len(changes) - 1; k >= 0; k-- {
			ch := changes[k]
			if ch.existed {
				g.offsets[ch.tp] = ch.old
			} else {
				delete(g.offsets, ch.tp)
			}
		}
		codes.fillUnset(errCoordinatorNotAvailable)
	}
}

// commitCodes holds a commit request's error code per partition, in
// the request's order.
type commitCodes [][]int16

func newCommitCodes[T any](topics []T, partitions func(T) int) commitCodes {
	codes := make(commitCodes, len(topics))
	for i, t := range topics {
		codes[i] = make([]int16, partitions(t))
	}
	return codes
}

// all answers every partition with code.
func (codes commitCodes) all(code int16) {
	for _, cs := range codes {
		for j := range cs {
			cs[j] = code
		}
	}
}

// fillUnset answers with code every partition that has no error yet.
func (codes commitCodes) fillUnset(code int16) {
	for _, cs := range codes {
		for j := range cs {
			if cs[j] == errNone {
				cs[j] = code
			}
		}
	}
}

// newOffset is one committed or staged offset as kept: no metadata kept
// as "", the leader epoch -1 when the request's version carries none, the
// next commit sequence; errOffsetMetadataTooLarge past Kafka's limit.
func (c *Coordinator) newOffset(off int64, epoch int32, hasEpoch bool, metadata *string, nowMs int64) (offset, int16) {
	md := ""
	if metadata != nil {
		md = *metadata
	}
	if len(md) > maxMetadataSize {
		return offset{}, errOffsetMetadataTooLarge
	}
	if !hasEpoch {
		epoch = -1
	}
	c.seq++
	return offset{offset: off, leaderEpoch: epoch, metadata: md, commitMs: nowMs, seq: c.seq}, errNone
}

// validateCommit checks who may commit (validateOffsetCommit): anyone to
// an Empty group with generation -1; a member of the current generation;
// for a transactional commit without member fields (TxnOffsetCommit
// before v3), anyone.
func (c *Coordinator) validateCommit(g *group, generation int32, memberID string, inst *string, txn bool) int16 {
	switch {
	case g.state == stateDead:
		return errCoordinatorNotAvailable
	case generation < 0 && g.state == stateEmpty:
		return errNone
	case generation >= 0 || memberID != "" || inst != nil:
		if code := g.validateMember(memberID, inst); code != errNone {
			return code
		}
		if generation != g.generation {
			return errIllegalGeneration
		}
		return errNone
	case !txn && g.state != stateEmpty:
		return errUnknownMemberID
	}
	return errNone
}

// consumerCommitValid checks a commit to a consumer group, the whole
// request and each of its partitions, answering every partition with the
// first error (in Kafka the first failing partition fails the request);
// false when it did.
func consumerCommitValid[T any](c *Coordinator, cg *cgroup, memberID string, epoch int32, txn bool, version int16,
	topics []T, parts func(T) (string, []int32), all func(int16)) bool {
	code, check := c.validateConsumerCommit(cg, memberID, epoch, txn, version)
	if code == errNone && check != nil {
		for _, t := range topics {
			name, ps := parts(t)
			for _, p := range ps {
				if code = check(name, p); code != errNone {
					break
				}
			}
			if code != errNone {
				break
			}
		}
	}
	if code != errNone {
		all(code)
		return false
	}
	return true
}

type fetchPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    string
	err         int16
}

type fetchTopic struct {
	topic      string
	partitions []fetchPartition
}

type fetchTopicReq struct {
	topic      string
	partitions []int32
}

// fetchOffsets answers one group's part of an OffsetFetch: the requested
// partitions (all the group has, when topics is nil), -1 for those
// without a committed offset. requireStable turns a partition with a
// transactional offset still staged into UNSTABLE_OFFSET_COMMIT.
func (c *Coordinator) fetchOffsets(groupID string, topics []fetchTopicReq, all, requireStable bool) []fetchTopic {
	g := c.groups[groupID]
	one := func(tp topicPartition) fetchPartition {
		fp := fetchPartition{partition: tp.partition, offset: -1, leaderEpoch: -1}
		if g == nil {
			return fp
		}
		if requireStable && g.hasPendingTxn(tp) {
			fp.err = errUnstableOffsetCommit
			return fp
		}
		if o, ok := g.offsets[tp]; ok {
			fp.offset, fp.leaderEpoch, fp.metadata = o.offset, o.leaderEpoch, o.metadata
		}
		return fp
	}
	var out []fetchTopic
	if all {
		if g == nil {
			return nil
		}
		tps := make([]topicPartition, 0, len(g.offsets))
		for tp := range g.offsets {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, func(a, b topicPartition) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		})
		for _, tp := range tps {
			if len(out) == 0 || out[len(out)-1].topic != tp.topic {
				out = append(out, fetchTopic{topic: tp.topic})
			}
			out[len(out)-1].partitions = append(out[len(out)-1].partitions, one(tp))
		}
		return out
	}
	for _, t := range topics {
		ft := fetchTopic{topic: t.topic}
		for _, p := range t.partitions {
			ft.partitions = append(ft.partitions, one(topicPartition{t.topic, p}))
		}
		out = append(out, ft)
	}
	return out
}

func (c *Coordinator) handleOffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	top := c.enter(req) // errNone: locked, unlocked below
	stable := req.Version >= 7 && req.RequireStable
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			g.ErrorCode = top
			if cg := c.consumerOf(rg.Group); top == errNone && req.Version >= 9 && cg != nil {
				g.ErrorCode = validateConsumerFetch(cg, rg.MemberID, rg.MemberEpoch)
			}
			if g.ErrorCode == errNone {
				var ts []fetchTopicReq
				for _, t := range rg.Topics {
					ts = append(ts, fetchTopicReq{t.Topic, t.Partitions})
				}
				for _, ft := range c.fetchOffsets(rg.Group, ts, rg.Topics == nil, stable) {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic = ft.topic
					for _, fp := range ft.partitions {
						rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = fp.partition, fp.offset, fp.leaderEpoch, fp.err
						rp.Metadata = &fp.metadata
						rt.Partitions = append(rt.Partitions, rp)
					}
					g.Topics = append(g.Topics, rt)
				}
			}
			resp.Groups = append(resp.Groups, g)
		}
	} else {
		var ts []fetchTopicReq
		for _, t := range req.Topics {
			ts = append(ts, fetchTopicReq{t.Topic, t.Partitions})
		}
		// Before v2 the topics cannot be null: nil is an empty list.
		allTopics := req.Topics == nil && req.Version >= 2
		var fts []fetchTopic
		if top == errNone {
			fts = c.fetchOffsets(req.Group, ts, allTopics, stable)
		} else if req.Version < 2 {
			// No top-level error field: every partition carries it.
			for _, t := range ts {
				ft := fetchTopic{topic: t.topic}
				for _, p := range t.partitions {
					ft.partitions = append(ft.partitions, fetchPartition{partition: p, offset: -1, leaderEpoch: -1, err: top})
				}
				fts = append(fts, ft)
			}
		}
		resp.ErrorCode = top
		for _, ft := range fts {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = ft.topic
			for _, fp := range ft.partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = fp.partition, fp.offset, fp.leaderEpoch, fp.err
				rp.Metadata = &fp.metadata
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if top == errNone {
		c.unlock()
	}
	return resp
}

// CommitTxnOffsets stages the offsets of a transactional producer
// (TxnOffsetCommit): they are invisible to OffsetFetch (which answers
// UNSTABLE_OFFSET_COMMIT for them when asked for stable offsets) until
// CompleteTxn commits them, and durable when this returns without error.
// The caller (the transaction coordinator) has checked the producer id,
// epoch and that the group was added to the transaction; this checks the
// group membership fields (v3+) as Kafka does, and that the epoch is not
// older than one already staged.
func (c *Coordinator) CommitTxnOffsets(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	codes := newCommitCodes(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) int { return len(t.Partitions) })
	switch {
	case !supported(req):
		codes.all(errUnsupportedVersion)
	case req.Group == "":
		codes.all(errInvalidGroupID)
	case !c.lock():
		codes.all(errCoordinatorNotAvailable)
	default:
		c.txnOffsetCommit(req, codes)
		c.unlock()
	}
	for i, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *Coordinator) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, codes commitCodes) {
	generation, memberID, inst := int32(-1), "", (*string)(nil)
	if req.Version >= 3 {
		generation, memberID, inst = req.Generation, req.MemberID, instanceID(req.InstanceID, req.Version, 3)
	}
	g := c.groups[req.Group]
	if g == nil {
		g = newGroup(req.Group)
		c.groups[req.Group] = g
	}
	if g.consumer != nil {
		// Before v6 a stale member epoch is told as ILLEGAL_GENERATION.
		txnAll := func(code int16) {
			if code == errStaleMemberEpoch {
				code = errIllegalGeneration
			}
			codes.all(code)
		}
		if !consumerCommitValid(c, g.consumer, memberID, generation, true, req.Version, req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) (string, []int32) {
			var ps []int32
			for _, p := range t.Partitions {
				ps = append(ps, p.Partition)
			}
			return t.Topic, ps
		}, txnAll) {
			return
		}
	} else if code := c.validateCommit(g, generation, memberID, inst, true); code != errNone {
		codes.all(code)
		return
	}
	s := g.txn[req.ProducerID]
	if s != nil && req.ProducerEpoch < s.epoch {
		codes.all(errInvalidProducerEpoch)
		return
	}
	var prev *staged
	if s != nil {
		cp := &staged{epoch: s.epoch, offsets: make(map[topicPartition]offset, len(s.offsets))}
		for k, v := range s.offsets {
			cp.offsets[k] = v
		}
		prev = cp
	}
	if s == nil || req.ProducerEpoch > s.epoch {
		// A newer epoch: what an older one staged was abandoned.
		s = &staged{epoch: req.ProducerEpoch, offsets: map[topicPartition]offset{}}
	}
	now := c.now().UnixMilli()
	n := 0
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			o, code := c.newOffset(p.Offset, p.LeaderEpoch, req.Version >= 2, p.Metadata, now)
			if code != errNone {
				codes[i][j] = code
				continue
			}
			s.offsets[topicPartition{t.Topic, p.Partition}] = o
			n++
		}
	}
	if n == 0 {
		return
	}
	g.txn[req.ProducerID] = s
	if err := c.saveLocked(); err != nil {
		if prev == nil {
			delete(g.txn, req.ProducerID)
		} else {
			g.txn[req.ProducerID] = prev
		}
		codes.fillUnset(errCoordinatorNotAvailable)
	}
}

// CompleteTxn ends a producer's transaction for the offsets it staged in
// every group: commit makes them the committed offsets (a plain commit
// made after an offset was staged wins over it, as in Kafka), abort drops
// them. Offsets staged under an epoch above producerEpoch stay. When it
// returns nil the outcome is durable; on error nothing changed and the
// call may be retried.
func (c *Coordinator) CompleteTxn(producerID int64, producerEpoch int16, commit bool) error {
	if !c.lock() {
		return ErrClosed
	}
	defer c.unlock()
	type undo struct {
		g      *group
		s      *staged
		before map[topicPartition]offset
		had    map[topicPartition]bool
	}
	var undos []undo
	for _, g := range c.groups {
		s := g.txn[producerID]
		if s == nil || s.epoch > producerEpoch {
			continue
		}
		u := undo{g: g, s: s, before: map[topicPartition]offset{}, had: map[topicPartition]bool{}}
		delete(g.txn, producerID)
		if commit {
			for tp, o := range s.offsets {
				cur, ok := g.offsets[tp]
				if ok && cur.seq > o.seq {
					continue
				}
				u.before[tp], u.had[tp] = cur, ok
				g.offsets[tp] = o
			}
		}
		undos = append(undos, u)
	}
	if len(undos) == 0 {
		return nil
	}
	if err := c.saveLocked(); err != nil {
		for _, u := range undos {
			u.g.txn[producerID] = u.s
			for tp, o := range u.before {
				if u.had[tp] {
					u.g.offsets[tp] = o
				} else {
					delete(u.g.offsets, tp)
				}
			}
		}
		return err
	}
	return nil
}
