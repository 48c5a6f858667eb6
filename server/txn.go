package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxTxnTimeout is Kafka's transaction.max.timeout.ms default.
const maxTxnTimeout = 15 * time.Minute

// coordinatorEpoch is written in every marker: this node is the only
// transaction coordinator the logs have.
const coordinatorEpoch int32 = 0

// txnCoordinator is the transaction coordinator. Its state is the
// metaStore's transactions (persisted at every change); mu serializes
// every transaction operation, so a marker write never races another
// change of the same transaction, and a transactional produce that must
// be checked against the coordinator (the first batch of a transaction
// on a partition) appends under it, so no end of the transaction falls
// between the check and the append.
//
// The rules are those of Kafka's TransactionCoordinator and
// TransactionMetadata, state by state: InitProducerId bumps the epoch of
// an idle transactional id (or, when it is exhausted, hands out a new
// producer id), fences and aborts an open transaction and answers
// CONCURRENT_TRANSACTIONS so that the client retries, and answers a
// retry of a bump (KIP-360: the previous epoch named) with the epoch it
// gave; EndTxn is refused in Empty, answered again in the completed
// state it asks for, and with transaction version 2 (EndTxn v5) bumps the
// epoch at every end, the markers written at the bumped epoch. A
// transaction that outlives its timeout is aborted the same way (the
// epoch bumped, the markers at it). Unlike Kafka, the markers are
// written before EndTxn answers, so a completed transaction is never
// seen in PrepareCommit or PrepareAbort unless a marker write failed.
type txnCoordinator struct {
	s  *Server
	mu sync.Mutex
}

func newTxnCoordinator(s *Server) *txnCoordinator { return &txnCoordinator{s: s} }

// epochExhausted: an epoch this high is not handed to a client, so that
// a coordinator can always bump it once more to fence (Kafka's
// TransactionMetadata.isEpochExhausted).
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// recover runs at open: producer ids are moved past every id the logs
// hold, and the transactions a crash left in PrepareCommit or
// PrepareAbort are completed (their markers written again: a marker for
// a producer without an open transaction changes nothing).
func (c *txnCoordinator) recover() error {
	maxPID := int64(-1)
	for _, l := range c.s.dir.Logs() {
		for _, e := range l.Producers() {
			if e.ProducerID <= maxClientProducerID {
				maxPID = max(maxPID, e.ProducerID)
			}
		}
	}
	readOnly := c.s.dir.ReadOnly()
	if err := c.s.meta.avoidProducerIDs(maxPID); err != nil {
		if readOnly == nil {
			return err
		}
		// A read-only directory hands out no producer id that could be
		// used: produces are refused.
		c.s.logf("producer ids: %v (the log directory is read-only)", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var prepared []string
	c.s.meta.view(func(st *metaState) {
		for id, t := range st.Transactions {
			if t.State == txnPrepareCommit || t.State == txnPrepareAbort {
				prepared = append(prepared, id)
			}
		}
	})
	slices.Sort(prepared)
	for _, id := range prepared {
		if err := c.completeLocked(id); err != nil {
			if errors.Is(err, mirror.ErrReadOnly) || readOnly != nil {
				// A partition of the transaction mirrors (its markers were
				// refused before the restart too): the transaction stays
				// prepared and the housekeeping tick completes it once the
				// mirror is stopped. Refusing to open would leave the
				// server unable to start until then.
				c.s.logf("complete transaction %q: %v (left prepared)", id, err)
				continue
			}
			return fmt.Errorf("partlog/server: complete transaction %q: %w", id, err)
		}
	}
	return nil
}

func (c *txnCoordinator) nowMs() int64 { return c.s.cfg.Now().UnixMilli() }

// get returns a copy of a transaction's state.
func (c *txnCoordinator) get(id string) (txnState, bool) {
	var t txnState
	var ok bool
	c.s.meta.view(func(st *metaState) {
		var p *txnState
		if p, ok = st.Transactions[id]; ok {
			t = *p
			t.Partitions = slices.Clone(p.Partitions)
			t.Groups = slices.Clone(p.Groups)
		}
	})
	return t, ok
}

func (c *txnCoordinator) put(id string, t txnState) error {
	t.V = 1
	return c.s.meta.update(func(st *metaState) { st.Transactions[id] = &t })
}

// transition records a change of t: the producer id it had becomes the
// previous one (Kafka's TxnTransitMetadata), and the update time moves.
func (c *txnCoordinator) transition(t *txnState, pid int64) {
	t.PrevProducerID = t.ProducerID
	t.ProducerID = pid
	t.UpdateMs = c.nowMs()
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for a request
// version that predates it (fencedFrom).
func fencedCode(version, fencedFrom int16) int16 {
	if version < fencedFrom {
		return errInvalidProducerEpoch
	}
	return errProducerFenced
}

func (c *txnCoordinator) initProducerID(req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version = req.Version
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	fail := func(code int16) kmsg.Response { resp.ErrorCode = code; return resp }
	if req.TransactionalID == nil {
		// Idempotent producer: a fresh id every time (KIP-360's bump of
		// an idempotent producer gets a new id as well).
		pid, err := c.s.meta.allocProducerID()
		if err != nil {
			return fail(partlog.KafkaErrorCode(err))
		}
		resp.ProducerID, resp.ProducerEpoch = pid, 0
		return resp
	}
	if *req.TransactionalID == "" {
		return fail(errInvalidRequest)
	}
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > maxTxnTimeout {
		return fail(errInvalidTransactionTimeout)
	}
	// KIP-360 (v3+): the producer names the id and epoch it had.
	expected := req.Version >= 3 && req.ProducerID >= 0
	if req.Version >= 3 && (req.ProducerID < 0) != (req.ProducerEpoch < 0) {
		return fail(errInvalidRequest)
	}
	id := *req.TransactionalID
	c.mu.Lock()
	defer c.mu.Unlock()
	t, known := c.get(id)
	if !known {
		pid, err := c.s.meta.allocProducerID()
		if err != nil {
			return fail(partlog.KafkaErrorCode(err))
		}
		t = txnState{ProducerID: pid, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: -1, LastProducerEpoch: -1,
			State: txnEmpty, StartMs: -1}
	}
	if t.State == txnPrepareCommit || t.State == txnPrepareAbort {
		// Its markers are still being written (or failed and are
		// retried by the housekeeping tick): the client retries.
		return fail(errConcurrentTransactions)
	}
	if expected && t.ProducerEpoch != -1 && req.ProducerID != t.ProducerID &&
		!(req.ProducerID == t.PrevProducerID && epochExhausted(req.ProducerEpoch)) {
		// A newer producer has taken over the transactional id.
		return fail(fencedCode(req.Version, 4))
	}
	if t.State == txnOngoing {
		// A new session of the transactional id: the open transaction is
		// aborted with the epoch bumped (the old producer is fenced),
		// and the client retries; its retry bumps the epoch again.
		if err := c.fenceLocked(id, &t); err != nil {
			return fail(storageCode(err))
		}
		return fail(errConcurrentTransactions)
	}
	pid := t.ProducerID
	switch {
	case epochExhausted(t.ProducerEpoch) && (!expected || req.ProducerEpoch == t.ProducerEpoch):
		// No epoch left for this id: a new producer id, epoch 0.
		var err error
		if pid, err = c.s.meta.allocProducerID(); err != nil {
			return fail(partlog.KafkaErrorCode(err))
		}
		t.LastProducerEpoch = -1
		if expected {
			t.LastProducerEpoch = t.ProducerEpoch
		}
		t.ProducerEpoch = 0
	case !expected:
		t.ProducerEpoch, t.LastProducerEpoch = t.ProducerEpoch+1, -1
	case t.ProducerEpoch == -1 || req.ProducerEpoch == t.ProducerEpoch:
		t.ProducerEpoch, t.LastProducerEpoch = t.ProducerEpoch+1, t.ProducerEpoch
	case req.ProducerEpoch == t.LastProducerEpoch:
		// A retry of the bump this producer asked for: the same answer.
	default:
		return fail(fencedCode(req.Version, 4))
	}
	c.transition(&t, pid)
	t.State, t.Partitions, t.Groups, t.StartMs, t.NextProducerID = txnEmpty, nil, nil, -1, -1
	t.TimeoutMs = req.TransactionTimeoutMillis
	if err := c.put(id, t); err != nil {
		return fail(partlog.KafkaErrorCode(err))
	}
	resp.ProducerID, resp.ProducerEpoch = t.ProducerID, t.ProducerEpoch
	return resp
}

// storageCode is the code of a failed marker or state write.
func storageCode(err error) int16 {
	if c := partlog.KafkaErrorCode(err); c != -1 {
		return c
	}
	return errKafkaStorageError
}

// check answers a transactional request's producer id and epoch against
// the transaction, as Kafka's coordinator does for AddPartitionsToTxn,
// AddOffsetsToTxn and the verification of a produce: the id unknown or
// another producer's (INVALID_PRODUCER_ID_MAPPING), an epoch other than
// the current one (PRODUCER_FENCED), the transaction being completed
// (CONCURRENT_TRANSACTIONS).
func (c *txnCoordinator) check(id string, pid int64, epoch int16) (txnState, int16) {
	t, ok := c.get(id)
	switch {
	case !ok || t.ProducerID != pid:
		return t, errInvalidProducerIDMapping
	case epoch != t.ProducerEpoch:
		return t, errProducerFenced
	case t.State == txnPrepareCommit || t.State == txnPrepareAbort:
		return t, errConcurrentTransactions
	}
	return t, errNone
}

// addLocked makes t Ongoing with the partitions and groups added (its
// timeout starts with its first partition or group) and persists it.
func (c *txnCoordinator) addLocked(id string, t *txnState, tps []partlog.TopicPartition, group string, tv2 bool) error {
	changed := t.State != txnOngoing
	for _, tp := range tps {
		if !slices.Contains(t.Partitions, tp) {
			t.Partitions = append(t.Partitions, tp)
			changed = true
		}
	}
	if group != "" && !slices.Contains(t.Groups, group) {
		t.Groups = append(t.Groups, group)
		changed = true
	}
	if !changed {
		return nil
	}
	c.transition(t, t.ProducerID)
	if t.State != txnOngoing {
		t.State, t.StartMs = txnOngoing, t.UpdateMs
	}
	t.TV2 = tv2
	return c.put(id, *t)
}

func (c *txnCoordinator) addPartitions(req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.Version = req.Version
	answer := func(code func(topic string, p int32) int16) {
		for _, rt := range req.Topics {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = rt.Topic
			for _, p := range rt.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(rt.Topic, p)
				t.Partitions = append(t.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, t)
		}
	}
	// Partitions this node does not lead are answered first, the others
	// not attempted (Kafka's KafkaApis does this before the coordinator).
	// A partition that mirrors cannot take part: its markers would be
	// refused (read-only until the mirror stops).
	partCode := func(topic string, n int32) int16 {
		p, code := c.s.partitionFor(topic, n)
		if code == errNone && p.mirror.State().ReadOnly() {
			code = errPolicyViolation
		}
		return code
	}
	var tps []partlog.TopicPartition
	unknown := false
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			if partCode(rt.Topic, p) != errNone {
				unknown = true
			}
			tps = append(tps, partlog.TopicPartition{Topic: rt.Topic, Partition: p})
		}
	}
	if unknown {
		answer(func(topic string, p int32) int16 {
			if code := partCode(topic, p); code != errNone {
				return code
			}
			return errOperationNotAttempted
		})
		return resp
	}
	if req.TransactionalID == "" {
		answer(func(string, int32) int16 { return errInvalidRequest })
		return resp
	}
	code := c.add(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Version, tps, "")
	answer(func(string, int32) int16 { return code })
	return resp
}

// add adds partitions tps, or the offsets topic's partition of group, to
// transaction id once its producer passes the checks (a fenced producer
// answered as the request's version says), and returns the answer.
func (c *txnCoordinator) add(id string, pid int64, epoch, version int16, tps []partlog.TopicPartition, group string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, code := c.check(id, pid, epoch)
	if code == errProducerFenced {
		code = fencedCode(version, 2)
	}
	if code == errNone {
		code = storageCode0(c.addLocked(id, &t, tps, group, false))
	}
	return code
}

// storageCode0 is storageCode that answers NONE for no error.
func storageCode0(err error) int16 {
	if err == nil {
		return errNone
	}
	return storageCode(err)
}

func (c *txnCoordinator) addOffsets(req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	resp.Version = req.Version
	if c.s.cfg.Groups == nil {
		resp.ErrorCode = errCoordinatorNotAvailable
		return resp
	}
	if req.TransactionalID == "" {
		resp.ErrorCode = errInvalidRequest
		return resp
	}
	resp.ErrorCode = c.add(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Version, nil, req.Group)
	return resp
}

func (c *txnCoordinator) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	g := c.s.cfg.Groups
	code := errNone
	if g == nil {
		code = errCoordinatorNotAvailable
	} else {
		// Held while the offsets are staged, so that an EndTxn (or a
		// timeout) completes the transaction after them, never between.
		c.mu.Lock()
		defer c.mu.Unlock()
		t, ok := c.get(req.TransactionalID)
		switch {
		case !ok || t.ProducerID != req.ProducerID:
			code = errInvalidProducerIDMapping
		case t.ProducerEpoch != req.ProducerEpoch:
			code = errProducerFenced
		case t.State == txnPrepareCommit || t.State == txnPrepareAbort:
			code = errConcurrentTransactions
		case req.Version >= 5:
			// Transaction version 2: the commit adds the group to the
			// transaction itself (no AddOffsetsToTxn).
			code = storageCode0(c.addLocked(req.TransactionalID, &t, nil, req.Group, true))
		case t.State != txnOngoing || !slices.Contains(t.Groups, req.Group):
			code = errInvalidTxnState
		}
	}
	if code == errNone {
		return g.CommitTxnOffsets(req)
	}
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = req.Version
	for _, rt := range req.Topics {
		t := kmsg.NewTxnOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (c *txnCoordinator) endTxn(req *kmsg.EndTxnRequest) kmsg.Response {
	resp := kmsg.NewPtrEndTxnResponse()
	resp.Version = req.Version
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	fail := func(code int16) kmsg.Response { resp.ErrorCode = code; return resp }
	if req.TransactionalID == "" {
		return fail(errInvalidRequest)
	}
	clientTV2 := req.Version >= 5
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.get(req.TransactionalID)
	if !ok {
		return fail(errInvalidProducerIDMapping)
	}
	pid, epoch := req.ProducerID, req.ProducerEpoch
	// With transaction version 2 every end bumps the epoch, so a retried
	// end names the epoch below the current one (or, past an exhausted
	// epoch, the producer id before the current one).
	retryOnOverflow := t.TV2 && t.PrevProducerID == pid && epoch == math.MaxInt16-1 && t.ProducerEpoch == 0
	retryOnBump := t.TV2 && t.ProducerEpoch == epoch+1
	valid := epoch == t.ProducerEpoch
	if t.TV2 {
		switch t.State {
		case txnPrepareCommit, txnPrepareAbort:
			valid = retryOnBump
		case txnCompleteCommit, txnCompleteAbort:
			// A retry, or the next end at the bumped epoch (answered by
			// the state: INVALID_TXN_STATE, as Kafka 4.4 does).
			valid = valid || retryOnBump || retryOnOverflow
		}
	}
	switch {
	case t.ProducerID != pid && !retryOnOverflow:
		return fail(errInvalidProducerIDMapping)
	case !valid:
		return fail(fencedCode(req.Version, 2))
	}
	same := func() kmsg.Response {
		resp.ProducerID, resp.ProducerEpoch = t.ProducerID, t.ProducerEpoch
		return resp
	}
	switch t.State {
	case txnOngoing:
	case txnCompleteCommit:
		if req.Commit {
			return same() // a retry whose first answer was lost
		}
		return fail(errInvalidTxnState)
	case txnCompleteAbort:
		if !req.Commit {
			return same()
		}
		return fail(errInvalidTxnState)
	case txnPrepareCommit, txnPrepareAbort:
		if (t.State == txnPrepareCommit) == req.Commit {
			return fail(errConcurrentTransactions)
		}
		return fail(errInvalidTxnState)
	default: // Empty
		return fail(errInvalidTxnState)
	}
	next := int64(-1)
	if clientTV2 && epochExhausted(t.ProducerEpoch) {
		var err error
		if next, err = c.s.meta.allocProducerID(); err != nil {
			return fail(partlog.KafkaErrorCode(err))
		}
		c.s.logf("end transaction %q: %v", req.TransactionalID, err)
	}
	if clientTV2 {
		t.ProducerEpoch, t.LastProducerEpoch = t.ProducerEpoch+1, t.ProducerEpoch
	}
	t.TV2, t.NextProducerID = clientTV2, next
	answerPID, answerEpoch := t.ProducerID, t.ProducerEpoch
	if err := c.endLocked(req.TransactionalID, &t, req.Commit); err != nil {
		return fail(storageCode(err))
	}
	resp.ProducerID, resp.ProducerEpoch = answerPID, answerEpoch
	return resp
}

// fenceLocked aborts t's open transaction with its producer fenced, as
// Kafka's coordinator does for a timeout or a new session of the
// transactional id: the epoch is bumped (the one before it kept as the
// last epoch, so that the fenced producer's KIP-360 retry is answered
// the bumped epoch, as Kafka 4.4 answers it) and the ABORT markers are
// written at the new epoch, so the old producer's later writes are
// refused. The transaction keeps the client's transaction version: its
// EndTxn at the old epoch is fenced. The epoch can always be bumped
// once: no client is given one above epochExhausted.
func (c *txnCoordinator) fenceLocked(id string, t *txnState) error {
	if t.ProducerEpoch == math.MaxInt16 {
		return fmt.Errorf("%w: producer epoch %d cannot be bumped to fence", partlog.ErrInvalidProducerEpoch, t.ProducerEpoch)
	}
	t.ProducerEpoch, t.LastProducerEpoch = t.ProducerEpoch+1, t.ProducerEpoch
	t.NextProducerID = -1
	return c.endLocked(id, t, false)
}

// endLocked ends an Ongoing transaction: PrepareCommit/PrepareAbort is
// persisted first (so a crash completes it at the next open), then the
// markers are written to every partition of the transaction at t's
// producer id and epoch, the group offsets made visible or dropped, and
// the completed state persisted.
func (c *txnCoordinator) endLocked(id string, t *txnState, commit bool) error {
	t.State = txnPrepareAbort
	if commit {
		t.State = txnPrepareCommit
	}
	c.transition(t, t.ProducerID)
	if err := c.put(id, *t); err != nil {
		return err
	}
	return c.completeLocked(id)
}

// completeLocked writes the markers of a prepared transaction and
// completes it.
func (c *txnCoordinator) completeLocked(id string) error {
	t, _ := c.get(id)
	commit := t.State == txnPrepareCommit
	var errs []error
	ctx, cancel := context.WithTimeout(c.s.ctx, 30*time.Second)
	defer cancel()
	var buf []byte
	var pending []partlog.TopicPartition // markers not (durably) written
	for _, tp := range t.Partitions {
		p, code := c.s.partitionFor(tp.Topic, tp.Partition)
		if code != errNone {
			continue // deleted since: nothing to mark
		}
		epoch := p.epoch.Load()
		buf = batch.AppendEndTxnMarkerBatch(buf[:0], batch.ControlSpec{
			PartitionLeaderEpoch: epoch,
			Timestamp:            c.nowMs(),
			ProducerID:           t.ProducerID,
			ProducerEpoch:        t.ProducerEpoch,
		}, commit, coordinatorEpoch)
		info, err := p.mirror.AppendCoordinator(buf, epoch)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", tp, err))
			pending = append(pending, tp)
			continue
		}
		if err := c.s.syncTo(ctx, p, info.LastOffset+1); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", tp, err))
			pending = append(pending, tp)
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Stays prepared: completed again at the next open or retry, on
		// the partitions still without their marker only (one that
		// mirrors refuses it until the stop; the others must not get it
		// again at every retry).
		if len(pending) < len(t.Partitions) {
			t.Partitions = pending
			if perr := c.put(id, t); perr != nil {
				return errors.Join(err, perr)
			}
		}
		return err
	}
	if g := c.s.cfg.Groups; g != nil && len(t.Groups) > 0 {
		if err := g.CompleteTxn(t.ProducerID, t.ProducerEpoch, commit); err != nil {
			return err
		}
	}
	t.State = txnCompleteAbort
	if commit {
		t.State = txnCompleteCommit
	}
	pid := t.ProducerID
	if t.TV2 && t.NextProducerID >= 0 {
		// The epoch ran out with this end: the next transaction is the
		// new producer id's, at epoch 0.
		pid, t.ProducerEpoch = t.NextProducerID, 0
	}
	c.transition(&t, pid)
	t.Partitions, t.Groups, t.NextProducerID = nil, nil, -1
	return c.put(id, t)
}

// verifyProduceLocked answers whether a transactional batch of producer
// (pid, epoch) may start writing to tp for transactional id id, as
// Kafka's produce path asks the coordinator (KIP-890) when the partition
// holds no open transaction of the producer at that epoch: with
// transaction version 1 (produce below v12) the partition must have been
// added to the transaction (TRANSACTION_ABORTABLE otherwise); with
// version 2 the produce adds it. The code is the coordinator's; the
// produce path maps it for its version (produceTxnCode). Caller holds
// c.mu and appends under it.
func (c *txnCoordinator) verifyProduceLocked(id string, pid int64, epoch int16, tp partlog.TopicPartition, add bool) int16 {
	t, code := c.check(id, pid, epoch)
	if code != errNone {
		return code
	}
	if add {
		return storageCode0(c.addLocked(id, &t, []partlog.TopicPartition{tp}, "", true))
	}
	if t.State != txnOngoing || !slices.Contains(t.Partitions, tp) {
		return errTransactionAbortable
	}
	return errNone
}

// endOnPartition ends, before a mirror start makes tp read-only, the
// transactions of this coordinator that wrote to it: an Ongoing one is
// aborted with its producer fenced (as a timeout does), a prepared one
// completed. Left open, their markers would be refused until the mirror
// stops, the transactional id stuck (EndTxn failing, InitProducerId
// answered CONCURRENT_TRANSACTIONS) all that time.
func (c *txnCoordinator) endOnPartition(tp partlog.TopicPartition) error {
	var ids []string
	c.s.meta.view(func(st *metaState) {
		for id, t := range st.Transactions {
			if slices.Contains(t.Partitions, tp) {
				ids = append(ids, id)
			}
		}
	})
	slices.Sort(ids)
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, id := range ids {
		t, ok := c.get(id)
		if !ok || !slices.Contains(t.Partitions, tp) {
			continue
		}
		var err error
		switch t.State {
		case txnOngoing:
			err = c.fenceLocked(id, &t)
		case txnPrepareCommit, txnPrepareAbort:
			err = c.completeLocked(id)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("transaction %q: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// timedOut reports whether an Ongoing transaction has outlived its
// timeout at now (Kafka: start + timeout < now).
func timedOut(t *txnState, now int64) bool {
	return t.State == txnOngoing && t.StartMs+int64(t.TimeoutMs) < now
}

// abortExpired aborts the Ongoing transactions older than their timeout
// (Kafka's transaction.abort.timed.out.transaction.cleanup), fencing
// their producer. The server's housekeeping tick calls it.
func (c *txnCoordinator) abortExpired() {
	now := c.nowMs()
	var expired []string
	c.s.meta.view(func(st *metaState) {
		for id, t := range st.Transactions {
			if timedOut(t, now) {
				expired = append(expired, id)
			}
		}
	})
	slices.Sort(expired)
	for _, id := range expired {
		c.mu.Lock()
		if t, ok := c.get(id); ok && timedOut(&t, now) {
			if err := c.fenceLocked(id, &t); err != nil {
				c.s.logf("abort timed-out transaction %q: %v", id, err)
			}
		}
		c.mu.Unlock()
	}
}

// retryPrepared completes transactions left prepared by a failed marker
// write.
func (c *txnCoordinator) retryPrepared() {
	var prepared []string
	c.s.meta.view(func(st *metaState) {
		for id, t := range st.Transactions {
			if t.State == txnPrepareCommit || t.State == txnPrepareAbort {
				prepared = append(prepared, id)
			}
		}
	})
	for _, id := range prepared {
		c.mu.Lock()
		if err := c.completeLocked(id); err != nil {
			c.s.logf("complete transaction %q: %v", id, err)
		}
		c.mu.Unlock()
	}
}
