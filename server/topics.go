package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topic is a topic of the log directory: its partitions are the Dir's
// <name>-<n> partitions.
type topic struct {
	name  string
	id    partlog.TopicID
	parts []*partition // by partition number; nil where the directory has none
}

// partition is one served partition.
type partition struct {
	tp  partlog.TopicPartition
	log *partlog.Log
	// mirror is the partition's mirror state machine: every client and
	// coordinator append goes through it, so a mirrored partition is
	// read-only until its mirror is stopped (mirror.go).
	mirror *mirror.Partition
	// epoch is the leader epoch this node serves the partition at: the
	// log's latest, raised by the mirror (its fencing and its stop).
	epoch atomic.Int32
	// The topic's configs that the server applies itself, set by
	// setConfigs under cfgMu (the produce path reads them under it).
	cfgMu sync.RWMutex
	// appendTime: the topic stamps LogAppendTime (produce answers it).
	appendTime bool
	// segmentBytes is the log's segment.bytes: the most one append may
	// bring (the mirror fetcher appends a fetch's batches in such steps).
	segmentBytes int64
	hwMu         sync.Mutex
}

// setConfigs sets the partition's view of its topic's configs
// (configs checked, applied to the server's template tmpl).
func (p *partition) setConfigs(tmpl partlog.Options, configs map[string]string) {
	o, _ := topicOptions(tmpl, configs)
	p.cfgMu.Lock()
	defer p.cfgMu.Unlock()
	p.appendTime = o.MessageTimestampType == partlog.LogAppendTime
	p.segmentBytes = o.SegmentBytes
	if p.segmentBytes <= 0 {
		p.segmentBytes = partlog.DefaultSegmentBytes
	}
}

// settings returns the partition's LogAppendTime flag and segment size.
func (p *partition) settings() (appendTime bool, segmentBytes int64) {
	p.cfgMu.RLock()
	defer p.cfgMu.RUnlock()
	return p.appendTime, p.segmentBytes
}

// raiseHighWatermark moves the high watermark up to hw, never down
// (appends of several connections finish in any order).
func (p *partition) raiseHighWatermark(hw int64) {
	p.hwMu.Lock()
	if hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
	}
	p.hwMu.Unlock()
}

// followMirrorEpoch raises the served epoch to the mirror's (fencing, a
// stop's E_stop), never lowering it: the fetch loop and a start or stop
// call it concurrently, and a plain load-max-store could put back a
// value read before a stop's bump, after which every produce and marker
// would be refused as below the log's latest epoch. A raised epoch is
// kept in the state file: the fenced epoch is in no log nor checkpoint,
// and after a restart Metadata must not answer a lower one
// (mirror.Options.LeaderEpoch gives it back).
func (s *Server) followMirrorEpoch(p *partition) {
	e := p.mirror.LeaderEpoch()
	if p.epoch.Load() >= e {
		return
	}
	// Kept before it is served, so no restart answers a lower one.
	if err := s.meta.raiseMirrorEpoch(p.tp, e); err != nil {
		s.logf("%s: keep leader epoch %d: %v", p.tp, e, err)
	}
	for {
		cur := p.epoch.Load()
		if cur >= e || p.epoch.CompareAndSwap(cur, e) {
			return
		}
	}
}

// newPartition attaches the mirror state machine to an open log: a
// mirror.checkpoint left by a crash is reconciled here (an interrupted
// stop is finished, barrier included, before any client can write).
func (s *Server) newPartition(tp partlog.TopicPartition, l *partlog.Log) (*partition, error) {
	tmpl := partlog.Options{}
	if s.cfg.Log != nil {
		tmpl = *s.cfg.Log
	}
	p := &partition{tp: tp, log: l}
	p.setConfigs(tmpl, s.meta.topicConfigs(tp.Topic))
	epoch := max(0, l.LatestEpoch(), s.meta.mirrorEpoch(tp))
	mp, err := mirror.Open(l, s.mirrorOptions(tp, epoch))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tp, err)
	}
	p.mirror = mp
	p.epoch.Store(max(epoch, mp.LeaderEpoch()))
	return p, nil
}

// loadTopics builds the topic table from the open partitions. A log end
// above the high watermark (a crash before the high watermark was
// checkpointed) is served: on a single node every record in the log was
// acknowledged or may be.
func (s *Server) loadTopics() error {
	for tp, l := range s.dir.Logs() {
		p, err := s.newPartition(tp, l)
		if err != nil {
			return err
		}
		t := s.topics[tp.Topic]
		if t == nil {
			t = &topic{name: tp.Topic, id: l.TopicID()}
			s.topics[tp.Topic] = t
		}
		for int(tp.Partition) >= len(t.parts) {
			t.parts = append(t.parts, nil)
		}
		t.parts[tp.Partition] = p
		if t.id.IsZero() {
			t.id = l.TopicID()
		}
		if !s.cfg.Fsync {
			p.raiseHighWatermark(l.LogEndOffset())
		} else {
			// What recovery kept is what the files hold; with --fsync it
			// is served once durable again (the flusher syncs it).
			s.flushLater(p)
		}
	}
	return nil
}

// partitionFor returns a served partition.
func (s *Server) partitionFor(name string, n int32) (*partition, int16) {
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	t := s.topics[name]
	if t == nil || n < 0 || int(n) >= len(t.parts) || t.parts[n] == nil {
		return nil, errUnknownTopicOrPartition
	}
	return t.parts[n], errNone
}

func (s *Server) topicByName(name string) *topic {
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	return s.topics[name]
}

func newTopicID() (partlog.TopicID, error) {
	var id partlog.TopicID
	for id.IsZero() {
		if _, err := rand.Read(id[:]); err != nil {
			return id, err
		}
	}
	return id, nil
}

// validTopicName is Kafka's rule (Topic.validate).
func validTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Topic names Kafka refuses to create, and the names partlog keeps for
// itself.
const (
	clusterMetadataTopic = "__cluster_metadata" // KRaft's log: Kafka refuses to create it, OpenDir leaves it alone
)

// internalTopics are Kafka's internal topics (Topic.isInternal). Kafka's
// coordinators create them; this server keeps group offsets and
// transactions in its own files (state.go, package group), so a client's
// topic of such a name would be read as Kafka's own by a broker that
// later opens the directory.
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true, "__share_group_state": true}

// maxRecordsPerOperation bounds the partitions (and topic and config
// records) one CreateTopics or CreatePartitions may make: Kafka's
// controller refuses a request that would write more than
// MAX_RECORDS_PER_USER_OP (10 000) records.
const maxRecordsPerOperation = 10_000

// topicRefusal is a topic creation refused with a Kafka error code.
type topicRefusal struct {
	code int16
	msg  string
}

func (e *topicRefusal) Error() string { return e.msg }

// creationErrorCode is the error code of a failed topic creation.
func creationErrorCode(err error) int16 {
	var r *topicRefusal
	if errors.As(err, &r) {
		return r.code
	}
	return partlog.KafkaErrorCode(err)
}

// unifyCollisionChars maps '.' to '_', as Kafka's Topic.unifyCollisionChars
// does: two names equal after it collide in Kafka's metric names, and
// Kafka refuses the second.
func unifyCollisionChars(name string) string { return strings.ReplaceAll(name, ".", "_") }

// checkNewTopicLocked refuses the names Kafka refuses to create
// (ControllerApis/KafkaApis: __cluster_metadata; ReplicationControlManager:
// a name colliding with an existing topic's) and Kafka's internal topic
// names. Caller holds cmu.
func (s *Server) checkNewTopicLocked(name string) error {
	switch {
	case !validTopicName(name):
		return &topicRefusal{errInvalidTopic, "topic name " + strconv.Quote(name) + " is invalid: Kafka allows 1 to 249 of [a-zA-Z0-9._-], not '.' or '..'"}
	case name == clusterMetadataTopic:
		return &topicRefusal{errInvalidRequest, "Creation of internal topic " + clusterMetadataTopic + " is prohibited."}
	case internalTopics[name]:
		return &topicRefusal{errInvalidRequest, "topic " + name + " is Kafka's internal topic; partlog keeps group offsets and transactions in its own files and does not create it"}
	}
	if strings.ContainsAny(name, "._") {
		unified := unifyCollisionChars(name)
		s.tmu.RLock()
		defer s.tmu.RUnlock()
		for other := range s.topics {
			if other != name && unifyCollisionChars(other) == unified {
				return &topicRefusal{errInvalidTopic, "Topic '" + name + "' collides with existing topic: " + other}
			}
		}
	}
	return nil
}

// checkPartitionBudgetLocked refuses to make more partitions than
// Config.MaxPartitions allows. Caller holds cmu.
func (s *Server) checkPartitionBudgetLocked(more int32) error {
	have := len(s.dir.Logs())
	if have+int(more) > s.cfg.MaxPartitions {
		return &topicRefusal{errPolicyViolation, fmt.Sprintf("this server serves %d partitions and takes at most %d (serve --max-partitions); %d more refused",
			have, s.cfg.MaxPartitions, more)}
	}
	return nil
}

// createTopicLocked creates partitions [from, count) of a topic (all of a
// new topic when from is 0, whose name is checked first), with the
// topic's configs. A creation that fails part way removes what it made
// (partitions, and for a new topic its configs): a failed request leaves
// nothing behind. Caller holds cmu.
func (s *Server) createTopicLocked(name string, id partlog.TopicID, from, count int32, configs map[string]string) (err error) {
	if from == 0 {
		if err := s.checkNewTopicLocked(name); err != nil {
			return err
		}
	}
	if err := s.checkPartitionBudgetLocked(count - from); err != nil {
		return err
	}
	tmpl := partlog.Options{}
	if s.cfg.Log != nil {
		tmpl = *s.cfg.Log
	}
	opts, err := topicOptions(tmpl, configs)
	if err != nil {
		return err
	}
	var made []partlog.TopicPartition
	defer func() {
		if err != nil {
			err = errors.Join(err, s.undoCreateLocked(name, from, made))
		}
	}()
	if from == 0 {
		if err := s.meta.setTopicConfigs(name, configs); err != nil {
			return err
		}
	}
	var created []*partition
	for n := from; n < count; n++ {
		o := opts
		l, err := s.dir.Create(name, n, id, &o)
		if err != nil {
			return err
		}
		tp := partlog.TopicPartition{Topic: name, Partition: n}
		made = append(made, tp)
		p, err := s.newPartition(tp, l)
		if err != nil {
			return err
		}
		s.tmu.Lock()
		t := s.topics[name]
		if t == nil {
			t = &topic{name: name, id: id}
			s.topics[name] = t
		}
		for int(n) >= len(t.parts) {
			t.parts = append(t.parts, nil)
		}
		t.parts[n] = p
		s.tmu.Unlock()
		created = append(created, p)
	}
	return prepareNewPartitions(created)
}

// prepareNewPartitions makes new partitions ready for their first
// produce, as Kafka's are when its leader takes them: each records its
// leader epoch at its start (the checkpoint's write: two fsyncs) and makes
// its active segment's index files (two file creations), a few partitions
// at once. In their first appends, one partition after another, these
// were most of partlog serve's CPU under a producer to a new topic of
// 1 000 partitions.
func prepareNewPartitions(ps []*partition) error {
	const parallel = 16 // fsyncs of different files overlap
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i, p := range ps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := p.log.AssignLeaderEpoch(p.epoch.Load()); err != nil {
				errs[i] = fmt.Errorf("%s: leader epoch %d: %w", p.tp, p.epoch.Load(), err)
				return
			}
			if err := p.log.PrepareIndexes(); err != nil {
				errs[i] = fmt.Errorf("%s: index files: %w", p.tp, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// undoCreateLocked removes the partitions a failed creation made (and,
// for a new topic, the topic and its configs).
func (s *Server) undoCreateLocked(name string, from int32, made []partlog.TopicPartition) error {
	s.tmu.Lock()
	if t := s.topics[name]; t != nil {
		if from == 0 {
			delete(s.topics, name)
		} else if int(from) < len(t.parts) {
			t.parts = t.parts[:from]
		}
	}
	s.tmu.Unlock()
	var errs []error
	if len(made) > 0 {
		errs = append(errs, s.dir.DeletePartitions(made))
	}
	if from == 0 {
		errs = append(errs, s.meta.setTopicConfigs(name, nil))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing what the failed creation of %s made: %w", name, err)
	}
	return nil
}

// autoCreate creates a topic with the default partition count if it does
// not exist yet; it reports the error code for the topic.
func (s *Server) autoCreate(name string) int16 {
	if !validTopicName(name) {
		return errInvalidTopic
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.topicByName(name) != nil {
		return errNone
	}
	id, err := newTopicID()
	if err != nil {
		return errKafkaStorageError
	}
	if err := s.createTopicLocked(name, id, 0, s.cfg.DefaultPartitions, nil); err != nil {
		s.logf("auto-create %s: %v", name, err)
		return creationErrorCode(err)
	}
	return errNone
}

func (s *Server) metadata(cc *connCtx, req *kmsg.MetadataRequest) kmsg.Response {
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = req.Version
	host, port := cc.hostPort()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, host, port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	cid := s.meta.clusterID()
	resp.ClusterID = &cid
	resp.ControllerID = s.cfg.NodeID
	var names []string
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		s.tmu.RLock()
		for name := range s.topics {
			names = append(names, name)
		}
		s.tmu.RUnlock()
		sort.Strings(names)
	}
	for _, rt := range req.Topics {
		if rt.Topic != nil {
			names = append(names, *rt.Topic)
			continue
		}
		// v10+: by topic id.
		name, ok := s.topicNameForID(rt.TopicID)
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.ErrorCode = errUnknownTopicID
			mt.TopicID = rt.TopicID
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		names = append(names, name)
	}
	autoCreate := s.cfg.AutoCreate && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, name := range names {
		mt := kmsg.NewMetadataResponseTopic()
		n := name
		mt.Topic = &n
		t := s.topicByName(name)
		if t == nil && !all {
			code := errUnknownTopicOrPartition
			if !validTopicName(name) {
				code = errInvalidTopic
			} else if autoCreate {
				code = s.autoCreate(name)
			}
			if code != errNone {
				mt.ErrorCode = code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			t = s.topicByName(name)
		}
		if t == nil {
			mt.ErrorCode = errUnknownTopicOrPartition
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		s.tmu.RLock()
		mt.TopicID = t.id
		mt.IsInternal = false
		for n, p := range t.parts {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = int32(n)
			if p == nil {
				mp.ErrorCode = errUnknownTopicOrPartition
				mp.Leader = -1
			} else {
				mp.Leader = s.cfg.NodeID
				mp.LeaderEpoch = p.epoch.Load()
				mp.Replicas = []int32{s.cfg.NodeID}
				mp.ISR = []int32{s.cfg.NodeID}
				mp.OfflineReplicas = []int32{}
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		s.tmu.RUnlock()
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

func (s *Server) topicNameForID(id [16]byte) (string, bool) {
	name, _, ok := s.TopicByID(id)
	return name, ok
}

func (s *Server) createTopics(req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = req.Version
	seen := map[string]int{}
	records := 0
	for _, rt := range req.Topics {
		seen[rt.Topic]++
		n := int(rt.NumPartitions)
		if n < 0 {
			n = int(s.cfg.DefaultPartitions)
		}
		records += 1 + max(n, len(rt.ReplicaAssignment)) + len(rt.Configs)
	}
	// Kafka's controller refuses the whole request when its records
	// would pass MAX_RECORDS_PER_USER_OP.
	tooLarge := records > maxRecordsPerOperation
	for _, rt := range req.Topics {
		ct := kmsg.NewCreateTopicsResponseTopic()
		ct.Topic = rt.Topic
		ct.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
		fail := func(code int16, msg string) {
			ct.ErrorCode = code
			ct.ErrorMessage = &msg
			ct.NumPartitions, ct.ReplicationFactor = -1, -1
		}
		count := rt.NumPartitions
		if count == -1 {
			count = s.cfg.DefaultPartitions
		}
		configs := map[string]string{}
		for _, c := range rt.Configs {
			if c.Value != nil {
				configs[c.Name] = *c.Value
			}
		}
		configs, cfgErr := checkConfigs(configs)
		switch {
		case tooLarge:
			fail(errPolicyViolation, "Unable to perform excessively large batch operation.")
		case seen[rt.Topic] > 1:
			fail(errInvalidRequest, "topic named more than once in the request")
		case !validTopicName(rt.Topic):
			fail(errInvalidTopic, "invalid topic name")
		case len(rt.ReplicaAssignment) > 0 && !singleNodeAssignment(rt.ReplicaAssignment, s.cfg.NodeID):
			fail(errInvalidReplicaAssignment, "this server is a single node: every replica list must be ["+strconv.Itoa(int(s.cfg.NodeID))+"]")
		case len(rt.ReplicaAssignment) > 0 && rt.NumPartitions != -1:
			fail(errInvalidRequest, "both partitions and replica assignment given")
		case rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 && len(rt.ReplicaAssignment) == 0:
			fail(errInvalidReplicationFactor, "this server is a single node: replication factor 1")
		case cfgErr != nil:
			fail(errInvalidConfig, cfgErr.Error())
		default:
			if len(rt.ReplicaAssignment) > 0 {
				count = int32(len(rt.ReplicaAssignment))
			}
			if count <= 0 {
				fail(errInvalidPartitions, "number of partitions must be positive")
				break
			}
			s.cmu.Lock()
			if t := s.topicByName(rt.Topic); t != nil {
				s.cmu.Unlock()
				fail(errTopicAlreadyExists, "Topic '"+rt.Topic+"' already exists.")
				break
			}
			if req.ValidateOnly {
				err := errors.Join(s.checkNewTopicLocked(rt.Topic), s.checkPartitionBudgetLocked(count))
				s.cmu.Unlock()
				if err != nil {
					fail(creationErrorCode(err), err.Error())
					break
				}
				ct.NumPartitions, ct.ReplicationFactor = count, 1
				ct.Configs = s.createdConfigs(configs)
				break
			}
			id, err := newTopicID()
			if err == nil {
				err = s.createTopicLocked(rt.Topic, id, 0, count, configs)
			}
			s.cmu.Unlock()
			if err != nil {
				fail(creationErrorCode(err), err.Error())
				break
			}
			ct.TopicID = id
			ct.NumPartitions, ct.ReplicationFactor = count, 1
			ct.Configs = s.createdConfigs(configs)
		}
		resp.Topics = append(resp.Topics, ct)
	}
	return resp
}

// createdConfigs are a created topic's configs as CreateTopics v5+
// answers them: every config, its own or the default (Kafka lists all).
func (s *Server) createdConfigs(configs map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	tmpl := partlog.Options{}
	if s.cfg.Log != nil {
		tmpl = *s.cfg.Log
	}
	o, _ := topicOptions(tmpl, configs)
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, e := range configEntries(o, configs, false) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		v := e.value
		c.Name, c.Value, c.Source = e.name, &v, int8(e.source)
		out = append(out, c)
	}
	return out
}

func singleNodeAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment, node int32) bool {
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != node {
			return false
		}
	}
	return true
}

func (s *Server) deleteTopics(req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.Version = req.Version
	type target struct {
		name  string
		id    [16]byte
		hasID bool
	}
	var targets []target
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: n})
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				targets = append(targets, target{name: *t.Topic})
			} else {
				targets = append(targets, target{id: t.TopicID, hasID: true})
			}
		}
	}
	for _, tg := range targets {
		dt := kmsg.NewDeleteTopicsResponseTopic()
		name := tg.name
		if tg.hasID {
			dt.TopicID = tg.id
			n, ok := s.topicNameForID(tg.id)
			if !ok {
				dt.ErrorCode = errUnknownTopicID
				resp.Topics = append(resp.Topics, dt)
				continue
			}
			name = n
		}
		dt.Topic = &name
		if t := s.topicByName(name); t != nil && req.Version >= 6 {
			dt.TopicID = t.id
		}
		err := s.deleteTopic(name)
		switch {
		case errors.Is(err, partlog.ErrUnknownPartition):
			dt.ErrorCode = errUnknownTopicOrPartition
		case err != nil:
			dt.ErrorCode = partlog.KafkaErrorCode(err)
			msg := err.Error()
			dt.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, dt)
	}
	return resp
}

func (s *Server) deleteTopic(name string) error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.tmu.Lock()
	t := s.topics[name]
	delete(s.topics, name)
	s.tmu.Unlock()
	if t == nil {
		return fmt.Errorf("%w: topic %s", partlog.ErrUnknownPartition, name)
	}
	// One call for every partition: one directory sync and one
	// checkpoint write, whatever the partition count.
	var tps []partlog.TopicPartition
	for _, p := range t.parts {
		if p != nil {
			tps = append(tps, p.tp)
		}
	}
	return errors.Join(s.dir.DeletePartitions(tps), s.meta.setTopicConfigs(name, nil), s.meta.forgetMirrorEpochs(name))
}

func (s *Server) createPartitions(req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.Version = req.Version
	for _, rt := range req.Topics {
		ct := kmsg.NewCreatePartitionsResponseTopic()
		ct.Topic = rt.Topic
		fail := func(code int16, msg string) {
			ct.ErrorCode = code
			ct.ErrorMessage = &msg
		}
		s.cmu.Lock()
		t := s.topicByName(rt.Topic)
		var have int32
		var id partlog.TopicID
		if t != nil {
			s.tmu.RLock()
			have, id = int32(len(t.parts)), t.id
			s.tmu.RUnlock()
		}
		switch {
		case t == nil:
			fail(errUnknownTopicOrPartition, "unknown topic")
		case rt.Count <= have:
			fail(errInvalidPartitions, fmt.Sprintf("topic has %d partitions; the count must grow", have))
		case rt.Assignment != nil && len(rt.Assignment) != int(rt.Count-have):
			fail(errInvalidReplicaAssignment, "assignment count differs from the new partitions")
		case int(rt.Count-have) > maxRecordsPerOperation:
			fail(errPolicyViolation, "Unable to perform excessively large batch operation.")
		case req.ValidateOnly:
		default:
			if id.IsZero() {
				var err error
				if id, err = newTopicID(); err != nil {
					fail(errKafkaStorageError, err.Error())
					break
				}
			}
			if err := s.createTopicLocked(rt.Topic, id, have, rt.Count, s.meta.topicConfigs(rt.Topic)); err != nil {
				fail(creationErrorCode(err), err.Error())
			}
		}
		s.cmu.Unlock()
		resp.Topics = append(resp.Topics, ct)
	}
	return resp
}
