package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kerr"
)

// StopMirror stops mirroring the topics (every partition of each): each
// partition runs STOPPING to STOPPED, barrier included, and becomes
// writable at the new leader epoch. Partitions that do not mirror are
// left alone. It returns every partition's status after the stop.
func (s *Server) StopMirror(ctx context.Context, req MirrorStopRequest) ([]MirrorPartitionStatus, error) {
	if len(req.Topics) == 0 {
		return nil, mirrorUsage("no topics")
	}
	policy := mirror.TruncateLSO
	switch req.Policy {
	case "", "TRUNCATE_LSO":
	case "ABORT_OPEN":
		policy = mirror.AbortOpen
	default:
		return nil, mirrorUsage("unknown stop policy %q (TRUNCATE_LSO or ABORT_OPEN)", req.Policy)
	}
	s.mmu.Lock()
	defer s.mmu.Unlock()
	if s.mirrorsClosed {
		return nil, partlog.ErrClosed
	}
	var errs []error
	var stopped []partlog.TopicPartition
	for _, name := range req.Topics {
		t := s.topicByName(name)
		if t == nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, kerr.UnknownTopicOrPartition))
			continue
		}
		s.tmu.RLock()
		parts := slices.Clone(t.parts)
		s.tmu.RUnlock()
		for _, p := range parts {
			if p == nil {
				continue
			}
			st := p.mirror.State()
			if st == mirror.StateNone || st == mirror.StateStopped {
				continue
			}
			// Neither the caller's context nor the server's: a caller that
			// goes away, or a Close (it cancels s.ctx, then waits for mmu),
			// must not leave the partition FAILED half way.
			sctx := context.WithoutCancel(s.ctx)
			_, err := p.mirror.Stop(sctx, policy)
			s.followMirrorEpoch(p)
			if err == nil {
				err = s.syncTo(sctx, p, p.log.LogEndOffset())
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.tp, err))
			}
			stopped = append(stopped, p.tp)
		}
	}
	// Links lose the stopped topics; a link left without topics ends.
	for _, l := range s.links {
		l.mu.Lock()
		for _, tp := range stopped {
			if mp := l.parts[tp]; mp != nil && mp.p.mirror.State() == mirror.StateStopped {
				delete(l.parts, tp)
			}
		}
		l.mu.Unlock()
	}
	if err := s.pruneLinksLocked(req.Topics); err != nil {
		errs = append(errs, err)
	}
	status := s.mirrorStatus(func(tp partlog.TopicPartition) bool { return slices.Contains(stopped, tp) })
	return status, errors.Join(errs...)
}

// pruneLinksLocked drops from every link the topics among candidates that
// no longer have a partition in a session of the link (topicMirrors: none
// started, all stopped, or the topic deleted), in memory and in the state
// file; a link left without topics ends. Caller holds mmu.
func (s *Server) pruneLinksLocked(candidates []string) error {
	var errs []error
	for name, l := range s.links {
		topics := slices.DeleteFunc(slices.Clone(l.topics), func(t string) bool {
			return slices.Contains(candidates, t) && !s.topicMirrors(t, name)
		})
		if len(topics) == len(l.topics) {
			continue
		}
		l.topics = topics
		if err := s.storeLinkTopics(name, topics); err != nil {
			errs = append(errs, err)
		}
		if len(topics) == 0 {
			s.lmu.Lock()
			delete(s.links, name)
			s.lmu.Unlock()
			l.close()
		}
	}
	return errors.Join(errs...)
}

// storeLinkTopics records a link's topics in the state file; without
// topics the link is removed from it.
func (s *Server) storeLinkTopics(name string, topics []string) error {
	return s.meta.update(func(m *metaState) {
		if len(topics) == 0 {
			delete(m.Mirrors, name)
		} else if ms := m.Mirrors[name]; ms != nil {
			ms.Topics = slices.Clone(topics)
		}
	})
}

// topicMirrors reports whether a partition of topic still has a session
// of link name that is not STOPPED.
func (s *Server) topicMirrors(topic, name string) bool {
	t := s.topicByName(topic)
	if t == nil {
		return false
	}
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	for _, p := range t.parts {
		if p == nil {
			continue
		}
		c := p.mirror.Checkpoint()
		if c.MirrorName == name && c.State != mirror.StateStopped && c.State != mirror.StateNone {
			return true
		}
	}
	return false
}
