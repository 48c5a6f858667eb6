package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
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
	// AutoCreate creates a topic on its first Metadata or Produce
	// request, with DefaultPartitions partitions (Kafka's
	// auto.create.topics.enable and num.partitions).
	AutoCreate        bool
	DefaultPartitions int32
	// Fsync makes the high watermark follow the durable offsets: an
	// acks=-1 produce is answered once its records are on disk (group
	// commit through Log.Sync), and consumers see only what is durable.
	Fsync bool
	// NodeID is this node's broker id (default 0).
	NodeID int32
	// Groups, if set, answers the consumer-group requests; without it
	// they are not advertised and answered UNSUPPORTED_VERSION. The
	// server does not close it.
	Groups GroupHandler
	// Tick is the period of the housekeeping pass (transaction timeouts,
	// producer expiry, retention, checkpoints). Default 1s.
	Tick time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxRequestBytes bounds a request (Kafka's socket.request.max.bytes,
	// default 100 MiB).
	MaxRequestBytes int32
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
	flush  *flusher
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
	if cfg.Dir == "" {
		return nil, errors.New("partlog/server: no log directory")
	}
	meta, err := openMeta(cfg.Dir)
	if err != nil {
		return nil, err
	}
	var tmpl partlog.Options
	if cfg.Log != nil {
		tmpl = *cfg.Log
	}
	dir, err := partlog.OpenDir(cfg.Dir, &partlog.DirOptions{
		Log: &tmpl,
		PartitionOptions: func(tp partlog.TopicPartition) *partlog.Options {
			o, _ := topicOptions(tmpl, meta.topicConfigs(tp.Topic))
			return &o
		},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, dir: dir, meta: meta, topics: map[string]*topic{}, ctx: ctx, cancel: cancel,
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}, links: map[string]*mirrorLink{}}
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
// until accepting fails.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ln.Close()
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			delete(s.lns, ln)
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
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

// pending is one request's answer, written in request order. done is
// closed when resp is ready; resp nil means no response (acks=0).
type pending struct {
	corr     int32
	key      int16
	resp     kmsg.Response
	done     chan struct{}
	release  func()
	flexHead bool
}

// maxInFlight bounds the requests of one connection read ahead of their
// responses.
const maxInFlight = 64

// serveConn reads requests, handles them in order (appends and other
// side effects happen in request order), and a writer goroutine sends
// the responses in the same order, each once it is ready (a produce
// waiting for its sync, a long-poll fetch, a JoinGroup).
func (s *Server) serveConn(c net.Conn) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	q := make(chan *pending, maxInFlight)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writeResponses(c, q, cancel)
	}()
	local, _ := c.LocalAddr().(*net.TCPAddr)
	cc := &connCtx{s: s, local: local}
	r := bufio.NewReaderSize(c, 64<<10)
	var async sync.WaitGroup
	var err error
	for {
		var p *pending
		p, err = s.readRequest(ctx, r, cc, &async)
		if err != nil {
			break
		}
		if p != nil {
			select {
			case q <- p:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, context.Canceled) {
		s.logf("connection %s: %v", c.RemoteAddr(), err)
	}
	cancel()
	async.Wait()
	close(q)
	<-writerDone
	_ = c.Close()
}

func (s *Server) writeResponses(c net.Conn, q <-chan *pending, cancel context.CancelFunc) {
	w := bufio.NewWriterSize(c, 64<<10)
	var buf []byte
	failed := false
	for p := range q {
		<-p.done
		if p.resp != nil && !failed {
			buf = append(buf[:0], 0, 0, 0, 0)
			buf = binary.BigEndian.AppendUint32(buf, uint32(p.corr))
			if p.flexHead {
				buf = append(buf, 0) // empty tagged fields
			}
			buf = p.resp.AppendTo(buf)
			binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
			if _, err := w.Write(buf); err != nil {
				failed = true
				cancel()
			} else if len(q) == 0 {
				if err := w.Flush(); err != nil {
					failed = true
					cancel()
				}
			}
		}
		if p.release != nil {
			p.release()
		}
	}
	if !failed {
		_ = w.Flush()
	}
}

// connCtx is what handlers know of their connection.
type connCtx struct {
	s     *Server
	local *net.TCPAddr // the address the client reached (advertised back)
}

func (cc *connCtx) hostPort() (string, int32) {
	if cc.local == nil {
		return "127.0.0.1", 9092
	}
	return cc.local.IP.String(), int32(cc.local.Port)
}

// errBadRequest ends a connection whose bytes are not a Kafka request.
var errBadRequest = errors.New("partlog/server: malformed request")

// readRequest reads one size-prefixed request, parses its header (v1,
// or v2 with tagged fields for a flexible version) and hands it to its
// handler. A request the server does not implement at that version is
// answered UNSUPPORTED_VERSION (apiversions.go); only bytes that cannot
// be a request end the connection.
func (s *Server) readRequest(ctx context.Context, r *bufio.Reader, cc *connCtx, async *sync.WaitGroup) (*pending, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if size < 8 || size > s.cfg.MaxRequestBytes {
		return nil, fmt.Errorf("%w: size %d", errBadRequest, size)
	}
	msg := make([]byte, size)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	req, corr, body, err := parseRequest(msg)
	if err != nil {
		return nil, err
	}
	key, version := req.Key(), req.GetVersion()
	p := &pending{corr: corr, key: key, done: make(chan struct{})}
	if !s.supported(key, version) {
		_ = req.ReadFrom(body) // best effort: names the topics in the answer
		p.resp = s.unsupported(req, key, version)
		p.flexHead = key != 18 && p.resp.IsFlexible()
		close(p.done)
		return p, nil
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %v", errBadRequest, apiName(key), version, err)
	}
	p.flexHead = key != 18 && req.IsFlexible() // ApiVersions answers with header v0
	h := s.handle(ctx, cc, req)
	if h.noResponse {
		return nil, nil
	}
	p.release = h.release
	if h.wait == nil {
		p.resp = h.resp
		close(p.done)
		return p, nil
	}
	async.Add(1)
	go func() {
		defer async.Done()
		p.resp = h.wait(ctx)
		close(p.done)
	}()
	return p, nil
}

// parseRequest parses a request's header (api key, version,
// correlation id, client id, and for a flexible version its tagged
// fields) and returns the request type at that version, unread, with the
// body after the header.
func parseRequest(msg []byte) (kmsg.Request, int32, []byte, error) {
	if len(msg) < 10 {
		return nil, 0, nil, fmt.Errorf("%w: %d bytes", errBadRequest, len(msg))
	}
	key := int16(binary.BigEndian.Uint16(msg[0:]))
	version := int16(binary.BigEndian.Uint16(msg[2:]))
	corr := int32(binary.BigEndian.Uint32(msg[4:]))
	body := msg[8:]
	n := int16(binary.BigEndian.Uint16(body)) // client id: nullable string
	body = body[2:]
	if n > 0 {
		if int(n) > len(body) {
			return nil, corr, nil, fmt.Errorf("%w: client id past the end", errBadRequest)
		}
		body = body[n:]
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		// No response type to answer with: Kafka closes the connection
		// too.
		return nil, corr, nil, fmt.Errorf("%w: unknown api key %d", errBadRequest, key)
	}
	if version < 0 {
		return nil, corr, nil, fmt.Errorf("%w: version %d", errBadRequest, version)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, corr, nil, err
		}
	}
	return req, corr, body, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: tagged fields", errBadRequest)
	}
	b = b[n:]
	for i := uint64(0); i < count; i++ {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, fmt.Errorf("%w: tag", errBadRequest)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: tag size", errBadRequest)
		}
		b = b[n+int(size):]
	}
	return b, nil
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
	case *kmsg.ProduceRequest:
		return s.produce(r)
	case *kmsg.FetchRequest:
		return s.fetch(r)
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
		return handled{wait: func(ctx context.Context) kmsg.Response {
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
