package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StartMirror starts mirroring req.Topics from req.Source: it reads the
// source's metadata (cluster id, topic ids, partitions, leader epochs),
// creates missing local topics with the source's topic id, records the
// link in the state file, runs LOG_ALIGNMENT on every partition and
// starts fetching. It returns the partitions' status; a partition that
// could not start is named in the error (the others mirror).
func (s *Server) StartMirror(ctx context.Context, req MirrorStartRequest) ([]MirrorPartitionStatus, error) {
	if req.Source == "" {
		return nil, mirrorUsage("no source address")
	}
	if len(req.Topics) == 0 {
		return nil, mirrorUsage("no topics")
	}
	for _, a := range []struct{ what, addr string }{{"source", req.Source}, {"source admin", req.SourceAdmin}} {
		if a.addr == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a.addr)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n <= 0 || n > 65535 {
			return nil, mirrorUsage("%s %q: want HOST:PORT", a.what, a.addr)
		}
	}
	for _, t := range req.Topics {
		if !validTopicName(t) {
			return nil, mirrorUsage("invalid topic name %q", t)
		}
	}
	if strings.ContainsAny(req.Name, " \t\r\n") {
		return nil, mirrorUsage("mirror name %q has white space", req.Name)
	}
	// The start waits for the source under mmu, which Close needs too:
	// it ends with the server whatever the caller's context.
	ctx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	defer context.AfterFunc(s.ctx, cancelStart)()
	s.mmu.Lock()
	defer s.mmu.Unlock()
	if s.mirrorsClosed {
		return nil, partlog.ErrClosed
	}

	cl, err := newMirrorClient(req.Source)
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			cl.Close()
		}
	}()
	mreq := kmsg.NewPtrMetadataRequest()
	for _, t := range req.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		mreq.Topics = append(mreq.Topics, rt)
	}
	mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	mresp, err := mreq.RequestWith(mctx, cl)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: metadata of source %s: %w", errSourceUnreachable, req.Source, err)
	}
	srcCluster := ""
	if mresp.ClusterID != nil {
		srcCluster = *mresp.ClusterID
	}
	if srcCluster == s.meta.clusterID() {
		return nil, mirrorUsage("source %s is this cluster (%s)", req.Source, srcCluster)
	}
	name := req.Name
	if name == "" {
		name = "from-" + srcCluster
	}
	type srcTopic struct {
		id    [16]byte
		parts []kmsg.MetadataResponseTopicPartition
	}
	topics := map[string]srcTopic{}
	for _, t := range mresp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("partlog/server: source topic %s: %w", *t.Topic, kerr.ErrorForCode(t.ErrorCode))
		}
		ps := slices.Clone(t.Partitions)
		sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
		topics[*t.Topic] = srcTopic{id: t.TopicID, parts: ps}
	}
	for _, t := range req.Topics {
		st, ok := topics[t]
		if !ok || len(st.parts) == 0 {
			return nil, fmt.Errorf("partlog/server: source %s has no topic %s", req.Source, t)
		}
		for i, p := range st.parts {
			if p.Partition != int32(i) {
				return nil, fmt.Errorf("partlog/server: source topic %s lists partition %d at place %d", t, p.Partition, i)
			}
		}
	}

	link := s.links[name]
	if link != nil && (link.source != req.Source || link.sourceCluster != srcCluster) {
		return nil, mirrorUsage("mirror %s already fetches from %s (cluster %s)", name, link.source, link.sourceCluster)
	}
	// The link is in the state file before any partition leaves NONE, so
	// a restart knows where a half-started partition fetches from.
	st := mirrorLinkState{Source: req.Source, SourceAdmin: req.SourceAdmin, SourceClusterID: srcCluster}
	prevAdmin, hadLink := "", link != nil
	if link != nil {
		s.meta.view(func(m *metaState) {
			if ms := m.Mirrors[name]; ms != nil {
				prevAdmin = ms.SourceAdmin
			}
		})
		st.Topics = slices.Clone(link.topics)
		if st.SourceAdmin == "" {
			// More topics without --source-admin keep the link's: the
			// older topics' restart lookups still need it.
			st.SourceAdmin = prevAdmin
		}
	}
	for _, t := range req.Topics {
		if !slices.Contains(st.Topics, t) {
			st.Topics = append(st.Topics, t)
		}
	}
	if err := s.meta.update(func(m *metaState) {
		if m.Mirrors == nil {
			m.Mirrors = map[string]*mirrorLinkState{}
		}
		c := st
		m.Mirrors[name] = &c
	}); err != nil {
		return nil, err
	}
	if link == nil {
		link = s.newLink(name, st, cl)
		keep = true
	} else {
		link.topics = st.Topics
	}

	var errs []error
	var started []partlog.TopicPartition
	truncated := map[partlog.TopicPartition]int64{}
	for _, t := range req.Topics {
		src := topics[t]
		created, err := s.ensureMirrorTopic(ctx, cl, t, src.id, int32(len(src.parts)))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
			continue
		}
		n := len(started)
		for _, sp := range src.parts {
			tp := partlog.TopicPartition{Topic: t, Partition: sp.Partition}
			cut, err := s.startPartition(ctx, link, req, tp, src.id, sp)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", tp, err))
				continue
			}
			if cut > 0 {
				truncated[tp] = cut
			}
			started = append(started, tp)
		}
		if created && len(started) == n {
			// None started: the topic this start made goes again, so a
			// failed start leaves the destination as it found it.
			if err := s.deleteTopic(t); err != nil {
				errs = append(errs, fmt.Errorf("%s: remove the topic the start created: %w", t, err))
			}
		}
	}
	// A topic none of whose partitions started (refused, or its source
	// admin unreachable) leaves the link again, and a link left without
	// topics ends: nothing would fetch it, yet it would come back at every
	// Open and keep its source address for the name.
	if hadLink && len(started) == 0 && prevAdmin != st.SourceAdmin {
		// Nothing started: the running topics keep their admin address
		// (a wrong --source-admin must not replace the one their
		// restart lookups use).
		if err := s.meta.update(func(m *metaState) {
			if ms := m.Mirrors[name]; ms != nil {
				ms.SourceAdmin = prevAdmin
			}
		}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.pruneLinksLocked(req.Topics); err != nil {
		errs = append(errs, err)
	}
	link.wake()
	status := s.mirrorStatus(func(tp partlog.TopicPartition) bool { return slices.Contains(started, tp) })
	for i := range status {
		status[i].Truncated = truncated[partlog.TopicPartition{Topic: status[i].Topic, Partition: status[i].Partition}]
	}
	return status, errors.Join(errs...)
}

// startPartition runs LOG_ALIGNMENT on one partition of a start and adds
// it to the link's fetches; it returns how many offsets the alignment cut
// from the log end (logged too). A partition this link already mirrors (a
// start run again, to pick up the partitions a first one could not start)
// is left as it is, and is no error. A partition holding records of its
// own is refused unless req.AllowTruncation: the start would cut them.
func (s *Server) startPartition(ctx context.Context, link *mirrorLink, req MirrorStartRequest, tp partlog.TopicPartition,
	srcID [16]byte, sp kmsg.MetadataResponseTopicPartition) (int64, error) {
	p, code := s.partitionFor(tp.Topic, tp.Partition)
	if code != errNone {
		return 0, kerr.ErrorForCode(code)
	}
	c := p.mirror.Checkpoint()
	if c.MirrorName == link.name && c.SourceClusterID == link.sourceCluster &&
		(c.State == mirror.StateMirroring || c.State == mirror.StateEpochFencing) {
		return 0, nil
	}
	admin := req.SourceAdmin
	sreq := mirror.StartRequest{MirrorName: link.name, SourceClusterID: link.sourceCluster, TopicID: mirror.TopicID(srcID),
		Partition: tp.Partition, SourceLeaderEpoch: sp.LeaderEpoch}
	if admin != "" {
		lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		pos, err := lookupPosition(lctx, admin, s.meta.clusterID(), tp.Topic, mirror.TopicID(srcID), tp.Partition)
		if err == nil {
			sreq.SourceMirrorsFromUs, err = mirrorsFrom(lctx, admin, s.meta.clusterID(), tp.Topic, tp.Partition)
		}
		cancel()
		if err != nil {
			return 0, fmt.Errorf("source admin %s: %w", admin, err)
		}
		sreq.SourcePosition = pos
	}
	// Records of this cluster's own (not mirrored from this source)
	// that the alignment would cut need the caller's consent.
	fromSource := c.SourceClusterID == link.sourceCluster && c.State != mirror.StateNone && c.State != mirror.StateStopped
	if !req.AllowTruncation && !fromSource && c.State != mirror.StateLogAlignment {
		target, err := p.mirror.AlignmentTarget(sreq.SourcePosition)
		if err != nil {
			return 0, err
		}
		if end := p.log.LogEndOffset(); target < end && p.log.LogStartOffset() < end {
			return 0, fmt.Errorf("%w: the start would truncate offsets %d to %d, which this cluster holds; pass allow_truncation (partlog mirror start --allow-truncation) to discard them",
				errWouldTruncate, target, end-1)
		}
	}
	if !p.mirror.State().ReadOnly() {
		if err := s.txns.endOnPartition(tp); err != nil {
			return 0, fmt.Errorf("end this cluster's transactions first: %w", err)
		}
	}
	before := p.log.LogEndOffset()
	sess, err := p.mirror.Start(sreq)
	s.followMirrorEpoch(p)
	cut := max(0, before-p.log.LogEndOffset())
	if cut > 0 {
		s.logf("mirror %s: %s truncated from offset %d to %d to mirror from cluster %s: %d offsets discarded",
			link.name, tp, before, p.log.LogEndOffset(), link.sourceCluster, cut)
	}
	if err != nil {
		return cut, err
	}
	link.add(p, sess, srcID, sp.Leader)
	return cut, nil
}

func newMirrorClient(source string) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(source), kgo.ClientID("partlog-mirror"),
		kgo.DialTimeout(5*time.Second), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("partlog/server: mirror client for %s: %w", source, err)
	}
	return cl, nil
}

// ensureMirrorTopic creates the topic with the source's id and the
// configs the source set on it (sourceTopicConfigs), or the partitions it
// lacks; created says the topic is new. An existing topic keeps its own id
// and configs: an operator who created it first chose them.
func (s *Server) ensureMirrorTopic(ctx context.Context, cl *kgo.Client, name string, id [16]byte, count int32) (created bool, err error) {
	s.cmu.Lock()
	t := s.topicByName(name)
	s.cmu.Unlock()
	var configs map[string]string
	if t == nil {
		// Asked before cmu is taken again: a slow source must not hold
		// up the topic requests of this server's clients.
		if configs, err = s.sourceTopicConfigs(ctx, cl, name); err != nil {
			return false, err
		}
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if t = s.topicByName(name); t == nil {
		tid := partlog.TopicID(id)
		if tid.IsZero() {
			if tid, err = newTopicID(); err != nil {
				return false, err
			}
		}
		return true, s.createTopicLocked(name, tid, 0, count, configs)
	}
	s.tmu.RLock()
	have := int32(len(t.parts))
	tid := t.id
	s.tmu.RUnlock()
	if have < count {
		return false, s.createTopicLocked(name, tid, have, count, s.meta.topicConfigs(name))
	}
	return false, nil
}

// sourceTopicConfigs asks the source (DescribeConfigs) for the configs set
// on a topic (DYNAMIC_TOPIC_CONFIG), so that a topic the mirror creates
// rolls, retains and bounds its batches as the source's does. Configs
// partlog does not implement (remote.storage.enable, local.retention.ms…)
// are logged and left out; a source that cannot answer (an older
// partlog) gives none. A config whose value partlog refuses
// (cleanup.policy=compact) fails the topic's start: mirroring it without
// compaction would keep what the source deletes.
func (s *Server) sourceTopicConfigs(ctx context.Context, cl *kgo.Client, name string) (map[string]string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, name
	req.Resources = append(req.Resources, rr)
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	resp, err := req.RequestWith(dctx, cl)
	cancel()
	if err == nil && len(resp.Resources) == 1 && resp.Resources[0].ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil || len(resp.Resources) != 1 {
		s.logf("mirror: topic %s: the source's configs are not known (%v); the topic gets this server's defaults", name, err)
		return nil, nil
	}
	configs := map[string]string{}
	var skipped []string
	for _, c := range resp.Resources[0].Configs {
		own := c.Source == kmsg.ConfigSourceDynamicTopicConfig || resp.Version == 0 && !c.IsDefault && !c.ReadOnly
		if !own || c.Value == nil {
			continue
		}
		if _, ok := lookupTopicConfig(c.Name); !ok {
			skipped = append(skipped, c.Name+"="+*c.Value)
			continue
		}
		configs[c.Name] = *c.Value
	}
	if len(skipped) > 0 {
		sort.Strings(skipped)
		s.logf("mirror: topic %s: source configs partlog does not implement, not copied: %s", name, strings.Join(skipped, ", "))
	}
	if _, err := topicOptions(partlog.Options{}, configs); err != nil {
		return nil, fmt.Errorf("source topic config: %w", err)
	}
	return configs, nil
}

func (s *Server) newLink(name string, st mirrorLinkState, cl *kgo.Client) *mirrorLink {
	ctx, cancel := context.WithCancel(s.ctx)
	l := &mirrorLink{name: name, source: st.Source, sourceCluster: st.SourceClusterID, topics: slices.Clone(st.Topics),
		cl: cl, host: s, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1),
		parts: map[partlog.TopicPartition]*mirrorPart{}}
	s.lmu.Lock()
	s.links[name] = l
	s.lmu.Unlock()
	go l.run(ctx)
	return l
}

// resumeMirrors starts, at Open, the links of the state file for the
// partitions that are MIRRORING (a crash or restart while mirroring).
func (s *Server) resumeMirrors() error {
	var links map[string]mirrorLinkState
	s.meta.view(func(m *metaState) {
		links = map[string]mirrorLinkState{}
		for n, l := range m.Mirrors {
			links[n] = *l
		}
	})
	s.mmu.Lock()
	defer s.mmu.Unlock()
	for name, st := range links {
		// Topics without a partition in a session of the link (a crash
		// between a stop's partitions and its state update, or before a
		// start's first partition left NONE) are dropped first.
		topics := slices.DeleteFunc(slices.Clone(st.Topics), func(t string) bool { return !s.topicMirrors(t, name) })
		if len(topics) != len(st.Topics) {
			if err := s.storeLinkTopics(name, topics); err != nil {
				return err
			}
		}
		if len(topics) == 0 {
			continue
		}
		st.Topics = topics
		cl, err := newMirrorClient(st.Source)
		if err != nil {
			return err
		}
		link := s.newLink(name, st, cl)
		for _, t := range st.Topics {
			tt := s.topicByName(t)
			if tt == nil {
				continue
			}
			s.tmu.RLock()
			parts := slices.Clone(tt.parts)
			s.tmu.RUnlock()
			for _, p := range parts {
				if p == nil {
					continue
				}
				c := p.mirror.Checkpoint()
				if c.MirrorName != name || c.State != mirror.StateMirroring {
					continue
				}
				link.add(p, c.Session, c.TopicID, -1)
			}
		}
		link.wake()
	}
	return nil
}
