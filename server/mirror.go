package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
)

// Mirroring: this server as the destination of a cluster mirror.
//
// A mirror link fetches topics from a source cluster (another partlog
// serve, or any Kafka-protocol cluster) and appends what it fetches with
// mirror.Partition.AppendMirror: bytes, offsets, partition leader epochs,
// producer ids and CRCs as the source has them. Each partition follows
// the mirror state machine of package mirror: Start runs LOG_ALIGNMENT
// (truncation to the last position the source recorded for us, or to 0),
// then MIRRORING, where client produces and transaction markers are
// refused (POLICY_VIOLATION with a message naming the mirror); Stop runs
// STOPPING (truncate to the last stable offset, record the position, raise
// the leader epoch, write the MIRROR_PID_RESET barrier) and leaves the
// partition STOPPED and writable. Every step of both is durable before the
// next (package mirror), so a crash finishes at the next Open.
//
// One fetch loop per link (one goroutine, one franz-go client): it sends
// one Fetch per source leader with read_uncommitted isolation, long
// polling 500 ms, each partition from its local log end, and appends each
// partition's whole batches (a batch cut by the response size limit is
// fetched again next time). The source cluster id comes from the source's
// Metadata response and is written into the barrier. A link's source
// address, admin address and topics are in the server's state file, so
// after a restart the partitions that were MIRRORING fetch again from
// their log end.
//
// The source's admin endpoint (MirrorStartRequest.SourceAdmin, optional)
// answers two questions at Start: the last mirror position the source
// recorded for this cluster (failback: the old source truncates to where
// the new one stopped mirroring it) and whether the source mirrors the
// partition from us (a loop, refused). Without it the partition is
// truncated to 0 and mirrored from the start, as mirror.md says for a
// source that cannot answer.

// MirrorStartRequest starts mirroring topics from a source cluster.
type MirrorStartRequest struct {
	// Name names the link (no white space); default "from-<source
	// cluster id>". Starting more topics with the name of a running link
	// adds them to it (same source only).
	Name string `json:"name,omitempty"`
	// Source is the source cluster's Kafka address (host:port).
	Source string `json:"source"`
	// SourceAdmin is the source's admin endpoint (host:port), if it is a
	// partlog server: its last mirror position for us and the loop check.
	SourceAdmin string `json:"source_admin,omitempty"`
	// Topics to mirror; each is created here with the source's topic id
	// and partition count if missing.
	Topics []string `json:"topics"`
	// AllowTruncation lets the start truncate partitions that hold data
	// of their own (records not mirrored from this source): to 0, or in
	// a failback to where the source stopped mirroring them. Without it
	// such a partition is refused and left as it is.
	AllowTruncation bool `json:"allow_truncation,omitempty"`
}

// MirrorStopRequest stops mirroring topics.
type MirrorStopRequest struct {
	Topics []string `json:"topics"`
	// Policy is TRUNCATE_LSO (default: open transactions are truncated
	// away) or ABORT_OPEN (they are closed with ABORT markers).
	Policy string `json:"policy,omitempty"`
}

// MirrorPartitionStatus is one partition's mirror state, as `partlog
// mirror status` prints it.
type MirrorPartitionStatus struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	Mirror          string `json:"mirror"`
	Source          string `json:"source,omitempty"`
	SourceClusterID string `json:"source_cluster_id"`
	State           string `json:"state"`
	Step            string `json:"step,omitempty"`
	Session         int64  `json:"session"`
	LogEndOffset    int64  `json:"log_end_offset"`
	// LastMirroredOffset is the end of the mirrored range (the offset
	// after the last mirrored record): the log end while the partition
	// mirrors, the recorded LMO once it stopped. `partlog mirror status`
	// shows it as MIRRORED END.
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
	LastMirroredEpoch  int32 `json:"last_mirrored_epoch"`
	// SourceHighWatermark is the source's high watermark at the last
	// fetch (-1 unknown); Lag = SourceHighWatermark - LogEndOffset while
	// mirroring (-1 unknown).
	SourceHighWatermark int64  `json:"source_high_watermark"`
	Lag                 int64  `json:"lag"`
	LeaderEpoch         int32  `json:"leader_epoch"`
	StopLeaderEpoch     int32  `json:"stop_leader_epoch"`
	BarrierOffset       int64  `json:"barrier_offset"`
	Error               string `json:"error,omitempty"`
	// Truncated, in a start's answer, is how many offsets the start cut
	// from the partition's log end (LOG_ALIGNMENT: all of them, or in a
	// failback what this cluster wrote after the source's position).
	Truncated int64 `json:"truncated_offsets,omitempty"`
}

// MirrorPosition is the answer to a last-mirror-position lookup.
type MirrorPosition struct {
	Found  bool  `json:"found"`
	Epoch  int32 `json:"epoch"`
	Offset int64 `json:"offset"`
	// NotReady: the partition is stopping; ask again.
	NotReady bool `json:"not_ready,omitempty"`
}

// mirrorLinkState is a link as the state file keeps it.
type mirrorLinkState struct {
	Source          string   `json:"source"`
	SourceAdmin     string   `json:"source_admin,omitempty"`
	SourceClusterID string   `json:"source_cluster_id"`
	Topics          []string `json:"topics"`
}

// mirrorOptions are the options of a partition's mirror state machine.
func (s *Server) mirrorOptions(tp partlog.TopicPartition, epoch int32) mirror.Options {
	return mirror.Options{
		LeaderEpoch: epoch,
		LookupPosition: func(ctx context.Context, c mirror.Checkpoint) (mirror.Position, error) {
			return s.lookupForRestart(ctx, tp.Topic, c)
		},
		Now:             s.cfg.Now,
		UnsafeNoBarrier: s.cfg.UnsafeMirrorNoBarrier,
		// With --fsync consumers see only durable records, mirrored ones
		// too: the flusher raises the high watermark after its sync.
		HighWatermarkByCaller: s.cfg.Fsync,
	}
}

// lookupForRestart finishes a LOG_ALIGNMENT a crash interrupted at
// INTENT: it asks the link's source admin again (bounded: Open must not
// hang on an unreachable peer; the partition is FAILED then, and a new
// start retries).
func (s *Server) lookupForRestart(ctx context.Context, topic string, c mirror.Checkpoint) (mirror.Position, error) {
	var st mirrorLinkState
	found := false
	s.meta.view(func(m *metaState) {
		if l := m.Mirrors[c.MirrorName]; l != nil {
			st, found = *l, true
		}
	})
	if !found || st.SourceAdmin == "" {
		return mirror.Position{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return lookupPosition(ctx, st.SourceAdmin, s.meta.clusterID(), topic, c.TopicID, c.Partition)
}

var (
	// errMirrorUsage: the request itself is wrong (admin: 400).
	errMirrorUsage = errors.New("partlog/server: bad mirror request")
	// errWouldTruncate: a start without AllowTruncation met a partition
	// holding records of its own.
	errWouldTruncate = errors.New("partlog/server: mirror start refused")
	// errSourceUnreachable: the source's metadata could not be read
	// (admin: 502).
	errSourceUnreachable = errors.New("partlog/server: source unreachable")
)

func mirrorUsage(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMirrorUsage, fmt.Sprintf(format, args...))
}

// MirrorStatus returns every partition that has a mirror state (mirroring,
// failed, stopping or stopped), by topic and partition.
func (s *Server) MirrorStatus() []MirrorPartitionStatus {
	return s.mirrorStatus(nil)
}

func (s *Server) mirrorStatus(only func(partlog.TopicPartition) bool) []MirrorPartitionStatus {
	s.tmu.RLock()
	var parts []*partition
	for _, t := range s.topics {
		for _, p := range t.parts {
			if p != nil && (only == nil || only(p.tp)) {
				parts = append(parts, p)
			}
		}
	}
	s.tmu.RUnlock()
	sort.Slice(parts, func(i, j int) bool {
		a, b := parts[i].tp, parts[j].tp
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	s.lmu.RLock()
	links := maps.Clone(s.links)
	s.lmu.RUnlock()
	var out []MirrorPartitionStatus
	for _, p := range parts {
		c := p.mirror.Checkpoint()
		if c.State == mirror.StateNone {
			continue
		}
		leo := p.log.LogEndOffset()
		st := MirrorPartitionStatus{Topic: p.tp.Topic, Partition: p.tp.Partition, Mirror: c.MirrorName,
			SourceClusterID: c.SourceClusterID, State: c.State.String(), Session: int64(c.Session),
			LogEndOffset: leo, LastMirroredOffset: c.LastMirrorOffset, LastMirroredEpoch: c.LastMirrorEpoch,
			SourceHighWatermark: -1, Lag: -1, LeaderEpoch: p.epoch.Load(), StopLeaderEpoch: c.StopLeaderEpoch,
			BarrierOffset: c.BarrierOffset}
		if c.Step != mirror.StepNone {
			st.Step = c.Step.String()
		}
		if err := p.mirror.Failure(); err != nil {
			st.Error = err.Error()
		}
		if l := links[c.MirrorName]; l != nil {
			st.Source = l.source
			l.mu.Lock()
			if mp := l.parts[p.tp]; mp != nil {
				st.SourceHighWatermark = mp.sourceHW
				if st.Error == "" {
					st.Error = mp.lastErr
				}
			}
			l.mu.Unlock()
		}
		if c.State.ReadOnly() && c.State != mirror.StateStopping {
			st.LastMirroredOffset = leo
			st.LastMirroredEpoch = p.log.LatestEpoch()
			if st.SourceHighWatermark >= 0 {
				st.Lag = max(0, st.SourceHighWatermark-leo)
			}
		}
		out = append(out, st)
	}
	return out
}

// LastMirrorPosition answers a failback lookup: the position this
// cluster recorded when it stopped mirroring topic's partition from
// requesterClusterID (mirror.Partition.LastMirrorPosition).
func (s *Server) LastMirrorPosition(requesterClusterID, topic string, topicID mirror.TopicID, partition int32) MirrorPosition {
	p, code := s.partitionFor(topic, partition)
	if code != errNone {
		return MirrorPosition{}
	}
	pos, err := p.mirror.LastMirrorPosition(requesterClusterID, topicID, partition)
	switch {
	case errors.Is(err, mirror.ErrNotReady):
		return MirrorPosition{NotReady: true}
	case err != nil:
		return MirrorPosition{}
	}
	return MirrorPosition{Found: pos.Found, Epoch: pos.Epoch, Offset: pos.Offset}
}

// mirrorsFromCluster reports whether topic's partition mirrors from
// cluster (the loop check of a peer's Start).
func (s *Server) mirrorsFromCluster(cluster, topic string, partition int32) bool {
	p, code := s.partitionFor(topic, partition)
	if code != errNone {
		return false
	}
	c := p.mirror.Checkpoint()
	return c.State.ReadOnly() && c.State != mirror.StateStopping && c.SourceClusterID == cluster
}

// mirrored is linkHost's: with Fsync, mirrored bytes become visible to
// consumers once the flusher has made them durable.
func (s *Server) mirrored(p *partition) {
	if s.cfg.Fsync {
		s.flushLater(p)
	}
}
