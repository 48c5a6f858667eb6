package server

import (
	"math/rand/v2"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227, Fetch v7+), as Kafka's FetchManager keeps
// them: a client's full fetch at epoch 0 opens a session holding its
// partitions and their fetch parameters; its next fetches carry the
// session's id and the next epoch and name only the partitions whose
// parameters changed (and the ones it forgets), and the answer holds
// only the partitions with records, a new high watermark or log start
// offset, or an error. A consumer of 1 000 partitions otherwise sends
// and is sent all 1 000 with every fetch: in a serve profile of an
// end-to-end load over 1 000 partitions, building and answering those
// was most of the CPU, and the consumer decodes them all too.
//
//   - Epoch -1 (with any session id): no session; a session named is
//     closed first.
//   - Epoch 0: a full fetch; a session named is closed, and a new one
//     is opened with the answer (its id in the response), unless the
//     connection or the server holds their most (then id 0: the client
//     goes on with full fetches).
//   - Epoch n > 0: the session must exist (else FETCH_SESSION_ID_NOT_FOUND)
//     and expect n (else INVALID_FETCH_SESSION_EPOCH); it then expects
//     n+1 (after 2^31-1, 1). A session left with no partition is closed
//     and the fetch answered without one.
//
// Sessions belong to their connection and end with it (a client that
// reconnects opens a new one: Kafka's clients do after a disconnection),
// at most maxConnFetchSessions a connection and maxFetchSessions a
// server, each of at most Config.MaxRequestEntries partitions (a request
// that would grow one past that closes it: FETCH_SESSION_ID_NOT_FOUND,
// and the client's full fetch is bounded as any request is). As in
// Kafka, partitions answered with records move to the end of the
// session's order, so that a response filled up by some partitions does
// not starve the others.

// Session bounds: Kafka's max.incremental.fetch.session.cache.slots for
// the server; a client opens one session per broker connection.
const (
	maxFetchSessions     = 1000
	maxConnFetchSessions = 4
)

// Fetch session errors.
const (
	errInvalidFetchSessionEpoch int16 = 71
)

// fetchSession is one open session.
type fetchSession struct {
	id int32
	// mu guards every field below: the reader's next request and a long
	// poll's answer. It is taken before connSessions.mu, never after.
	mu sync.Mutex
	// epoch is the epoch the next request must carry.
	epoch int32
	// parts is the session's partitions in the order they are read;
	// at indexes them.
	parts []*sessionPart
	at    map[sessionKey]*sessionPart
}

// sessionKey names a partition of a session as its requests do: by
// topic name up to Fetch v12, by topic id from v13 (the name is then
// empty), both in every key so one type serves all versions.
type sessionKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// sessionPart is a partition of a session: the fetch parameters its
// client last sent, and what the session last answered of it.
type sessionPart struct {
	topic string
	id    [16]byte // Fetch v13+: the topic's id
	req   kmsg.FetchRequestTopicPartition
	// hw and logStart are the high watermark and log start offset last
	// answered; -1 makes the next answer include the partition.
	hw, logStart int64
	gone         bool // forgotten: dropped from parts
}

// connSessions are a connection's fetch sessions.
type connSessions struct {
	mu sync.Mutex // guards m: the reader opens and closes, a long poll's answer opens
	m  map[int32]*fetchSession
}

// sessionFetch is how one fetch request reads: its partitions, and the
// session it updates or opens when answered.
type sessionFetch struct {
	wants   []fetchWant
	session *fetchSession // incremental: the session answered from
	open    bool          // a full fetch at epoch 0: open a session with the answer
	errCode int16         // a session error: answered with it alone
}

// nextEpoch is the epoch after e (Kafka's FetchMetadata.nextEpoch).
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// beginFetch resolves req's session: the partitions it reads, and what
// its answer does to the session.
func (cc *connCtx) beginFetch(req *kmsg.FetchRequest) sessionFetch {
	if req.Version < 7 {
		return sessionFetch{wants: fetchWants(req)}
	}
	if req.SessionEpoch <= 0 {
		if req.SessionID != 0 {
			cc.closeSession(req.SessionID)
		}
		return sessionFetch{wants: fetchWants(req), open: req.SessionEpoch == 0}
	}
	cc.sessions.mu.Lock()
	fs := cc.sessions.m[req.SessionID]
	cc.sessions.mu.Unlock()
	if fs == nil {
		return sessionFetch{errCode: errFetchSessionIDNotFound}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.epoch != req.SessionEpoch {
		return sessionFetch{errCode: errInvalidFetchSessionEpoch}
	}
	if !fs.update(req, cc.s.cfg.MaxRequestEntries) {
		cc.closeSession(fs.id)
		return sessionFetch{errCode: errFetchSessionIDNotFound}
	}
	if len(fs.parts) == 0 {
		cc.closeSession(fs.id)
		return sessionFetch{}
	}
	fs.epoch = nextEpoch(fs.epoch)
	// The reads use copies of the parameters: a request pipelined
	// behind this one may change the session while this one long-polls.
	wants := make([]fetchWant, len(fs.parts))
	topics := make([]kmsg.FetchRequestTopic, len(fs.parts))
	reqs := make([]kmsg.FetchRequestTopicPartition, len(fs.parts))
	for i, p := range fs.parts {
		topics[i].Topic, topics[i].TopicID = p.topic, p.id
		reqs[i] = p.req
		wants[i] = fetchWant{rt: &topics[i], rp: &reqs[i]}
	}
	return sessionFetch{wants: wants, session: fs}
}

// update applies an incremental request to the session: its partitions
// are added or their parameters replaced, its forgotten ones removed.
// It reports false when the session would hold more than limit
// partitions.
func (fs *fetchSession) update(req *kmsg.FetchRequest, limit int) bool {
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := rt.Partitions[j]
			k := sessionKey{rt.Topic, rt.TopicID, rp.Partition}
			if p := fs.at[k]; p != nil {
				p.req = rp
				continue
			}
			if len(fs.parts) >= limit {
				return false
			}
			p := &sessionPart{topic: rt.Topic, id: rt.TopicID, req: rp, hw: -1, logStart: -1}
			fs.at[k] = p
			fs.parts = append(fs.parts, p)
		}
	}
	removed := false
	for _, ft := range req.ForgottenTopics {
		for _, n := range ft.Partitions {
			k := sessionKey{ft.Topic, ft.TopicID, n}
			if p := fs.at[k]; p != nil {
				delete(fs.at, k)
				p.gone = true
				removed = true
			}
		}
	}
	if removed {
		kept := fs.parts[:0]
		for _, p := range fs.parts {
			if !p.gone {
				kept = append(kept, p)
			}
		}
		clear(fs.parts[len(kept):])
		fs.parts = kept
	}
	return true
}

// finishFetch completes resp, the answer to the request sf began: a
// session error alone, or the session's id, with an incremental answer
// cut to the partitions that must be answered and the session updated,
// or a full answer that opens a session.
func (cc *connCtx) finishFetch(sf sessionFetch, resp *kmsg.FetchResponse) {
	switch {
	case sf.errCode != errNone:
		resp.ErrorCode = sf.errCode
		resp.Topics = nil
	case sf.session != nil:
		sf.session.answer(resp)
		resp.SessionID = sf.session.id
	case sf.open:
		resp.SessionID = cc.openSession(sf.wants, resp)
	}
}

// answer keeps in resp the partitions the client must be told about:
// those with records, a high watermark or log start offset other than
// the last answered, or an error (Kafka's
// CachedPartition.maybeUpdateResponseData), and moves the ones with
// records to the end of the session's order.
func (fs *fetchSession) answer(resp *kmsg.FetchResponse) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var moved []*sessionPart
	topics := resp.Topics[:0]
	for _, t := range resp.Topics {
		parts := t.Partitions[:0]
		for _, rp := range t.Partitions {
			p := fs.at[sessionKey{t.Topic, t.TopicID, rp.Partition}]
			if p == nil { // forgotten by a request pipelined behind this one
				continue
			}
			must := len(rp.RecordBatches) > 0 || rp.ErrorCode != errNone ||
				rp.HighWatermark != p.hw || rp.LogStartOffset != p.logStart
			if !must {
				continue
			}
			p.hw, p.logStart = rp.HighWatermark, rp.LogStartOffset
			if rp.ErrorCode != errNone {
				p.hw = -1 // answered again once the error is gone
			}
			if len(rp.RecordBatches) > 0 {
				moved = append(moved, p)
			}
			parts = append(parts, rp)
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	resp.Topics = topics
	if len(moved) == 0 {
		return
	}
	last := make(map[*sessionPart]bool, len(moved))
	for _, p := range moved {
		last[p] = true
	}
	kept := fs.parts[:0:0]
	for _, p := range fs.parts {
		if !last[p] {
			kept = append(kept, p)
		}
	}
	fs.parts = append(kept, moved...)
}

// openSession opens a session of the partitions a full fetch read, as
// resp answers them, and returns its id; 0 when the connection or the
// server holds as many sessions as they may.
func (cc *connCtx) openSession(wants []fetchWant, resp *kmsg.FetchResponse) int32 {
	if len(wants) == 0 || len(wants) > cc.s.cfg.MaxRequestEntries {
		return 0
	}
	cc.sessions.mu.Lock()
	defer cc.sessions.mu.Unlock()
	if len(cc.sessions.m) >= maxConnFetchSessions {
		return 0
	}
	if n := cc.s.fetchSessions.Add(1); n > maxFetchSessions {
		cc.s.fetchSessions.Add(-1)
		return 0
	}
	fs := &fetchSession{epoch: 1, at: make(map[sessionKey]*sessionPart, len(wants)), parts: make([]*sessionPart, 0, len(wants))}
	for _, w := range wants {
		k := sessionKey{w.rt.Topic, w.rt.TopicID, w.rp.Partition}
		if fs.at[k] != nil {
			continue
		}
		p := &sessionPart{topic: w.rt.Topic, id: w.rt.TopicID, req: *w.rp, hw: -1, logStart: -1}
		fs.at[k] = p
		fs.parts = append(fs.parts, p)
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if p := fs.at[sessionKey{t.Topic, t.TopicID, rp.Partition}]; p != nil && rp.ErrorCode == errNone {
				p.hw, p.logStart = rp.HighWatermark, rp.LogStartOffset
			}
		}
	}
	if cc.sessions.m == nil {
		cc.sessions.m = map[int32]*fetchSession{}
	}
	for fs.id == 0 || cc.sessions.m[fs.id] != nil {
		fs.id = rand.Int32()
	}
	cc.sessions.m[fs.id] = fs
	return fs.id
}

// closeSession closes the connection's session id, if open.
func (cc *connCtx) closeSession(id int32) {
	cc.sessions.mu.Lock()
	defer cc.sessions.mu.Unlock()
	if _, ok := cc.sessions.m[id]; ok {
		delete(cc.sessions.m, id)
		cc.s.fetchSessions.Add(-1)
	}
}

// closeSessions closes every session of the connection (it ended).
func (cc *connCtx) closeSessions() {
	cc.sessions.mu.Lock()
	defer cc.sessions.mu.Unlock()
	cc.s.fetchSessions.Add(-int32(len(cc.sessions.m)))
	cc.sessions.m = nil
}
