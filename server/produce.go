package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/producerstate"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produce appends every partition's batches with AppendAsLeader, in
// request order, after Kafka's checks of a produce request, in Kafka's
// order: transactional batches need the request's transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request
// otherwise); an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION
// (UNKNOWN_TOPIC_ID by id from v13; a produce creates no topic); a
// partition's records must be exactly one batch of magic 2, zstd only
// from v7 (INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE); acks must be
// -1, 0 or 1 (INVALID_REQUIRED_ACKS). The first transactional batch of a
// producer's transaction on a partition is checked with the transaction
// coordinator (txnCoordinator.verifyProduceLocked: KIP-890; from v12
// the produce adds the partition to the transaction). An error of the
// log's answers the log start offset with it, except those Kafka's
// replica manager answers without it (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
// RECORD_LIST_TOO_LARGE, storage errors); a record the log refuses is
// named in the answer's record errors.
//
// Without --fsync the high watermark follows the log end at once (a
// single node is its own ISR) and every acks is answered after the
// append. With --fsync the high watermark follows the durable offsets:
// acks=-1 is answered once Log.Sync has covered the records (concurrent
// producers share each fdatasync), acks=1 and acks=0 ask the flusher to
// sync soon.
func (s *Server) produce(req *kmsg.ProduceRequest) handled {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	type waitFor struct {
		p   *partition
		end int64
		rp  *kmsg.ProduceResponseTopicPartition
	}
	var waits []waitFor
	txnAuth := req.TransactionID != nil || !hasTransactionalBatch(req)
	validAcks := req.Acks == -1 || req.Acks == 0 || req.Acks == 1
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name, topicCode := s.produceTopic(req.Version, &rt)
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			out := &t.Partitions[i]
			out.Default()
			out.Partition = rp.Partition
			out.BaseOffset, out.LogStartOffset = -1, -1
			if !txnAuth {
				out.ErrorCode = errTxnIDAuthorizationFailed
				continue
			}
			p, code := (*partition)(nil), topicCode
			if code == errNone {
				p, code = s.partitionFor(name, rp.Partition)
			}
			if code == errNone {
				code = checkProduceRecords(req.Version, rp.Records)
			}
			if code == errNone && !validAcks {
				code = errInvalidRequiredAcks
			}
			if code != errNone {
				out.ErrorCode = code
				continue
			}
			pid := producerID(rp.Records)
			if pid > maxClientProducerID {
				out.ErrorCode = errInvalidRecord
				msg := fmt.Sprintf("producer id %d is above %d, which no producer id allocator reaches", pid, int64(maxClientProducerID))
				out.ErrorMessage = &msg
				continue
			}
			info, err, txnCode := s.appendProduce(req, p, rp.Records)
			if txnCode != errNone {
				out.ErrorCode = produceTxnCode(txnCode, req.Version)
				continue
			}
			if pid >= 0 && (err == nil || errors.As(err, new(*producerstate.DuplicateSequenceError))) {
				// Written (or written before): InitProducerId must not hand
				// this id out again.
				s.meta.raiseProducerIDs(pid)
			}
			var dup *producerstate.DuplicateSequenceError
			switch {
			case errors.As(err, &dup):
				// A retry of a batch already written: answered as
				// written, with its original offsets (as Kafka does).
				out.BaseOffset = dup.FirstOffset
				out.LogStartOffset = p.log.LogStartOffset()
				if dup.LastOffset+1 > p.log.HighWatermark() {
					waits = append(waits, waitFor{p, dup.LastOffset + 1, out})
				}
				continue
			case err != nil:
				out.ErrorCode = errorCode(err)
				msg := err.Error()
				out.ErrorMessage = &msg
				if out.ErrorCode == errKafkaStorageError {
					s.logStorageError(p.tp, "produce", err)
				}
				if logStartWithError(out.ErrorCode) {
					out.LogStartOffset = p.log.LogStartOffset()
				}
				var re *partlog.RecordErrors
				if errors.As(err, &re) {
					for _, r := range re.Records {
						e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
						e.RelativeOffset = int32(r.Index)
						m := r.Message
						e.ErrorMessage = &m
						out.ErrorRecords = append(out.ErrorRecords, e)
					}
				}
				continue
			}
			out.BaseOffset = info.FirstOffset
			out.LogStartOffset = p.log.LogStartOffset()
			if s.logAppendTime(p) {
				out.LogAppendTime = info.MaxTimestamp
			}
			end := info.LastOffset + 1
			if !s.cfg.Fsync {
				p.raiseHighWatermark(end)
				continue
			}
			if req.Acks == -1 {
				waits = append(waits, waitFor{p, end, out})
			} else {
				s.flushLater(p)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	if req.Acks == 0 {
		return handled{noResponse: true}
	}
	if len(waits) == 0 {
		return handled{resp: resp}
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return handled{wait: func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, w := range waits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.syncTo(ctx, w.p, w.end); err != nil {
					w.rp.ErrorCode = partlog.KafkaErrorCode(err)
					w.rp.BaseOffset = -1
					msg := err.Error()
					w.rp.ErrorMessage = &msg
					if w.rp.ErrorCode == errKafkaStorageError {
						s.logStorageError(w.p.tp, "sync", err)
					}
				}
			}()
		}
		wg.Wait()
		return resp
	}}
}

// produceTopic resolves a produce request's topic: by name, or from v13
// by topic id.
func (s *Server) produceTopic(version int16, rt *kmsg.ProduceRequestTopic) (string, int16) {
	if version < 13 {
		return rt.Topic, errNone
	}
	name, ok := s.topicNameForID(rt.TopicID)
	if !ok {
		return "", errUnknownTopicID
	}
	return name, errNone
}

// appendProduce appends one partition's records (checked by
// checkProduceRecords). The first transactional batch of a producer's
// transaction on the partition is checked with the transaction
// coordinator and appended under its lock; txnCode is the coordinator's
// refusal (nothing appended).
func (s *Server) appendProduce(req *kmsg.ProduceRequest, p *partition, records []byte) (partlog.AppendInfo, error, int16) {
	v := batch.View(records)
	if !v.IsTransactional() || req.TransactionID == nil {
		info, err := p.mirror.AppendClient(records, p.epoch.Load())
		return info, err, errNone
	}
	pid, epoch := v.ProducerID(), v.ProducerEpoch()
	if e, ok := p.log.ProducerState(pid); ok && e.ProducerEpoch == epoch && e.CurrentTxnFirstOffset >= 0 {
		// The producer's transaction is open on the partition at this
		// epoch: it was checked when it began.
		info, err := p.mirror.AppendClient(records, p.epoch.Load())
		return info, err, errNone
	}
	c := s.txns
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.verifyProduceLocked(*req.TransactionID, pid, epoch, p.tp, req.Version >= 12); code != errNone {
		return partlog.AppendInfo{}, nil, code
	}
	info, err := p.mirror.AppendClient(records, p.epoch.Load())
	return info, err, errNone
}

// produceTxnCode maps the coordinator's answer to a produce's check to
// what Kafka's replica manager answers the producer at its version.
func produceTxnCode(code, version int16) int16 {
	switch code {
	case errProducerFenced:
		return errInvalidProducerEpoch
	case errTransactionAbortable:
		if version <= 10 { // TRANSACTION_ABORTABLE is known from v11
			return errInvalidTxnState
		}
	case errConcurrentTransactions:
		if version < 12 {
			return errNotEnoughReplicas
		}
	}
	return code
}

// logStartWithError reports whether a produce refused by the log
// answers its log start offset: Kafka's replica manager answers -1 for
// the errors it catches by type (a corrupt or too large batch, an
// unknown or not led partition, a storage error) and the log start
// offset for every other error of the append.
func logStartWithError(code int16) bool {
	switch code {
	case errCorruptMessage, errMessageTooLarge, errRecordListTooLarge, errUnknownTopicOrPartition,
		errNotLeaderOrFollower, errKafkaStorageError:
		return false
	}
	return true
}

// hasTransactionalBatch reports whether a produce request carries a
// transactional batch (Kafka looks at the first batch of each
// partition's records).
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if len(rp.Records) >= batch.HeaderSize && batch.View(rp.Records).Magic() == batch.MagicV2 &&
				batch.View(rp.Records).IsTransactional() {
				return true
			}
		}
	}
	return false
}

// checkProduceRecords applies Kafka's checks of a partition's records
// in a produce request (ProduceRequest.validateRecords), before the log
// sees them: at least one batch, of magic 2 (INVALID_RECORD), zstd only
// from v7 (UNSUPPORTED_COMPRESSION_TYPE), and no second batch
// (INVALID_RECORD). A batch is counted when its length field says it is
// whole; the log checks the rest.
func checkProduceRecords(version int16, records []byte) int16 {
	n, err := batch.Frame(records)
	if err != nil || n > len(records) {
		return errInvalidRecord
	}
	v := batch.View(records)
	switch m := v.Magic(); {
	case m > batch.MagicV2:
		return errCorruptMessage // Kafka's batch iterator knows no such magic
	case m != batch.MagicV2:
		return errInvalidRecord
	}
	if version < 7 && len(records) >= batch.HeaderSize && v.Compression() == batch.CompressionZstd {
		return errUnsupportedCompression
	}
	if n < len(records) {
		return errInvalidRecord
	}
	return errNone
}

// producerID returns the producer id of records, which
// checkProduceRecords found to be one whole batch (-1 when it is too
// short to hold one: the append refuses it).
func producerID(records []byte) int64 {
	if len(records) < batch.HeaderSize {
		return -1
	}
	return batch.View(records).ProducerID()
}

// storageLogEvery is the shortest interval between two storage-error
// log lines of one partition: a full disk under a busy producer fails
// every append.
const storageLogEvery = 10 * time.Second

// logStorageError logs a storage error (KAFKA_STORAGE_ERROR: a full
// disk, a failed fsync, a log that must be reopened) of a partition, at
// most once per storageLogEvery, with the count of those not logged.
func (s *Server) logStorageError(tp partlog.TopicPartition, what string, err error) {
	s.storageLogMu.Lock()
	last := s.storageLog[tp]
	now := time.Now()
	if !last.at.IsZero() && now.Sub(last.at) < storageLogEvery {
		last.quiet++
		s.storageLog[tp] = last
		s.storageLogMu.Unlock()
		return
	}
	s.storageLog[tp] = storageLogged{at: now}
	s.storageLogMu.Unlock()
	if last.quiet > 0 {
		s.logf("%s: %s: storage error: %v (and %d more since the last line)", tp, what, err, last.quiet)
		return
	}
	s.logf("%s: %s: storage error: %v", tp, what, err)
}

// storageLogged is the last storage-error line of a partition.
type storageLogged struct {
	at    time.Time
	quiet int
}

// syncTo makes every offset below end durable and raises the high
// watermark to what is durable.
func (s *Server) syncTo(ctx context.Context, p *partition, end int64) error {
	if !s.cfg.Fsync {
		p.raiseHighWatermark(end)
		return nil
	}
	if err := p.log.Sync(ctx, end); err != nil {
		return err
	}
	p.raiseHighWatermark(p.log.RecoveryPoint())
	return nil
}

func (s *Server) logAppendTime(p *partition) bool { at, _ := p.settings(); return at }

// flusher syncs, with --fsync, the partitions written by acks=0/1
// produces (and recovered at open), so their high watermark moves: one
// goroutine for the server.
type flusher struct {
	s     *Server
	mu    sync.Mutex
	dirty map[*partition]struct{}
	kick  chan struct{}
	done  chan struct{}
	quit  chan struct{}
	once  sync.Once
}

func newFlusher(s *Server) *flusher {
	f := &flusher{s: s, dirty: map[*partition]struct{}{}, kick: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{})}
	go f.run()
	return f
}

func (s *Server) flushLater(p *partition) {
	s.flush.add(p)
}

func (f *flusher) add(p *partition) {
	f.mu.Lock()
	f.dirty[p] = struct{}{}
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *flusher) run() {
	defer close(f.done)
	for {
		select {
		case <-f.quit:
			return
		case <-f.kick:
		}
		f.mu.Lock()
		batch := f.dirty
		f.dirty = map[*partition]struct{}{}
		f.mu.Unlock()
		for p := range batch {
			end := p.log.LogEndOffset()
			if err := f.s.syncTo(f.s.ctx, p, end); err != nil && f.s.ctx.Err() == nil {
				f.s.logf("sync %s: %v", p.tp, err)
			}
		}
	}
}

func (f *flusher) stop() {
	f.once.Do(func() { close(f.quit) })
	<-f.done
}
