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
// change of the same transaction.
type txnCoordinator struct {
	s  *Server
	mu sync.Mutex
}

func newTxnCoordinator(s *Server) *txnCoordinator { return &txnCoordinator{s: s} }

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
	if err := c.s.meta.avoidProducerIDs(maxPID); err != nil {
		return err
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
			if errors.Is(err, mirror.ErrReadOnly) {
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
	return c.s.meta.update(func(st *metaState) { st.Transactions[id] = &t })
}

func (c *txnCoordinator) initProducerID(req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version = req.Version
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID == nil || *req.TransactionalID == "" {
		// Idempotent producer: a fresh id every time (KIP-360's bump of
		// an idempotent producer gets a new id as well).
		pid, err := c.s.meta.allocProducerID()
		if err != nil {
			resp.ErrorCode = partlog.KafkaErrorCode(err)
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = pid, 0
		return resp
	}
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > maxTxnTimeout {
		resp.ErrorCode = errInvalidTransactionTimeout
		return resp
	}
	id := *req.TransactionalID
	c.mu.Lock()
	defer c.mu.Unlock()
	t, known := c.get(id)
	switch {
	case !known:
		pid, err := c.s.meta.allocProducerID()
		if err != nil {
			resp.ErrorCode = partlog.KafkaErrorCode(err)
			return resp
		}
		t = txnState{ProducerID: pid, ProducerEpoch: 0, State: txnEmpty}
	default:
		if req.ProducerID >= 0 && (req.ProducerID != t.ProducerID || req.ProducerEpoch != t.ProducerEpoch) {
			// KIP-360: the producer names the id and epoch it had; a
			// newer one has taken over since.
			resp.ErrorCode = errProducerFenced
			return resp
		}
		if t.State == txnPrepareCommit || t.State == txnPrepareAbort {
			// Its markers are still being written (or failed and are
			// retried by the housekeeping tick): the client retries.
			resp.ErrorCode = errConcurrentTransactions
			return resp
		}
		if t.State == txnOngoing {
			// A new session of the transactional id: the open
			// transaction is aborted, fenced by the new epoch.
			if err := c.endLocked(id, &t, false, true); err != nil {
				resp.ErrorCode = partlog.KafkaErrorCode(err)
				return resp
			}
			t, _ = c.get(id)
		}
		if t.ProducerEpoch >= math.MaxInt16-1 {
			pid, err := c.s.meta.allocProducerID()
			if err != nil {
				resp.ErrorCode = partlog.KafkaErrorCode(err)
				return resp
			}
			t.ProducerID, t.ProducerEpoch = pid, 0
		} else {
			t.ProducerEpoch++
		}
		t.State, t.Partitions, t.Groups = txnEmpty, nil, nil
	}
	t.TimeoutMs = req.TransactionTimeoutMillis
	t.UpdateMs = c.nowMs()
	if err := c.put(id, t); err != nil {
		resp.ErrorCode = partlog.KafkaErrorCode(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = t.ProducerID, t.ProducerEpoch
	return resp
}

// check answers a transactional request's producer id and epoch against
// the transaction, as Kafka's coordinator does.
func (c *txnCoordinator) check(id string, pid int64, epoch int16, version int16) (txnState, int16) {
	t, ok := c.get(id)
	switch {
	case !ok || t.ProducerID != pid:
		return t, errInvalidProducerIDMapping
	case epoch != t.ProducerEpoch:
		if version < 2 {
			return t, errInvalidProducerEpoch
		}
		return t, errProducerFenced
	case t.State == txnPrepareCommit || t.State == txnPrepareAbort:
		return t, errConcurrentTransactions
	}
	return t, errNone
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
	c.mu.Lock()
	defer c.mu.Unlock()
	t, code := c.check(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Version)
	if code != errNone {
		answer(func(string, int32) int16 { return code })
		return resp
	}
	// A partition that mirrors cannot take part: its markers would be
	// refused (read-only until the mirror stops).
	partCode := func(topic string, n int32) int16 {
		p, code := c.s.partitionFor(topic, n)
		if code == errNone && p.mirror.State().ReadOnly() {
			code = errPolicyViolation
		}
		return code
	}
	unknown := false
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			if partCode(rt.Topic, p) != errNone {
				unknown = true
			}
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
	changed := t.State != txnOngoing
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			tp := partlog.TopicPartition{Topic: rt.Topic, Partition: p}
			if !slices.Contains(t.Partitions, tp) {
				t.Partitions = append(t.Partitions, tp)
				changed = true
			}
		}
	}
	var err error
	if changed {
		c.begin(&t)
		err = c.put(req.TransactionalID, t)
	}
	ec := partlog.KafkaErrorCode(err)
	answer(func(string, int32) int16 { return ec })
	return resp
}

// begin makes t Ongoing (its timeout starts with its first partition or
// group).
func (c *txnCoordinator) begin(t *txnState) {
	now := c.nowMs()
	if t.State != txnOngoing {
		t.State = txnOngoing
		t.StartMs = now
	}
	t.UpdateMs = now
}

func (c *txnCoordinator) addOffsets(req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	resp.Version = req.Version
	if c.s.cfg.Groups == nil {
		resp.ErrorCode = errCoordinatorNotAvailable
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, code := c.check(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Version)
	if code != errNone {
		resp.ErrorCode = code
		return resp
	}
	if !slices.Contains(t.Groups, req.Group) {
		t.Groups = append(t.Groups, req.Group)
	}
	c.begin(&t)
	resp.ErrorCode = partlog.KafkaErrorCode(c.put(req.TransactionalID, t))
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
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.get(req.TransactionalID)
	switch {
	case !ok || t.ProducerID != req.ProducerID:
		resp.ErrorCode = errInvalidProducerIDMapping
		return resp
	case req.ProducerEpoch != t.ProducerEpoch:
		resp.ErrorCode = errProducerFenced
		if req.Version < 2 {
			resp.ErrorCode = errInvalidProducerEpoch
		}
		return resp
	}
	switch t.State {
	case txnOngoing:
	case txnCompleteCommit, txnCompleteAbort:
		// A retried EndTxn whose first answer was lost.
		if (t.State == txnCompleteCommit) != req.Commit {
			resp.ErrorCode = errInvalidTxnState
		}
		return resp
	case txnEmpty:
		if !req.Commit {
			return resp // aborting nothing is allowed (Kafka does the same)
		}
		resp.ErrorCode = errInvalidTxnState
		return resp
	default:
		resp.ErrorCode = errConcurrentTransactions
		return resp
	}
	if err := c.endLocked(req.TransactionalID, &t, req.Commit, false); err != nil {
		resp.ErrorCode = partlog.KafkaErrorCode(err)
		if resp.ErrorCode == -1 {
			resp.ErrorCode = errKafkaStorageError
		}
	}
	return resp
}

// endLocked ends an Ongoing transaction: PrepareCommit/PrepareAbort is
// persisted first (so a crash completes it at the next open), then the
// markers are written to every partition of the transaction, the group
// offsets made visible or dropped, and the completed state persisted.
// fence (a timeout, or a new session of the transactional id) bumps the
// producer epoch first and writes the ABORT markers at it, so the old
// producer's later writes are refused.
func (c *txnCoordinator) endLocked(id string, t *txnState, commit, fence bool) error {
	if fence {
		if t.ProducerEpoch >= math.MaxInt16-1 {
			return fmt.Errorf("%w: producer epoch exhausted", partlog.ErrInvalidProducerEpoch)
		}
		t.ProducerEpoch++
	}
	t.State = txnPrepareAbort
	if commit {
		t.State = txnPrepareCommit
	}
	t.UpdateMs = c.nowMs()
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
	t.Partitions, t.Groups = nil, nil
	t.UpdateMs = c.nowMs()
	return c.put(id, t)
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
			err = c.endLocked(id, &t, false, true)
		case txnPrepareCommit, txnPrepareAbort:
			err = c.completeLocked(id)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("transaction %q: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// abortExpired aborts the Ongoing transactions older than their timeout
// (Kafka's transaction.abort.timed.out.transaction.cleanup), fencing
// their producer. The server's housekeeping tick calls it.
func (c *txnCoordinator) abortExpired() {
	now := c.nowMs()
	var expired []string
	c.s.meta.view(func(st *metaState) {
		for id, t := range st.Transactions {
			if t.State == txnOngoing && now-t.StartMs > int64(t.TimeoutMs) {
				expired = append(expired, id)
			}
		}
	})
	slices.Sort(expired)
	for _, id := range expired {
		c.mu.Lock()
		if t, ok := c.get(id); ok && t.State == txnOngoing && now-t.StartMs > int64(t.TimeoutMs) {
			if err := c.endLocked(id, &t, false, true); err != nil {
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
