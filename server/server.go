package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupHandler is the group coordinator the server routes the classic
// consumer-group requests to (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups),
// and the offset store of transactional producers (TxnOffsetCommit,
// completed by EndTxn). Package server/group's *Coordinator implements
// it.
type GroupHandler interface {
	// Handle answers one group request at the request's version; it
	// may block (JoinGroup, SyncGroup) until the rebalance completes or
	// ctx ends. ok is false when req is not a group request.
	Handle(ctx context.Context, req kmsg.Request) (resp kmsg.Response, ok bool)
	// CommitTxnOffsets stages the offsets of a transactional producer.
	CommitTxnOffsets(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse
	// CompleteTxn makes the staged offsets of producerID visible
	// (commit) or drops them (abort).
	CompleteTxn(producerID int64, producerEpoch int16, commit bool) error
	// Close releases the coordinator.
	Close() error
}

// Config configures Open.
type Config struct {
	// Dir is the log directory (created if missing).
	Dir string
	// Log is the template of every partition's options (nil: Kafka's
	// defaults). Topic configs given to CreateTopics override it.
	Log *partlog.Options
	// Quarantine is where the recovery of a partition at open keeps the
	// bytes it removes (partlog.DirOptions.Quarantine; relative: inside
	// the partition directory). Default "": deleted, as Kafka does.
	Quarantine string
	// AutoCreate creates a topic on its first Metadata or Produce
	// request, with DefaultPartitions partitions (Kafka's
	// auto.create.topics.enable and num.partitions).
	AutoCreate        bool
	DefaultPartitions int32
	// Fsync makes the high watermark follow the durable offsets: an
	// acks=-1 produce is answered once its records are on disk (group
	// commit through Log.Sync), and consumers see only what is durable.
	// Partitions then keep no prefault window unless Log sets
	// PrefaultBytes.
	Fsync bool
	// NodeID is this node's broker id (default 0).
	NodeID int32
	// Groups, if set, answers the consumer-group requests; without it
	// they are not advertised and answered UNSUPPORTED_VERSION. The
	// server does not close it.
	Groups GroupHandler
	// GroupContext, if set, gives each group request's context the
	// client id and host of its connection (group.ContextWithClient):
	// DescribeGroups shows them, as Kafka does.
	GroupContext func(ctx context.Context, clientID, clientHost string) context.Context
	// Tick is the period of the housekeeping pass (transaction timeouts,
	// producer expiry, retention, checkpoints). Default 1s.
	Tick time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxRequestBytes bounds a request (Kafka's socket.request.max.bytes,
	// default 100 MiB).
	MaxRequestBytes int32
	// MaxRequestEntries bounds the array entries and tagged fields of one
	// request (default 100 000; Kafka has no such bound): decoding
	// allocates tens of bytes of structures for each, whatever few bytes
	// it took on the wire. A request holding more ends its connection,
	// with a log line.
	MaxRequestEntries int
	// MaxConnections bounds the open client connections (Kafka's
	// max.connections; default a quarter of the process's open-file
	// limit, so connections cannot take the descriptors partitions
	// need): at the bound, accepting waits until one closes, as Kafka's
	// acceptor does.
	MaxConnections int
	// IdleTimeout closes a connection with nothing in flight that sent
	// and received nothing for this long, and one whose frame stalls or
	// whose client reads no response for this long (Kafka's
	// connections.max.idle.ms; default 10 minutes).
	IdleTimeout time.Duration
	// FetchMaxBytes caps every fetch response whatever the request asks
	// (Kafka's fetch.max.bytes, default 55 MiB), the first batch aside
	// (a consumer must progress).
	FetchMaxBytes int32
	// MaxPartitions bounds the partitions the server serves: creating
	// more is refused (default a quarter of the process's open-file
	// limit: a partition holds a descriptor or two). A directory that
	// already holds more is served.
	MaxPartitions int
	// Logf, if set, receives one line per connection error.
	Logf func(format string, args ...any)
	// UnsafeMirrorNoBarrier makes mirror stops write no MIRROR_PID_RESET
	// barrier (mirror.Options.UnsafeNoBarrier). For tests and
	// demonstrations of what the barrier prevents only.
	UnsafeMirrorNoBarrier bool
}

// Server is a single-node Kafka-protocol server over a log directory.
type Server struct {
	cfg  Config
	dir  *partlog.Dir
	meta *metaStore // cluster id, producer ids, transactions, topic configs
	// adminToken is what the admin endpoint requires of changes (admin.go).
	adminToken string

	tmu    sync.RWMutex // guards topics
	topics map[string]*topic
	cmu    sync.Mutex // serializes topic creation and deletion

	txns *txnCoordinator

	mmu           sync.Mutex             // serializes mirror starts, stops and Close's end of the links
	mirrorsClosed bool                   // guarded by mmu: Close ended the links
	lmu           sync.RWMutex           // guards links (written under mmu too)
	links         map[string]*mirrorLink // running mirror links by name (mirror.go)
	admin         []*http.Server         // admin endpoints (admin.go); guarded by mu

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards lns, conns, closed
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	// connSlots holds a token per open connection (MaxConnections).
	connSlots chan struct{}
	// fetchSessions counts the open fetch sessions of every connection
	// (fetch_session.go).
	fetchSessions atomic.Int32

	storageLogMu sync.Mutex // guards storageLog
	storageLog   map[partlog.TopicPartition]storageLogged
	flush        *flusher
}

// Open opens the log directory and the server's state (state.go) and
// completes the transactions a crash left half ended. Serve accepts
// connections; Close shuts everything down.
func Open(cfg Config) (*Server, error) {
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxRequestEntries <= 0 {
		cfg.MaxRequestEntries = 100_000
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = 55 << 20
	}
	if cfg.MaxConnections <= 0 || cfg.MaxPartitions <= 0 {
		quarter := openFileLimit() / 4
		if cfg.MaxConnections <= 0 {
			cfg.MaxConnections = quarter
		}
		if cfg.MaxPartitions <= 0 {
			cfg.MaxPartitions = quarter
		}
	}
	if cfg.Dir == "" {
		return nil, errors.New("partlog/server: no log directory")
	}
	meta, err := openMeta(cfg.Dir)
	if err != nil {
		return nil, err
	}
	for _, w := range meta.warnings {
		if cfg.Logf != nil {
			cfg.Logf("%s", w)
		}
	}
	token, err := loadAdminToken(cfg.Dir)
	if err != nil {
		return nil, err
	}
	var tmpl partlog.Options
	if cfg.Log != nil {
		tmpl = *cfg.Log
	}
	if tmpl.MessageTimestampAfterMaxMs == 0 {
		// Kafka's log.message.timestamp.after.max.ms is one hour since
		// 4.0 (the engine's default is unbounded, as the field's zero).
		tmpl.MessageTimestampAfterMaxMs = kafkaTimestampAfterMaxMs
	}
	if cfg.Fsync && tmpl.PrefaultBytes == 0 {
		// Every partition is synced from its first append on (acks=-1
		// at once, acks=0/1 by the flusher), so pages populated ahead
		// of its writer are only dirty zeros for those fdatasyncs to
		// write out: a --fsync server populates nothing (bench/RESULTS.md,
		// serve --fsync without a prefault window).
		tmpl.PrefaultBytes = -1
	}
	cfg.Log = &tmpl // the template every topic's options start from
	dir, err := partlog.OpenDir(cfg.Dir, &partlog.DirOptions{
		Log:        &tmpl,
		Quarantine: cfg.Quarantine,
		PartitionOptions: func(tp partlog.TopicPartition) *partlog.Options {
			o, _ := topicOptions(tmpl, meta.topicConfigs(tp.Topic))
			return &o
		},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, dir: dir, meta: meta, adminToken: token, topics: map[string]*topic{}, ctx: ctx, cancel: cancel,
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}, links: map[string]*mirrorLink{},
		connSlots: make(chan struct{}, cfg.MaxConnections), storageLog: map[partlog.TopicPartition]storageLogged{}}
	s.flush = newFlusher(s)
	if err := s.loadTopics(); err != nil {
		cancel()
		s.flush.stop()
		return nil, errors.Join(err, dir.Close())
	}
	s.txns = newTxnCoordinator(s)
	if err := s.txns.recover(); err != nil {
		cancel()
		s.flush.stop()
		return nil, errors.Join(err, dir.Close())
	}
	if err := s.resumeMirrors(); err != nil {
		s.closeLinks()
		cancel()
		s.flush.stop()
		return nil, errors.Join(err, dir.Close())
	}
	s.wg.Add(1)
	go s.housekeeping()
	return s, nil
}

// Dir returns the open log directory.
func (s *Server) Dir() *partlog.Dir { return s.dir }

// Serve accepts connections on ln until Close (it then returns nil) or
// until accepting fails for good. A failure that passes (too many open
// files, a connection reset before it was accepted) is logged and
// retried after a pause growing from 5 ms to 1 s, as net/http does; at
// Config.MaxConnections open connections it waits for one to close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ln.Close()
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	var pause time.Duration
	for {
		select {
		case s.connSlots <- struct{}{}:
		case <-s.ctx.Done():
			s.mu.Lock()
			delete(s.lns, ln)
			s.mu.Unlock()
			return nil
		}
		c, err := ln.Accept()
		if err != nil {
			<-s.connSlots
			s.mu.Lock()
			closed := s.closed
			if closed || !acceptRetriable(err) {
				delete(s.lns, ln)
			}
			s.mu.Unlock()
			if closed {
				return nil
			}
			if !acceptRetriable(err) {
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.logf("accept: %v; retrying in %v", err, pause)
			sleep(s.ctx, pause) // cut short by Close: the next round returns
			continue
		}
		pause = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			<-s.connSlots
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			<-s.connSlots
		}()
	}
}

// Close stops accepting, closes every connection, waits for the
// requests in progress, and closes the log directory (flushed, with its
// checkpoints and clean-shutdown marker).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	for _, hs := range s.admin {
		_ = hs.Close()
	}
	s.mu.Unlock()
	// Cancel first: a start waiting for its source ends now; a running
	// stop ignores the cancel (its steps must finish) and closeLinks
	// waits for it.
	s.cancel()
	s.closeLinks()
	s.wg.Wait()
	s.flush.stop()
	return errors.Join(s.meta.flush(), s.dir.Close())
}

// closeLinks stops every mirror fetch loop (their partitions stay
// MIRRORING on disk and fetch again after the next Open). It waits for a
// running start or stop first, so a shutdown does not cut a stop short
// (that would leave its partitions FAILED); later ones are refused.
func (s *Server) closeLinks() {
	s.mmu.Lock()
	defer s.mmu.Unlock()
	s.mirrorsClosed = true
	s.lmu.Lock()
	links := s.links
	s.links = map[string]*mirrorLink{}
	s.lmu.Unlock()
	for _, l := range links {
		l.close()
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// housekeeping is the server's one timer: transaction timeouts every
// tick; producer expiry, retention and checkpoints every minute.
func (s *Server) housekeeping() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	last := s.cfg.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.txns.abortExpired()
		s.txns.retryPrepared()
		if now := s.cfg.Now(); now.Sub(last) >= time.Minute {
			last = now
			for _, l := range s.dir.Logs() {
				l.ExpireProducers()
				if _, err := l.DeleteOldSegments(now); err != nil {
					s.logf("retention %s: %v", l.Dir(), err)
				}
			}
			if err := s.dir.Checkpoint(); err != nil {
				s.logf("checkpoint: %v", err)
			}
		}
	}
}

// handled is a handler's answer: a response now, or a function that
// produces it later (on its own goroutine), or none (acks=0).
type handled struct {
	resp       kmsg.Response
	wait       func(ctx context.Context) kmsg.Response
	release    func()
	noResponse bool
}

func now(r kmsg.Response) handled { return handled{resp: r} }

func (s *Server) handle(ctx context.Context, cc *connCtx, req kmsg.Request) handled {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		return now(s.apiVersions(r))
	case *kmsg.MetadataRequest:
		return now(s.metadata(cc, r))
	case *kmsg.CreateTopicsRequest:
		return now(s.createTopics(r))
	case *kmsg.DeleteTopicsRequest:
		return now(s.deleteTopics(r))
	case *kmsg.CreatePartitionsRequest:
		return now(s.createPartitions(r))
	case *kmsg.DescribeConfigsRequest:
		return now(s.describeConfigs(r))
	case *kmsg.WriteTxnMarkersRequest:
		return now(s.writeTxnMarkers(r))
	case *kmsg.DescribeLogDirsRequest:
		return now(s.describeLogDirs(r))
	case *kmsg.DeleteRecordsRequest:
		return now(s.deleteRecords(r))
	case *kmsg.DescribeProducersRequest:
		return now(s.describeProducers(r))
	case *kmsg.DescribeTopicPartitionsRequest:
		return now(s.describeTopicPartitions(r))
	case *kmsg.DescribeClusterRequest:
		return now(s.describeCluster(cc, r))
	case *kmsg.DescribeTransactionsRequest:
		return now(s.txns.describeTransactions(r))
	case *kmsg.ListTransactionsRequest:
		return now(s.txns.listTransactions(r))
	case *kmsg.IncrementalAlterConfigsRequest:
		return now(s.incrementalAlterConfigs(r))
	case *kmsg.AlterConfigsRequest:
		return now(s.alterConfigs(r))
	case *kmsg.ProduceRequest:
		return s.produce(r)
	case *kmsg.FetchRequest:
		return s.fetch(cc, r)
	case *kmsg.ListOffsetsRequest:
		return now(s.listOffsets(r))
	case *kmsg.OffsetForLeaderEpochRequest:
		return now(s.offsetForLeaderEpoch(r))
	case *kmsg.FindCoordinatorRequest:
		return now(s.findCoordinator(cc, r))
	case *kmsg.InitProducerIDRequest:
		return now(s.txns.initProducerID(r))
	case *kmsg.AddPartitionsToTxnRequest:
		return now(s.txns.addPartitions(r))
	case *kmsg.AddOffsetsToTxnRequest:
		return now(s.txns.addOffsets(r))
	case *kmsg.EndTxnRequest:
		return now(s.txns.endTxn(r))
	case *kmsg.TxnOffsetCommitRequest:
		return now(s.txns.txnOffsetCommit(r))
	}
	if g := s.cfg.Groups; g != nil && isGroupKey(req.Key()) {
		if resp := s.unknownGroupPartitions(req); resp != nil {
			return now(resp)
		}
		clientID, host := cc.clientID, cc.clientHost()
		return handled{wait: func(ctx context.Context) kmsg.Response {
			if s.cfg.GroupContext != nil {
				ctx = s.cfg.GroupContext(ctx, clientID, host)
			}
			resp, ok := g.Handle(ctx, req)
			if !ok || resp == nil {
				return s.unsupported(req, req.Key(), req.GetVersion())
			}
			return resp
		}}
	}
	return now(s.unsupported(req, req.Key(), req.GetVersion()))
}

func apiName(key int16) string {
	if name := kmsg.NameForKey(key); name != "" {
		return name
	}
	return "api " + strconv.Itoa(int(key))
}
