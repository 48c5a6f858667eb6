package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Mirroring: this server as the destination of a cluster mirror.
//
// A mirror link fetches topics from a source cluster (another partlog
// serve, or any Kafka-protocol cluster) and appends what it fetches with
// mirror.Partition.AppendMirror: bytes, offsets, partition leader epochs,
// producer ids and CRCs as the source has them. Each partition follows
// the mirror state machine of package mirror: Start runs LOG_ALIGNMENT
// (truncation to the last position the source recorded for us, or to 0),
// then MIRRORING, where client produces and transaction markers are
// refused (POLICY_VIOLATION with a message naming the mirror); Stop runs
// STOPPING (truncate to the last stable offset, record the position, raise
// the leader epoch, write the MIRROR_PID_RESET barrier) and leaves the
// partition STOPPED and writable. Every step of both is durable before the
// next (package mirror), so a crash finishes at the next Open.
//
// One fetch loop per link (one goroutine, one franz-go client): it sends
// one Fetch per source leader with read_uncommitted isolation, long
// polling 500 ms, each partition from its local log end, and appends each
// partition's whole batches (a batch cut by the response size limit is
// fetched again next time). The source cluster id comes from the source's
// Metadata response and is written into the barrier. A link's source
// address, admin address and topics are in the server's state file, so
// after a restart the partitions that were MIRRORING fetch again from
// their log end.
//
// The source's admin endpoint (MirrorStartRequest.SourceAdmin, optional)
// answers two questions at Start: the last mirror position the source
// recorded for this cluster (failback: the old source truncates to where
// the new one stopped mirroring it) and whether the source mirrors the
// partition from us (a loop, refused). Without it the partition is
// truncated to 0 and mirrored from the start, as mirror.md says for a
// source that cannot answer.

// MirrorStartRequest starts mirroring topics from a source cluster.
type MirrorStartRequest struct {
	// Name names the link (no white space); default "from-<source
	// cluster id>". Starting more topics with the name of a running link
	// adds them to it (same source only).
	Name string `json:"name,omitempty"`
	// Source is the source cluster's Kafka address (host:port).
	Source string `json:"source"`
	// SourceAdmin is the source's admin endpoint (host:port), if it is a
	// partlog server: its last mirror position for us and the loop check.
	SourceAdmin string `json:"source_admin,omitempty"`
	// Topics to mirror; each is created here with the source's topic id
	// and partition count if missing.
	Topics []string `json:"topics"`
	// AllowTruncation lets the start truncate partitions that hold data
	// of their own (records not mirrored from this source): to 0, or in
	// a failback to where the source stopped mirroring them. Without it
	// such a partition is refused and left as it is.
	AllowTruncation bool `json:"allow_truncation,omitempty"`
}

// MirrorStopRequest stops mirroring topics.
type MirrorStopRequest struct {
	Topics []string `json:"topics"`
	// Policy is TRUNCATE_LSO (default: open transactions are truncated
	// away) or ABORT_OPEN (they are closed with ABORT markers).
	Policy string `json:"policy,omitempty"`
}

// MirrorPartitionStatus is one partition's mirror state, as `partlog
// mirror status` prints it.
type MirrorPartitionStatus struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	Mirror          string `json:"mirror"`
	Source          string `json:"source,omitempty"`
	SourceClusterID string `json:"source_cluster_id"`
	State           string `json:"state"`
	Step            string `json:"step,omitempty"`
	Session         int64  `json:"session"`
	LogEndOffset    int64  `json:"log_end_offset"`
	// LastMirroredOffset is the end of the mirrored range (the offset
	// after the last mirrored record): the log end while the partition
	// mirrors, the recorded LMO once it stopped. `partlog mirror status`
	// shows it as MIRRORED END.
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
	LastMirroredEpoch  int32 `json:"last_mirrored_epoch"`
	// SourceHighWatermark is the source's high watermark at the last
	// fetch (-1 unknown); Lag = SourceHighWatermark - LogEndOffset while
	// mirroring (-1 unknown).
	SourceHighWatermark int64  `json:"source_high_watermark"`
	Lag                 int64  `json:"lag"`
	LeaderEpoch         int32  `json:"leader_epoch"`
	StopLeaderEpoch     int32  `json:"stop_leader_epoch"`
	BarrierOffset       int64  `json:"barrier_offset"`
	Error               string `json:"error,omitempty"`
	// Truncated, in a start's answer, is how many offsets the start cut
	// from the partition's log end (LOG_ALIGNMENT: all of them, or in a
	// failback what this cluster wrote after the source's position).
	Truncated int64 `json:"truncated_offsets,omitempty"`
}

// MirrorPosition is the answer to a last-mirror-position lookup.
type MirrorPosition struct {
	Found  bool  `json:"found"`
	Epoch  int32 `json:"epoch"`
	Offset int64 `json:"offset"`
	// NotReady: the partition is stopping; ask again.
	NotReady bool `json:"not_ready,omitempty"`
}

// mirrorLinkState is a link as the state file keeps it.
type mirrorLinkState struct {
	Source          string   `json:"source"`
	SourceAdmin     string   `json:"source_admin,omitempty"`
	SourceClusterID string   `json:"source_cluster_id"`
	Topics          []string `json:"topics"`
}

// mirrorLink is a running link: its client and fetch loop. name, source
// and sourceCluster never change (a link's name stays with its source).
type mirrorLink struct {
	name          string
	source        string   // the source's Kafka address
	sourceCluster string   // the source's cluster id
	topics        []string // guarded by Server.mmu
	cl            *kgo.Client
	cancel        context.CancelFunc
	done          chan struct{}
	kick          chan struct{}

	mu    sync.Mutex // guards parts and every mirrorPart's fields
	parts map[partlog.TopicPartition]*mirrorPart
}

// mirrorPart is one partition a link fetches.
type mirrorPart struct {
	p        *partition
	session  mirror.SessionID
	topicID  [16]byte // the source's topic id (Fetch v13+)
	leader   int32    // the source's leader node, -1 unknown
	sourceHW int64
	lastErr  string
	stopped  bool // no longer fetched (stopped, paused, failed, deleted)
}

// mirrorOptions are the options of a partition's mirror state machine.
func (s *Server) mirrorOptions(tp partlog.TopicPartition, epoch int32) mirror.Options {
	return mirror.Options{
		LeaderEpoch: epoch,
		LookupPosition: func(ctx context.Context, c mirror.Checkpoint) (mirror.Position, error) {
			return s.lookupForRestart(ctx, tp.Topic, c)
		},
		Now:             s.cfg.Now,
		UnsafeNoBarrier: s.cfg.UnsafeMirrorNoBarrier,
		// With --fsync consumers see only durable records, mirrored ones
		// too: the flusher raises the high watermark after its sync.
		HighWatermarkByCaller: s.cfg.Fsync,
	}
}

// lookupForRestart finishes a LOG_ALIGNMENT a crash interrupted at
// INTENT: it asks the link's source admin again (bounded: Open must not
// hang on an unreachable peer; the partition is FAILED then, and a new
// start retries).
func (s *Server) lookupForRestart(ctx context.Context, topic string, c mirror.Checkpoint) (mirror.Position, error) {
	var st mirrorLinkState
	found := false
	s.meta.view(func(m *metaState) {
		if l := m.Mirrors[c.MirrorName]; l != nil {
			st, found = *l, true
		}
	})
	if !found || st.SourceAdmin == "" {
		return mirror.Position{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return lookupPosition(ctx, st.SourceAdmin, s.meta.clusterID(), topic, c.TopicID, c.Partition)
}

var (
	// errMirrorUsage: the request itself is wrong (admin: 400).
	errMirrorUsage = errors.New("partlog/server: bad mirror request")
	// errWouldTruncate: a start without AllowTruncation met a partition
	// holding records of its own.
	errWouldTruncate = errors.New("partlog/server: mirror start refused")
	// errSourceUnreachable: the source's metadata could not be read
	// (admin: 502).
	errSourceUnreachable = errors.New("partlog/server: source unreachable")
)

func mirrorUsage(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMirrorUsage, fmt.Sprintf(format, args...))
}

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
// partlog does not implement (compression.type, min.insync.replicas…)
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
		cl: cl, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1),
		parts: map[partlog.TopicPartition]*mirrorPart{}}
	s.lmu.Lock()
	s.links[name] = l
	s.lmu.Unlock()
	go s.runLink(ctx, l)
	return l
}

func (l *mirrorLink) add(p *partition, session mirror.SessionID, topicID [16]byte, leader int32) {
	l.mu.Lock()
	l.parts[p.tp] = &mirrorPart{p: p, session: session, topicID: topicID, leader: leader, sourceHW: -1}
	l.mu.Unlock()
}

func (l *mirrorLink) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// close stops the fetch loop and the client.
func (l *mirrorLink) close() {
	l.cancel()
	<-l.done
	l.cl.Close()
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

// StopMirror stops mirroring the topics (every partition of each): each
// partition runs STOPPING to STOPPED, barrier included, and becomes
// writable at the new leader epoch. Partitions that do not mirror are
// left alone. It returns every partition's status after the stop.
func (s *Server) StopMirror(ctx context.Context, req MirrorStopRequest) ([]MirrorPartitionStatus, error) {
	if len(req.Topics) == 0 {
		return nil, mirrorUsage("no topics")
	}
	policy := mirror.TruncateLSO
	switch req.Policy {
	case "", "TRUNCATE_LSO":
	case "ABORT_OPEN":
		policy = mirror.AbortOpen
	default:
		return nil, mirrorUsage("unknown stop policy %q (TRUNCATE_LSO or ABORT_OPEN)", req.Policy)
	}
	s.mmu.Lock()
	defer s.mmu.Unlock()
	if s.mirrorsClosed {
		return nil, partlog.ErrClosed
	}
	var errs []error
	var stopped []partlog.TopicPartition
	for _, name := range req.Topics {
		t := s.topicByName(name)
		if t == nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, kerr.UnknownTopicOrPartition))
			continue
		}
		s.tmu.RLock()
		parts := slices.Clone(t.parts)
		s.tmu.RUnlock()
		for _, p := range parts {
			if p == nil {
				continue
			}
			st := p.mirror.State()
			if st == mirror.StateNone || st == mirror.StateStopped {
				continue
			}
			// Neither the caller's context nor the server's: a caller that
			// goes away, or a Close (it cancels s.ctx, then waits for mmu),
			// must not leave the partition FAILED half way.
			sctx := context.WithoutCancel(s.ctx)
			_, err := p.mirror.Stop(sctx, policy)
			s.followMirrorEpoch(p)
			if err == nil {
				err = s.syncTo(sctx, p, p.log.LogEndOffset())
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.tp, err))
			}
			stopped = append(stopped, p.tp)
		}
	}
	// Links lose the stopped topics; a link left without topics ends.
	for _, l := range s.links {
		l.mu.Lock()
		for _, tp := range stopped {
			if mp := l.parts[tp]; mp != nil && mp.p.mirror.State() == mirror.StateStopped {
				delete(l.parts, tp)
			}
		}
		l.mu.Unlock()
	}
	if err := s.pruneLinksLocked(req.Topics); err != nil {
		errs = append(errs, err)
	}
	status := s.mirrorStatus(func(tp partlog.TopicPartition) bool { return slices.Contains(stopped, tp) })
	return status, errors.Join(errs...)
}

// pruneLinksLocked drops from every link the topics among candidates that
// no longer have a partition in a session of the link (topicMirrors: none
// started, all stopped, or the topic deleted), in memory and in the state
// file; a link left without topics ends. Caller holds mmu.
func (s *Server) pruneLinksLocked(candidates []string) error {
	var errs []error
	for name, l := range s.links {
		topics := slices.DeleteFunc(slices.Clone(l.topics), func(t string) bool {
			return slices.Contains(candidates, t) && !s.topicMirrors(t, name)
		})
		if len(topics) == len(l.topics) {
			continue
		}
		l.topics = topics
		if err := s.storeLinkTopics(name, topics); err != nil {
			errs = append(errs, err)
		}
		if len(topics) == 0 {
			s.lmu.Lock()
			delete(s.links, name)
			s.lmu.Unlock()
			l.close()
		}
	}
	return errors.Join(errs...)
}

// storeLinkTopics records a link's topics in the state file; without
// topics the link is removed from it.
func (s *Server) storeLinkTopics(name string, topics []string) error {
	return s.meta.update(func(m *metaState) {
		if len(topics) == 0 {
			delete(m.Mirrors, name)
		} else if ms := m.Mirrors[name]; ms != nil {
			ms.Topics = slices.Clone(topics)
		}
	})
}

// topicMirrors reports whether a partition of topic still has a session
// of link name that is not STOPPED.
func (s *Server) topicMirrors(topic, name string) bool {
	t := s.topicByName(topic)
	if t == nil {
		return false
	}
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	for _, p := range t.parts {
		if p == nil {
			continue
		}
		c := p.mirror.Checkpoint()
		if c.MirrorName == name && c.State != mirror.StateStopped && c.State != mirror.StateNone {
			return true
		}
	}
	return false
}

// MirrorStatus returns every partition that has a mirror state (mirroring,
// failed, stopping or stopped), by topic and partition.
func (s *Server) MirrorStatus() []MirrorPartitionStatus {
	return s.mirrorStatus(nil)
}

func (s *Server) mirrorStatus(only func(partlog.TopicPartition) bool) []MirrorPartitionStatus {
	s.tmu.RLock()
	var parts []*partition
	for _, t := range s.topics {
		for _, p := range t.parts {
			if p != nil && (only == nil || only(p.tp)) {
				parts = append(parts, p)
			}
		}
	}
	s.tmu.RUnlock()
	sort.Slice(parts, func(i, j int) bool {
		a, b := parts[i].tp, parts[j].tp
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	s.lmu.RLock()
	links := maps.Clone(s.links)
	s.lmu.RUnlock()
	var out []MirrorPartitionStatus
	for _, p := range parts {
		c := p.mirror.Checkpoint()
		if c.State == mirror.StateNone {
			continue
		}
		leo := p.log.LogEndOffset()
		st := MirrorPartitionStatus{Topic: p.tp.Topic, Partition: p.tp.Partition, Mirror: c.MirrorName,
			SourceClusterID: c.SourceClusterID, State: c.State.String(), Session: int64(c.Session),
			LogEndOffset: leo, LastMirroredOffset: c.LastMirrorOffset, LastMirroredEpoch: c.LastMirrorEpoch,
			SourceHighWatermark: -1, Lag: -1, LeaderEpoch: p.epoch.Load(), StopLeaderEpoch: c.StopLeaderEpoch,
			BarrierOffset: c.BarrierOffset}
		if c.Step != mirror.StepNone {
			st.Step = c.Step.String()
		}
		if err := p.mirror.Failure(); err != nil {
			st.Error = err.Error()
		}
		if l := links[c.MirrorName]; l != nil {
			st.Source = l.source
			l.mu.Lock()
			if mp := l.parts[p.tp]; mp != nil {
				st.SourceHighWatermark = mp.sourceHW
				if st.Error == "" {
					st.Error = mp.lastErr
				}
			}
			l.mu.Unlock()
		}
		if c.State.ReadOnly() && c.State != mirror.StateStopping {
			st.LastMirroredOffset = leo
			st.LastMirroredEpoch = p.log.LatestEpoch()
			if st.SourceHighWatermark >= 0 {
				st.Lag = max(0, st.SourceHighWatermark-leo)
			}
		}
		out = append(out, st)
	}
	return out
}

// LastMirrorPosition answers a failback lookup: the position this
// cluster recorded when it stopped mirroring topic's partition from
// requesterClusterID (mirror.Partition.LastMirrorPosition).
func (s *Server) LastMirrorPosition(requesterClusterID, topic string, topicID mirror.TopicID, partition int32) MirrorPosition {
	p, code := s.partitionFor(topic, partition)
	if code != errNone {
		return MirrorPosition{}
	}
	pos, err := p.mirror.LastMirrorPosition(requesterClusterID, topicID, partition)
	switch {
	case errors.Is(err, mirror.ErrNotReady):
		return MirrorPosition{NotReady: true}
	case err != nil:
		return MirrorPosition{}
	}
	return MirrorPosition{Found: pos.Found, Epoch: pos.Epoch, Offset: pos.Offset}
}

// mirrorsFromCluster reports whether topic's partition mirrors from
// cluster (the loop check of a peer's Start).
func (s *Server) mirrorsFromCluster(cluster, topic string, partition int32) bool {
	p, code := s.partitionFor(topic, partition)
	if code != errNone {
		return false
	}
	c := p.mirror.Checkpoint()
	return c.State.ReadOnly() && c.State != mirror.StateStopping && c.SourceClusterID == cluster
}

// runLink is a link's fetch loop.
func (s *Server) runLink(ctx context.Context, l *mirrorLink) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		byLeader, needMeta := l.fetchable()
		if needMeta {
			if err := l.refreshMetadata(ctx); err != nil {
				l.noteAll(err)
				if !l.pause(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			byLeader, needMeta = l.fetchable()
		}
		if len(byLeader) == 0 {
			if needMeta {
				// The source named no leader for any partition (a topic
				// deleted there, an election): ask it again after the
				// backoff, not only at the next start's wake.
				if !l.pause(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-l.kick:
			}
			continue
		}
		progress := false
		for leader, parts := range byLeader {
			ok, err := s.mirrorFetch(ctx, l, leader, parts)
			if err != nil && ctx.Err() == nil {
				l.note(parts, err)
			}
			progress = progress || ok
		}
		if progress {
			backoff = 100 * time.Millisecond
		} else if !l.pause(ctx, backoff) {
			return
		} else {
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// pause waits d between fetch rounds without progress; a start that adds
// partitions (wake) ends it early, so a new session does not wait for a
// backoff that grew while the link had nothing to do. False: ctx ended.
func (l *mirrorLink) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-l.kick:
		return true
	case <-t.C:
		return true
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fetchable groups the partitions to fetch by source leader; needMeta
// says some leader or topic id is unknown.
func (l *mirrorLink) fetchable() (map[int32][]*mirrorPart, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32][]*mirrorPart{}
	needMeta := false
	for _, mp := range l.parts {
		if mp.stopped {
			continue
		}
		if mp.leader < 0 {
			needMeta = true
			continue
		}
		out[mp.leader] = append(out[mp.leader], mp)
	}
	return out, needMeta
}

// note records a failed fetch of parts. The source high watermark is
// forgotten with it: status then shows the lag as unknown beside the
// error, not the lag of the last fetch that worked (0 after catching
// up, while the source may be down and taking writes elsewhere).
func (l *mirrorLink) note(parts []*mirrorPart, err error) {
	l.mu.Lock()
	for _, mp := range parts {
		mp.lastErr = err.Error()
		mp.sourceHW = -1
	}
	l.mu.Unlock()
}

func (l *mirrorLink) noteAll(err error) {
	l.mu.Lock()
	for _, mp := range l.parts {
		mp.lastErr = err.Error()
		mp.sourceHW = -1
	}
	l.mu.Unlock()
}

// refreshMetadata learns the source leaders and topic ids again.
func (l *mirrorLink) refreshMetadata(ctx context.Context) error {
	l.mu.Lock()
	var topics []string
	for tp := range l.parts {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	l.mu.Unlock()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(mctx, l.cl)
	if err != nil {
		return fmt.Errorf("source metadata: %w", err)
	}
	var recreated []*mirrorPart
	defer func() {
		// Outside l.mu (FailMirror takes the partition's lock).
		for _, mp := range recreated {
			_ = mp.p.mirror.FailMirror(mp.session, fmt.Errorf("the source's topic %s has id %v now, the session mirrors id %v (deleted and created again at the source): the partition would mix two topics",
				mp.p.tp.Topic, partlog.TopicID(mp.topicID), partlog.TopicID(mp.p.mirror.Checkpoint().TopicID)))
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if resp.ClusterID != nil && *resp.ClusterID != l.sourceCluster {
		return fmt.Errorf("source at %s is cluster %s, not %s", l.source, *resp.ClusterID, l.sourceCluster)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode != 0 {
			// No leader to fetch from (the topic deleted at the source,
			// say): the status says why nothing is fetched.
			for tp, mp := range l.parts {
				if tp.Topic == *t.Topic && !mp.stopped {
					mp.lastErr = "source metadata: " + kerr.ErrorForCode(t.ErrorCode).Error()
					mp.sourceHW = -1
				}
			}
			continue
		}
		for _, sp := range t.Partitions {
			mp := l.parts[partlog.TopicPartition{Topic: *t.Topic, Partition: sp.Partition}]
			if mp == nil || mp.stopped {
				continue
			}
			mp.leader, mp.topicID = sp.Leader, t.TopicID
			if sp.ErrorCode != 0 {
				mp.leader = -1
				mp.lastErr = "source metadata: " + kerr.ErrorForCode(sp.ErrorCode).Error()
				mp.sourceHW = -1
			}
			// The session's topic id is the one of its Start: another id
			// is another topic under the same name, whose offsets start
			// again at 0.
			if want := mp.p.mirror.Checkpoint().TopicID; t.TopicID != ([16]byte{}) && want != (mirror.TopicID{}) && mirror.TopicID(t.TopicID) != want {
				mp.stopped = true
				mp.lastErr = "source topic created again (another topic id)"
				recreated = append(recreated, mp)
			}
		}
	}
	return nil
}

// mirrorFetch sends one Fetch to a source leader and appends what came
// back; ok says something was appended.
func (s *Server) mirrorFetch(ctx context.Context, l *mirrorLink, leader int32, parts []*mirrorPart) (ok bool, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = 32 << 20
	req.IsolationLevel = 0 // read_uncommitted: open transactions are copied too
	req.SessionEpoch = -1
	byTopic := map[string]int{}
	for _, mp := range parts {
		i, ok := byTopic[mp.p.tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[mp.p.tp.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = mp.p.tp.Topic, mp.topicID
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = mp.p.tp.Partition
		rp.CurrentLeaderEpoch = -1
		rp.FetchOffset = mp.p.log.LogEndOffset()
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = 4 << 20
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(fctx, l.cl.Broker(int(leader)))
	if err != nil {
		l.markLeadersUnknown(parts)
		return false, fmt.Errorf("fetch from %s: %w", l.source, err)
	}
	if resp.ErrorCode != 0 {
		return false, fmt.Errorf("fetch from %s: %w", l.source, kerr.ErrorForCode(resp.ErrorCode))
	}
	find := func(rt *kmsg.FetchResponseTopic, n int32) *mirrorPart {
		for _, mp := range parts {
			if mp.p.tp.Partition == n && (mp.p.tp.Topic == rt.Topic || rt.Topic == "" && mp.topicID == rt.TopicID) {
				return mp
			}
		}
		return nil
	}
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			mp := find(rt, rp.Partition)
			if mp == nil {
				continue
			}
			if s.applyFetched(ctx, l, mp, rp) {
				ok = true
			}
		}
	}
	return ok, nil
}

func (l *mirrorLink) markLeadersUnknown(parts []*mirrorPart) {
	l.mu.Lock()
	for _, mp := range parts {
		mp.leader = -1
	}
	l.mu.Unlock()
}

// applyFetched appends one partition's fetched batches.
func (s *Server) applyFetched(ctx context.Context, l *mirrorLink, mp *mirrorPart, rp *kmsg.FetchResponseTopicPartition) bool {
	p := mp.p
	setErr := func(msg string) { // as note: the source high watermark is no longer known
		l.mu.Lock()
		mp.lastErr = msg
		mp.sourceHW = -1
		l.mu.Unlock()
	}
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		if err := s.mirrorOutOfRange(ctx, l, mp); err != nil {
			setErr(err.Error())
		}
		return false
	case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.LeaderNotAvailable.Code,
		kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.UnknownTopicID.Code:
		l.markLeadersUnknown([]*mirrorPart{mp})
		setErr("source: " + kerr.ErrorForCode(rp.ErrorCode).Error())
		return false
	default:
		setErr("source: " + kerr.ErrorForCode(rp.ErrorCode).Error())
		return false
	}
	l.mu.Lock()
	mp.sourceHW = rp.HighWatermark
	mp.lastErr = ""
	l.mu.Unlock()
	recs := wholeBatchesFrom(rp.RecordBatches, p.log.LogEndOffset())
	if err := s.mirrorCheckDivergence(ctx, l, mp, recs); err != nil {
		setErr(err.Error())
		return false
	}
	// One append takes at most a segment (the Log refuses more): a fetch
	// brings up to 4 MiB, a topic's segment.bytes can be 1 MiB.
	for rest := recs; len(rest) > 0; {
		var chunk []byte
		chunk, rest = batchesUpTo(rest, p.segmentBytes)
		_, err := p.mirror.AppendMirror(mp.session, chunk)
		if errors.Is(err, mirror.ErrEpochFenced) {
			// The local epoch was raised above the batch's: same bytes again.
			_, err = p.mirror.AppendMirror(mp.session, chunk)
		}
		s.followMirrorEpoch(p)
		if err != nil {
			l.mu.Lock()
			mp.lastErr = err.Error()
			if !errors.Is(err, mirror.ErrEpochFenced) {
				mp.stopped = true // stopped, paused, failed or deleted: no more fetches
			}
			l.mu.Unlock()
			if !errors.Is(err, mirror.ErrNotMirroring) && !errors.Is(err, mirror.ErrFencedSession) {
				s.logf("mirror %s %s: %v", l.name, p.tp, err)
			}
			return false
		}
	}
	if len(recs) > 0 && s.cfg.Fsync {
		s.flushLater(p)
	}
	if rp.LogStartOffset > p.log.LogStartOffset() && rp.LogStartOffset <= p.log.LogEndOffset() {
		if err := p.mirror.AdvanceLogStart(mp.session, rp.LogStartOffset); err != nil {
			setErr(err.Error())
		}
	}
	return len(recs) > 0
}

// mirrorCheckDivergence runs when the first fetched batch has a leader
// epoch above the local log's latest: the source changed leaders (or
// stopped mirroring and took writes) since the last mirrored batch, and it
// may have truncated what we mirrored first, as a mirror in the middle of
// a chain does when it stops with TRUNCATE_LSO. Fetching on from the local
// log end would then join two histories silently. The source's end offset
// of our latest epoch (OffsetForLeaderEpoch) says: below our log end, the
// logs diverged and the partition goes FAILED (divergence is not resolved,
// as in mirrorOutOfRange); a source that no longer has that epoch cannot
// tell, and fetching goes on.
func (s *Server) mirrorCheckDivergence(ctx context.Context, l *mirrorLink, mp *mirrorPart, recs []byte) error {
	if len(recs) < batch.HeaderSize {
		return nil
	}
	local := mp.p.log.LatestEpoch()
	if local < 0 || batch.View(recs).PartitionLeaderEpoch() <= local {
		return nil
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = mp.p.tp.Topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = mp.p.tp.Partition, -1, local
	t.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{t}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(octx, l.cl.Broker(int(mp.leader)))
	if err != nil {
		return fmt.Errorf("offset for leader epoch at the source: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return errors.New("offset for leader epoch at the source: malformed response")
	}
	r := resp.Topics[0].Partitions[0]
	if r.ErrorCode != 0 {
		return fmt.Errorf("offset for leader epoch at the source: %w", kerr.ErrorForCode(r.ErrorCode))
	}
	leo := mp.p.log.LogEndOffset()
	if r.LeaderEpoch < 0 || r.EndOffset < 0 || r.EndOffset >= leo {
		return nil
	}
	err = fmt.Errorf("the source's epoch %d ends at %d (epoch %d), below the mirrored log end %d: the source truncated what was mirrored (divergence is not resolved; start the mirror again)",
		local, r.EndOffset, r.LeaderEpoch, leo)
	return l.fail(mp, err)
}

// mirrorOutOfRange handles OFFSET_OUT_OF_RANGE: the source's log start
// moved past our log end (retention), so the local log restarts there;
// a source log ending below ours is a divergence the engine does not
// resolve (the partition goes FAILED).
func (s *Server) mirrorOutOfRange(ctx context.Context, l *mirrorLink, mp *mirrorPart) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = mp.p.tp.Topic
	for _, ts := range []int64{-2, -1} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = mp.p.tp.Partition
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = ts
		t.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
		req.Topics = []kmsg.ListOffsetsRequestTopic{t}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := req.RequestWith(lctx, l.cl.Broker(int(mp.leader)))
		cancel()
		if err != nil {
			return fmt.Errorf("list offsets at the source: %w", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return errors.New("list offsets at the source: malformed response")
		}
		r := resp.Topics[0].Partitions[0]
		if r.ErrorCode != 0 {
			return fmt.Errorf("list offsets at the source: %w", kerr.ErrorForCode(r.ErrorCode))
		}
		leo := mp.p.log.LogEndOffset()
		switch {
		case ts == -2 && r.Offset > leo:
			return mp.p.mirror.AdvanceLogStart(mp.session, r.Offset)
		case ts == -1 && r.Offset < leo:
			err := fmt.Errorf("the source's log ends at %d, below the mirrored log end %d (divergence is not resolved)", r.Offset, leo)
			return l.fail(mp, err)
		}
	}
	return nil
}

// batchesUpTo splits whole batches b into a prefix of at most limit
// bytes (at least one batch, whatever its size) and the rest. Bytes that
// do not frame go whole into the prefix (the append refuses them).
func batchesUpTo(b []byte, limit int64) (head, rest []byte) {
	end := 0
	for end < len(b) {
		n, err := batch.Frame(b[end:])
		if err != nil {
			if end == 0 {
				return b, nil
			}
			break
		}
		if end > 0 && int64(end+n) > limit {
			break
		}
		end += n
	}
	return b[:end], b[end:]
}

// wholeBatchesFrom returns the prefix of fetched bytes made of whole
// batches, without the batches that end below from (a fetch may start
// inside a batch). A response cut inside a batch ends before it.
func wholeBatchesFrom(b []byte, from int64) []byte {
	for len(b) >= batch.HeaderSize {
		n, err := batch.Frame(b)
		if err != nil {
			return nil
		}
		if batch.View(b).LastOffset() >= from {
			break
		}
		b = b[n:]
	}
	end := 0
	for end < len(b) {
		n, err := batch.Frame(b[end:])
		if err != nil {
			break
		}
		end += n
	}
	return b[:end]
}

// fail moves a fetched partition to FAILED (read-only, reason kept) and
// stops fetching it; a new start recovers it. It returns err. Only the
// session mp fetched for is failed (FailMirror): the verdict of a fetch
// that a stop overtook (the stop's barrier puts the log end one past the
// source's, so the loop's next fetch is out of range and looks like a
// divergence) must not make the stopped partition read-only again.
func (l *mirrorLink) fail(mp *mirrorPart, err error) error {
	_ = mp.p.mirror.FailMirror(mp.session, err)
	l.mu.Lock()
	mp.stopped = true
	l.mu.Unlock()
	return err
}
