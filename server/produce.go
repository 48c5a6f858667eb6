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
// request order. Without --fsync the high watermark follows the log end
// at once (a single node is its own ISR) and every acks is answered
// after the append. With --fsync the high watermark follows the durable
// offsets: acks=-1 is answered once Log.Sync has covered the records
// (concurrent producers share each fdatasync), acks=1 and acks=0 ask
// the flusher to sync soon.
func (s *Server) produce(req *kmsg.ProduceRequest) handled {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	type waitFor struct {
		p   *partition
		end int64
		rp  *kmsg.ProduceResponseTopicPartition
	}
	var waits []waitFor
	for _, rt := range req.Topics {
		if s.cfg.AutoCreate && s.topicByName(rt.Topic) == nil {
			s.autoCreate(rt.Topic)
		}
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			out := &t.Partitions[i]
			out.Default()
			out.Partition = rp.Partition
			out.BaseOffset = -1
			p, code := s.partitionFor(rt.Topic, rp.Partition)
			if code != errNone {
				out.ErrorCode = code
				continue
			}
			if rp.Records == nil {
				out.ErrorCode = errCorruptMessage
				continue
			}
			pid := highestProducerID(rp.Records)
			if pid > maxClientProducerID {
				out.ErrorCode = errInvalidRecord
				msg := fmt.Sprintf("producer id %d is above %d, which no producer id allocator reaches", pid, int64(maxClientProducerID))
				out.ErrorMessage = &msg
				continue
			}
			info, err := p.mirror.AppendClient(rp.Records, p.epoch.Load())
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
				}
			}()
		}
		wg.Wait()
		return resp
	}}
}

// highestProducerID returns the highest producer id of the batches in
// records (-1 without any); the append validates the batches.
func highestProducerID(records []byte) int64 {
	pid := int64(-1)
	for len(records) >= batch.HeaderSize {
		pid = max(pid, batch.View(records).ProducerID())
		n, err := batch.Frame(records)
		if err != nil || n <= 0 || n > len(records) {
			break
		}
		records = records[n:]
	}
	return pid
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

func (s *Server) logAppendTime(p *partition) bool { return p.appendTime }

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
