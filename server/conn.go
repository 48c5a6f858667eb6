package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// A connection reads requests in order and handles them in order, so
// appends happen in request order; a writer goroutine sends the
// responses in the same order, each once ready (a produce waiting for
// its sync, a long-poll fetch, a JoinGroup), up to maxInFlight requests
// ahead of the writes.
//
// What one client can hold is bounded:
//
//  1. A frame is at most Config.MaxRequestBytes (Kafka's
//     socket.request.max.bytes), and its buffer grows with the bytes that
//     arrive, never to the declared size before they do: a slow or lying
//     client holds at most frameGrowth times what it sent, 64 KiB at
//     least (and makes about 8/7 of that allocated on the way). (It
//     starts as the buffer of the connection's last Produce frame when
//     there is one: a size the client sent before. One larger than
//     retainedRequestBytes is kept only while frames keep coming, at
//     most largeFrameKeep apart.)
//  2. A frame's body must keep arriving: no byte for Config.IdleTimeout
//     ends the connection. Between frames, a connection with nothing in
//     flight and no byte read or written for IdleTimeout is closed
//     (Kafka's connections.max.idle.ms); a response the client does not
//     read for IdleTimeout ends it too.
//  3. The body is walked before it is decoded (request_shapes.go): no
//     count is allocated beyond the bytes present, and at most
//     Config.MaxRequestEntries array entries and tagged fields are.
//  4. A response buffer larger than retainedResponseBytes is dropped once
//     written, so a connection does not keep a large fetch's buffer.

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

// retainedResponseBytes is the largest response buffer a connection
// keeps for its next response.
const retainedResponseBytes = 1 << 20

// retainedRequestBytes is the largest Produce frame buffer a connection
// keeps for its next frame however long that takes: a producer's
// requests are mostly alike, and a new buffer per frame, grown as the
// bytes arrived, was a large share of partlog serve's CPU under a
// producer (bench/RESULTS.md, retainedRequestBytes). The largest request
// of Kafka's Java producer (max.request.size, 1 MiB) and of kgo (a 1 MB
// batch) fit.
const retainedRequestBytes = 1<<20 + 64<<10

// largeFrameKeep is how long a connection keeps a Produce frame buffer
// larger than retainedRequestBytes waiting for the next frame: a client
// sending large requests (a large batch.size or max.request.size) sends
// them back to back and reuses it, while a connection gone quiet lets it
// go.
const largeFrameKeep = time.Second

// unsupportedDecodeBytes is the largest body of a request without a
// shape that is decoded, best effort, to name its topics in an
// UNSUPPORTED_VERSION answer: kmsg may allocate tens of times its size.
const unsupportedDecodeBytes = 16 << 10

// connCtx is one client connection, as its handlers know it.
type connCtx struct {
	s     *Server
	c     net.Conn
	local *net.TCPAddr // the address the client reached (advertised back)
	// inFlight counts the requests read whose response is not written
	// yet (a long poll is not idleness).
	inFlight atomic.Int32
	// lastWrite is when the writer last wrote (unix nanoseconds).
	lastWrite atomic.Int64
	// wbuf is the writer's response buffer, kept between responses
	// unless larger than retainedResponseBytes (writer goroutine only).
	wbuf []byte
	// clientID is the client id of the request being handled (set by
	// the read loop before each call of handle).
	clientID string
	// sessions are the connection's fetch sessions (fetch_session.go).
	sessions connSessions
	// spare is the buffer of the last Produce frame, free once the
	// request was handled (its batches are copied into the logs; nothing
	// of a Produce request is kept past its handler): the next frame is
	// read into it. Only the reading goroutine uses it.
	spare []byte
}

// clientHost is the client's address as Kafka shows it in
// DescribeGroups ("/" and the IP, Java's InetAddress.toString).
func (cc *connCtx) clientHost() string {
	if a, ok := cc.c.RemoteAddr().(*net.TCPAddr); ok {
		return "/" + a.IP.String()
	}
	return ""
}

// clientIDOf returns the client id of a request's header (parseRequest
// has checked it lies inside msg).
func clientIDOf(msg []byte) string {
	n := int(int16(binary.BigEndian.Uint16(msg[8:])))
	if n <= 0 || 10+n > len(msg) {
		return ""
	}
	return string(msg[10 : 10+n])
}

// serveConn reads requests, handles them in order (appends and other
// side effects happen in request order), and a writer goroutine sends
// the responses in the same order.
func (s *Server) serveConn(c net.Conn) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	local, _ := c.LocalAddr().(*net.TCPAddr)
	cc := &connCtx{s: s, c: c, local: local}
	cc.lastWrite.Store(time.Now().UnixNano())
	q := make(chan *pending, maxInFlight)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		cc.writeResponses(q, cancel)
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	var async sync.WaitGroup
	var err error
	for {
		var p *pending
		p, err = cc.readRequest(ctx, r, &async)
		if err != nil {
			break
		}
		if p != nil {
			cc.inFlight.Add(1)
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
	cc.closeSessions()
	_ = c.Close()
}

func (cc *connCtx) writeResponses(q <-chan *pending, cancel context.CancelFunc) {
	w := bufio.NewWriterSize(cc.c, 64<<10)
	var sp splicer
	failed := false
	for p := range q {
		<-p.done
		if p.resp != nil && !failed {
			// A Fetch response's large record bytes are written from
			// their mappings (fetch_write.go).
			fr, _ := p.resp.(*kmsg.FetchResponse)
			spliced := fr != nil && sp.take(fr)
			buf := appendFrame(cc.wbuf[:0], p)
			if spliced {
				ok := sp.pieces(buf, p.resp.IsFlexible())
				sp.restore()
				if !ok {
					spliced = false
					buf = appendFrame(buf[:0], p)
				}
			}
			// A client that reads nothing for the idle timeout is gone.
			_ = cc.c.SetWriteDeadline(time.Now().Add(cc.s.cfg.IdleTimeout))
			var err error
			switch {
			case spliced:
				// The mapped bytes are written before the views are
				// released below.
				if err = w.Flush(); err == nil {
					_, err = sp.out.WriteTo(cc.c)
				}
			default:
				if _, err = w.Write(buf); err == nil && len(q) == 0 {
					err = w.Flush()
				}
			}
			if err != nil {
				failed = true
				cancel()
			}
			cc.lastWrite.Store(time.Now().UnixNano())
			cc.wbuf = buf
			if cap(buf) > retainedResponseBytes {
				cc.wbuf = nil
			}
		}
		cc.inFlight.Add(-1)
		if p.release != nil {
			p.release()
		}
	}
	if !failed {
		_ = w.Flush()
	}
}

// appendFrame appends p's response frame: its size, the correlation id,
// the header's tagged fields for a flexible version, the body.
func appendFrame(buf []byte, p *pending) []byte {
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(p.corr))
	if p.flexHead {
		buf = append(buf, 0) // empty tagged fields
	}
	buf = p.resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

func (cc *connCtx) hostPort() (string, int32) {
	if cc.local == nil {
		return "127.0.0.1", 9092
	}
	return cc.local.IP.String(), int32(cc.local.Port)
}

// errBadRequest ends a connection whose bytes are not a Kafka request.
var errBadRequest = errors.New("partlog/server: malformed request")

// errIdle ends a connection idle for Config.IdleTimeout.
var errIdle = errors.New("partlog/server: idle connection closed")

// waitFrame waits for the next frame's size: a connection with requests
// in flight, or written to lately, is not idle.
func (cc *connCtx) waitFrame(r *bufio.Reader) error {
	idle := cc.s.cfg.IdleTimeout
	for {
		wait := idle
		if cap(cc.spare) > retainedRequestBytes {
			wait = min(wait, largeFrameKeep)
		}
		if err := cc.c.SetReadDeadline(time.Now().Add(wait)); err != nil {
			return err
		}
		_, err := r.Peek(4)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if wait < idle {
			cc.spare = nil // quiet: the large buffer goes, the wait goes on
			continue
		}
		last := time.Unix(0, cc.lastWrite.Load())
		if cc.inFlight.Load() == 0 && time.Since(last) >= idle && r.Buffered() == 0 {
			return fmt.Errorf("%w (nothing for %v)", errIdle, idle)
		}
		if r.Buffered() > 0 {
			// A frame began and stalled within its size.
			return fmt.Errorf("%w: no byte of the frame's size for %v", errBadRequest, idle)
		}
	}
}

// frameGrowth is the factor by which readFrame grows a frame's buffer
// once the bytes received fill it. A client that announces a large frame
// and sends it slowly holds at most frameGrowth times what it sent
// (Kafka allocates the announced size at once); a frame grown from
// 64 KiB is copied between a seventh and 8/7 of its size on the way,
// against once to twice its size when doubling (bench/RESULTS.md,
// frameGrowth).
const frameGrowth = 8

// readFrame reads a frame's body of size bytes, growing its buffer as
// the bytes arrive (from the spare Produce frame buffer, if any); each
// read must bring a byte within the idle timeout.
func (cc *connCtx) readFrame(r *bufio.Reader, size int) ([]byte, error) {
	msg := cc.spare[:0]
	cc.spare = nil
	if cap(msg) == 0 {
		msg = make([]byte, 0, min(size, 64<<10))
	}
	for len(msg) < size {
		if len(msg) == cap(msg) {
			// Exactly frameGrowth times, or the frame's size: append's
			// growth rounds up (a 1 MB frame's buffer ended at 1.2 MiB,
			// past retainedRequestBytes, so no frame's buffer was kept).
			grown := make([]byte, len(msg), int(min(int64(size), frameGrowth*int64(cap(msg)))))
			copy(grown, msg)
			msg = grown
		}
		if err := cc.c.SetReadDeadline(time.Now().Add(cc.s.cfg.IdleTimeout)); err != nil {
			return nil, err
		}
		n, err := r.Read(msg[len(msg):min(cap(msg), size)])
		msg = msg[:len(msg)+n]
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, fmt.Errorf("%w: %d of %d bytes, then nothing for %v", errBadRequest, len(msg), size, cc.s.cfg.IdleTimeout)
			}
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return msg, nil
}

// readRequest reads one size-prefixed request, parses its header (v1,
// or v2 with tagged fields for a flexible version) and hands it to its
// handler. A request the server does not implement at that version is
// answered UNSUPPORTED_VERSION (versions.go); only bytes that cannot be
// a request, or a request past the server's bounds, end the connection.
func (cc *connCtx) readRequest(ctx context.Context, r *bufio.Reader, async *sync.WaitGroup) (*pending, error) {
	s := cc.s
	if err := cc.waitFrame(r); err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if size < 8 || size > s.cfg.MaxRequestBytes {
		return nil, fmt.Errorf("%w: size %d (socket.request.max.bytes %d)", errBadRequest, size, s.cfg.MaxRequestBytes)
	}
	msg, err := cc.readFrame(r, int(size))
	if err != nil {
		return nil, err
	}
	req, corr, body, err := parseRequest(msg)
	if err != nil {
		return nil, err
	}
	key, version := req.Key(), req.GetVersion()
	_, shaped, shapeErr := checkRequestShape(key, version, body, s.cfg.MaxRequestEntries)
	p := &pending{corr: corr, key: key, done: make(chan struct{})}
	if !s.supported(key, version) {
		// Best effort: the body names the topics of the answer.
		if (shaped && shapeErr == nil) || (!shaped && len(body) <= unsupportedDecodeBytes) {
			_ = req.ReadFrom(body)
		}
		p.resp = s.unsupported(req, key, version)
		p.flexHead = key != 18 && p.resp.IsFlexible()
		close(p.done)
		return p, nil
	}
	if shapeErr != nil {
		return nil, fmt.Errorf("%s v%d: %w", apiName(key), version, shapeErr)
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %v", errBadRequest, apiName(key), version, err)
	}
	p.flexHead = key != 18 && req.IsFlexible() // ApiVersions answers with header v0
	cc.clientID = clientIDOf(msg)
	h := s.handle(ctx, cc, req)
	if key == 0 {
		cc.spare = msg // a Produce request is done with its frame once handled
	}
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

// acceptRetriable reports whether an accept failure passes: the process
// or the system ran out of descriptors or buffers, or the connection
// went away before it was accepted.
func acceptRetriable(err error) bool {
	for _, e := range []error{unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM, unix.ECONNABORTED,
		unix.ECONNRESET, unix.EPERM, unix.EPROTO, unix.EINTR, unix.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// openFileLimit is the process's open-file limit (1 024 when it cannot
// be read; Go raises the soft limit to the hard one at start).
func openFileLimit() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return int(min(lim.Cur, 1<<24))
}
