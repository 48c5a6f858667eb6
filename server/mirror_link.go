package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// linkHost is what a link needs of its server, and all it may call: a
// link fetches and appends through its partitions' mirror state machines
// (mirrorPart.p), and tells the server only what the server serves from.
type linkHost interface {
	// followMirrorEpoch raises the partition's served leader epoch to its
	// mirror state machine's, after an append or a fencing.
	followMirrorEpoch(p *partition)
	// mirrored reports bytes appended to p (the server flushes them later
	// when it acknowledges durable offsets only).
	mirrored(p *partition)
	logf(format string, args ...any)
}

// mirrorLink is a running link: its client and fetch loop. name, source
// and sourceCluster never change (a link's name stays with its source).
type mirrorLink struct {
	name          string
	source        string   // the source's Kafka address
	sourceCluster string   // the source's cluster id
	topics        []string // guarded by Server.mmu
	cl            *kgo.Client
	host          linkHost
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

// run is a link's fetch loop.
func (l *mirrorLink) run(ctx context.Context) {
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
			ok, err := l.fetch(ctx, leader, parts)
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

// fetch sends one Fetch to a source leader and appends what came
// back; ok says something was appended.
func (l *mirrorLink) fetch(ctx context.Context, leader int32, parts []*mirrorPart) (ok bool, err error) {
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
			if l.apply(ctx, mp, rp) {
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
