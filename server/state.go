package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/fsutil"
)

// StateFile is the server's own state in the log directory: the cluster
// id, the producer-id block, the transactions and the topic configs, as
// JSON, replaced atomically (temp file, fsync, rename, directory fsync)
// at every change. The log directory's loader skips regular files, and
// Kafka does not know this name.
const StateFile = "partlog-server-state.json"

// producerIDBlock is how many producer ids are reserved per write of the
// state file: ids are handed out from the reserved block, so a restart
// never hands out one twice (it starts after the block).
const producerIDBlock = 1000

type metaState struct {
	ClusterID string `json:"cluster_id"`
	// ProducerIDBlockEnd: every id below it may have been handed out.
	ProducerIDBlockEnd int64                        `json:"producer_id_block_end"`
	Transactions       map[string]*txnState         `json:"transactions"`
	TopicConfigs       map[string]map[string]string `json:"topic_configs,omitempty"`
	// Mirrors are the mirror links by name (mirror.go): where their
	// partitions fetch from after a restart.
	Mirrors map[string]*mirrorLinkState `json:"mirrors,omitempty"`
	// MirrorEpochs are the leader epochs mirrored partitions were raised
	// to (EPOCH_FENCING, E_stop), by "topic/partition": given back to the
	// mirror state machine at Open (mirror.Options.LeaderEpoch).
	MirrorEpochs map[string]int32 `json:"mirror_epochs,omitempty"`
}

// txnState is one transactional id (Kafka's TransactionMetadata).
type txnState struct {
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	// PrevProducerID is the producer id before the last transition (a
	// retry of an InitProducerId that rotated the id names it), and
	// NextProducerID the id a transaction version 2 end hands over to
	// once its markers are written (the epoch ran out); -1 when none.
	PrevProducerID int64 `json:"prev_producer_id"`
	NextProducerID int64 `json:"next_producer_id"`
	// LastProducerEpoch is the epoch before the last bump, which a
	// retried InitProducerId names (KIP-360); -1 when none.
	LastProducerEpoch int16 `json:"last_producer_epoch"`
	TimeoutMs         int32 `json:"timeout_ms"`
	// State is Empty, Ongoing, PrepareCommit, PrepareAbort,
	// CompleteCommit or CompleteAbort.
	State      string                   `json:"state"`
	Partitions []partlog.TopicPartition `json:"partitions,omitempty"`
	Groups     []string                 `json:"groups,omitempty"`
	// StartMs is when the transaction became Ongoing (its timeout runs
	// from there; -1 when none is), UpdateMs the last change.
	StartMs  int64 `json:"start_ms"`
	UpdateMs int64 `json:"update_ms"`
	// TV2: the last transition came from a client of transaction
	// version 2 (KIP-890 part 2: the epoch is bumped at every end).
	TV2 bool `json:"tv2,omitempty"`
	// V is the format of the entry: 1 since the fields above from
	// PrevProducerID to LastProducerEpoch; a file without it gets -1
	// there at open.
	V int `json:"v,omitempty"`
}

const (
	txnEmpty          = "Empty"
	txnOngoing        = "Ongoing"
	txnPrepareCommit  = "PrepareCommit"
	txnPrepareAbort   = "PrepareAbort"
	txnCompleteCommit = "CompleteCommit"
	txnCompleteAbort  = "CompleteAbort"
)

// metaStore guards the state and its file.
type metaStore struct {
	path   string
	mu     sync.Mutex
	st     metaState
	nextID int64 // the next producer id to hand out (< st.ProducerIDBlockEnd, or = it)
	// avoidBelow: no id below it is handed out (raised without the lock
	// by every append of an id above it, raiseProducerIDs).
	avoidBelow atomic.Int64
	// warnings found at open, logged by the server.
	warnings []string
}

func openMeta(dir string) (*metaStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := &metaStore{path: filepath.Join(dir, StateFile)}
	b, err := fsutil.ReadSmall(m.path)
	// Written at open only when new or changed: a server killed on a full
	// disk must start again (read-only) without writing it.
	write := false
	switch {
	case errors.Is(err, fs.ErrNotExist):
		write = true
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, err
		}
		m.st.ClusterID = base64.RawURLEncoding.EncodeToString(id[:])
	case err != nil:
		return nil, fmt.Errorf("partlog/server: read %s: %w", m.path, err)
	default:
		if err := json.Unmarshal(b, &m.st); err != nil {
			return nil, fmt.Errorf("partlog/server: %s is not the server's state (%v); move it away to start afresh (transactions and producer ids are then forgotten)", m.path, err)
		}
		if m.st.ClusterID == "" {
			return nil, fmt.Errorf("partlog/server: %s: missing cluster id", m.path)
		}
		if m.st.ProducerIDBlockEnd < 0 {
			// Left by a version whose allocator overflowed on a client's
			// producer id near 2^63: the ids the logs hold are avoided
			// again at open (txnCoordinator.recover).
			m.warnings = append(m.warnings, fmt.Sprintf("%s: producer id block end %d (an overflow) reset to 0; ids above every id in the logs are handed out",
				m.path, m.st.ProducerIDBlockEnd))
			m.st.ProducerIDBlockEnd = 0
			write = true
		}
	}
	if m.st.Transactions == nil {
		m.st.Transactions = map[string]*txnState{}
	}
	for _, t := range m.st.Transactions {
		if t.V == 0 {
			t.PrevProducerID, t.NextProducerID, t.LastProducerEpoch, t.V = -1, -1, -1, 1
		}
	}
	m.nextID = m.st.ProducerIDBlockEnd
	if write {
		return m, m.writeLocked()
	}
	return m, nil
}

func (m *metaStore) writeLocked() error {
	b, err := json.MarshalIndent(&m.st, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(m.path, append(b, '\n'))
}

func (m *metaStore) flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writeLocked()
}

func (m *metaStore) clusterID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.ClusterID
}

// maxClientProducerID is the largest producer id a client's batch may
// carry. The allocator is raised above every id the logs hold, so an id
// near 2^63 would leave it nothing to hand out (it overflowed: a negative
// id after one restart, no start after the second); no Kafka allocator
// comes near 2^62, and above it the allocator keeps 2^62 ids whatever
// the logs hold.
const maxClientProducerID = 1 << 62

// avoidProducerIDs makes the next id above seen, the highest producer id
// the logs hold at open (a directory written by another broker, a lost
// state file, a client's append with an id never handed out):
// InitProducerId must not hand out an id a partition's producer state
// holds, or the new producer's first batch is answered as a duplicate
// and never written. Ids above maxClientProducerID (mirrored from
// another cluster, which the barrier separates) are not avoided.
func (m *metaStore) avoidProducerIDs(seen int64) error {
	if seen < 0 || seen > maxClientProducerID {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if seen < m.nextID {
		return nil
	}
	m.nextID = seen + 1
	if m.nextID <= m.st.ProducerIDBlockEnd {
		return nil
	}
	m.st.ProducerIDBlockEnd = m.nextID
	return m.writeLocked()
}

// raiseProducerIDs is avoidProducerIDs for an append's producer id,
// without a lock: the produce path calls it for every idempotent batch,
// so once a producer's first batch has raised the floor its others cost
// an atomic load. allocProducerID starts from the floor.
func (m *metaStore) raiseProducerIDs(pid int64) {
	if pid < 0 || pid > maxClientProducerID {
		return
	}
	for {
		cur := m.avoidBelow.Load()
		if pid < cur || m.avoidBelow.CompareAndSwap(cur, pid+1) {
			return
		}
	}
}

// allocProducerID hands out a producer id never handed out before, in
// this run or an earlier one, and above every id the logs were seen to
// hold (avoidProducerIDs).
func (m *metaStore) allocProducerID() (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID = max(m.nextID, m.avoidBelow.Load())
	if m.nextID == math.MaxInt64 {
		return -1, errors.New("partlog/server: producer ids exhausted")
	}
	if m.nextID >= m.st.ProducerIDBlockEnd {
		old := m.st.ProducerIDBlockEnd
		m.st.ProducerIDBlockEnd = m.nextID + min(producerIDBlock, math.MaxInt64-m.nextID)
		if err := m.writeLocked(); err != nil {
			m.st.ProducerIDBlockEnd = old
			return -1, err
		}
	}
	id := m.nextID
	m.nextID++
	return id, nil
}

// update changes the state under the lock and writes it; a failed write
// undoes nothing in memory, so the caller answers an error and the file
// stays behind the memory until the next write succeeds.
func (m *metaStore) update(fn func(st *metaState)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn(&m.st)
	return m.writeLocked()
}

// view reads the state under the lock.
func (m *metaStore) view(fn func(st *metaState)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn(&m.st)
}

func (m *metaStore) topicConfigs(name string) map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.TopicConfigs[name]
}

func (m *metaStore) setTopicConfigs(name string, c map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, had := m.st.TopicConfigs[name]
	if len(c) == 0 {
		if !had {
			return nil
		}
		delete(m.st.TopicConfigs, name)
	} else {
		if m.st.TopicConfigs == nil {
			m.st.TopicConfigs = map[string]map[string]string{}
		}
		m.st.TopicConfigs[name] = c
	}
	return m.writeLocked()
}

func mirrorEpochKey(tp partlog.TopicPartition) string {
	return tp.Topic + "/" + strconv.Itoa(int(tp.Partition))
}

// mirrorEpoch returns the leader epoch kept for tp, or -1.
func (m *metaStore) mirrorEpoch(tp partlog.TopicPartition) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.st.MirrorEpochs[mirrorEpochKey(tp)]; ok {
		return e
	}
	return -1
}

// raiseMirrorEpoch keeps e for tp if it is above the kept one.
func (m *metaStore) raiseMirrorEpoch(tp partlog.TopicPartition, e int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := mirrorEpochKey(tp)
	if old, ok := m.st.MirrorEpochs[k]; ok && old >= e {
		return nil
	}
	if m.st.MirrorEpochs == nil {
		m.st.MirrorEpochs = map[string]int32{}
	}
	m.st.MirrorEpochs[k] = e
	return m.writeLocked()
}

// forgetMirrorEpochs drops the epochs kept for a deleted topic.
func (m *metaStore) forgetMirrorEpochs(topic string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.st.MirrorEpochs)
	for k := range m.st.MirrorEpochs {
		if strings.HasPrefix(k, topic+"/") {
			delete(m.st.MirrorEpochs, k)
		}
	}
	if len(m.st.MirrorEpochs) == n {
		return nil
	}
	return m.writeLocked()
}
