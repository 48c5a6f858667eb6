package producerstate

import (
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// Origin says who produced an append; it selects the validation rules
// (producer-state.md §2.2, decision table §2.7).
type Origin int8

const (
	// Client is a produce request on the leader: epoch fencing, full
	// sequence checks, duplicate detection against the 5 cached batches;
	// control batches are refused (ErrControlFromClient).
	Client Origin = iota
	// Coordinator is an internal leader append (transaction markers from
	// the transaction coordinator, offset commits from the group
	// coordinator, the barrier from the mirror control plane): epoch and
	// coordinator-epoch fencing, no sequence checks, no duplicate lookup.
	Coordinator
	// Replication is a follower append of batches fetched from the local
	// leader: no sequence checks; a lower producer or coordinator epoch is
	// accepted (and lowers the stored one), as Kafka's REPLICATION.
	Replication
	// Mirror is an append of batches fetched from another cluster's
	// partition (cluster mirroring). Rules are those of Replication; it is
	// a separate value so that callers and reports can tell them apart.
	Mirror
	// Replay is log recovery and rebuild (snapshot + replay, segment
	// recovery, truncation): Kafka's loader, which applies batches with
	// REPLICATION rules.
	Replay
)

var originNames = [...]string{"Client", "Coordinator", "Replication", "Mirror", "Replay"}

// String returns the origin's name.
func (o Origin) String() string {
	if o >= 0 && int(o) < len(originNames) {
		return originNames[o]
	}
	return "Origin(" + strconv.Itoa(int(o)) + ")"
}

// trusted reports whether the origin copies an existing log (no sequence
// checks, lower epochs accepted).
func (o Origin) trusted() bool { return o >= Replication }

// DefaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms.
const DefaultProducerIDExpirationMs = 86_400_000

// DefaultShards is the stripe count used when Config.Shards is 0.
//
// A partition has exactly one appender (the log serialises appends), so
// shard locks only arbitrate between that appender and readers asking for
// single producers (DescribeProducers, the cleaner). With 16 stripes a
// reader of a random producer waits for the appender's commit only about
// 1 time in 16, while the fixed cost per partition stays below 2 KiB
// (16 cache-line-padded shards): a broker holds thousands of partitions,
// so a larger default would cost memory for contention that one writer
// cannot create. Whole-state readers never take shard locks (see doc.go).
const DefaultShards = 16

// Config configures a Manager. The zero value means Kafka's defaults.
type Config struct {
	// ProducerIDExpirationMs is producer.id.expiration.ms: a producer
	// without an open transaction whose last timestamp is at least this
	// old is removed by RemoveExpired and dropped by LoadSnapshot.
	// 0 means DefaultProducerIDExpirationMs (one day).
	ProducerIDExpirationMs int64
	// Shards is the number of lock stripes, a power of two; 0 means
	// DefaultShards. Other values are rounded up to a power of two.
	Shards int
}

// shard is one lock stripe of the producers.
type shard struct {
	mu        sync.Mutex // guards producers against concurrent Producer() readers
	producers pidTable   // written only with mu held (and Manager.mu, except by Commit's one-batch cases)
	_         [16]byte   // keep neighbouring shards on separate cache lines
}

// Manager is the producer state of one partition. See the package
// documentation for the concurrency contract.
type Manager struct {
	expirationMs int64
	shardDrop    uint8 // shardIndex: 63 - log2(len(shards))
	// noKnownPath sends every batch through the general validation (no
	// validateKnownData). Test hook only (the two paths are compared);
	// beside shards so that the known path reads one line of the Manager.
	noKnownPath bool
	shards      []shard
	// readers counts the readers of entries at work (Producer, Producers,
	// SnapshotEntries: beginRead … endRead).
	readers atomic.Int32
	// reloads is odd while Reload empties and rebuilds the state: a
	// reader of entries that saw it odd, or saw it change, reads again
	// (after waiting out the writer in beginRead), so it never returns
	// the empty state between the reset and the rebuild.
	reloads atomic.Uint64
	// appendLock is the owner's append lock (SetAppendLock; nil: readers
	// do not wait), taken by beginRead only; set before readers run.
	appendLock sync.Locker
	// mapEndOffset is the MEO (≥ 0). It is written by mutations
	// (serialised by the caller) under mu, except by the Commits of an
	// append that staged nothing or only a known batch, which store it
	// without mu; readers load it.
	mapEndOffset atomic.Int64

	// mu is the state lock. Every mutation holds it (and, for a producer
	// entry, that producer's shard lock inside it). Readers of the whole
	// state (Producers, SnapshotEntries, offsets, barriers) hold it too
	// and need no shard lock. A plain Mutex rather than an RWMutex: the
	// readers' critical sections are short or rare, and an RWMutex costs
	// the appender two more atomic operations per append.
	mu             sync.Mutex
	count          int         // number of producer entries
	ongoing        []txnRecord // open transactions, ascending firstOffset
	unreplicated   []txnRecord // decided, marker not yet below the high watermark
	lastSnapOffset int64       // offset of the last snapshot written or loaded
	logStartOffset int64       // clamps the first unstable offset (§1.4)
	barriers       []int64     // barrier offsets applied since creation/reset/load
	orphanedTxns   int64       // open transactions dropped by barriers (R4 metric)
	slab           []entry     // backing store of entries created by LoadSnapshot

	// barriersDisabled makes type-7 batches inert, as in Kafka without the
	// mirroring fork. Test hook only (silent-corruption reproductions).
	barriersDisabled bool
}

// txnRecord is one transaction of ongoing or unreplicated.
type txnRecord struct {
	producerID  int64
	firstOffset int64
	lastOffset  int64 // marker offset; -1 while open
}

// New returns an empty Manager at map end offset 0.
func New(cfg Config) *Manager {
	m := &Manager{expirationMs: cfg.ProducerIDExpirationMs}
	if m.expirationMs <= 0 {
		m.expirationMs = DefaultProducerIDExpirationMs
	}
	n := cfg.Shards
	if n <= 0 {
		n = DefaultShards
	}
	if n&(n-1) != 0 {
		n = 1 << bits.Len(uint(n))
	}
	m.shards = make([]shard, n)
	b := bits.Len(uint(n - 1)) // log2(n)
	m.shardDrop = uint8(63 - b)
	for i := range m.shards {
		m.shards[i].producers.skip = uint8(b)
	}
	return m
}

// shardFor picks the stripe of pid. Producer ids are handed out
// sequentially, so they are mixed (Fibonacci hashing) rather than masked.
func (m *Manager) shardFor(pid int64) *shard { return &m.shards[m.shardIndex(pid)] }

// shardIndex is the index of pid's stripe: the top log2(len(shards))
// bits of its Fibonacci hash; the stripe's table indexes by the bits
// after them. The hash is shifted by 1 and then by at most 63 (none for
// one shard: 0), so that the compiler knows the shift is below 64 and
// emits no clamp for a larger one.
func (m *Manager) shardIndex(pid int64) int {
	return int((uint64(pid) * fibonacci) >> 1 >> (m.shardDrop & 63))
}

// ExpirationMs returns the effective producer.id.expiration.ms.
func (m *Manager) ExpirationMs() int64 { return m.expirationMs }

// SetAppendLock names the owner's lock that serialises appends and every
// other mutation (package doc, invariant 1), held from Begin to Commit.
// Readers of entries (Producer, Producers, SnapshotEntries) take and
// release it once before they read, to wait out the commit of an append
// in flight; they must not hold it already. Without it, readers of
// entries must never run while an append does (tools and recovery, which
// use the Manager from one goroutine). The owner that appends with
// readers at work (the log, for a Manager it made or got from recovery)
// calls it once, before any reader runs.
func (m *Manager) SetAppendLock(mu sync.Locker) { m.appendLock = mu }

// beginRead starts a read of entries: from its return until endRead, the
// Commit of a known batch takes the entry's shard lock (it sees readers
// > 0), and one that was writing without it has finished. The reader
// still takes the shard lock of what it reads. The reader counts itself
// and then takes and releases the caller's append lock: an append that
// held it then has committed before the reader reads (the lock orders
// its entry writes before the reads), and one that takes it afterwards
// loads the count after the increment and sees the reader. Caller holds
// neither the append lock nor mu (which appends take inside the append
// lock). See the package doc, Locking.
func (m *Manager) beginRead() {
	m.readers.Add(1)
	if m.appendLock != nil {
		m.appendLock.Lock()
		m.appendLock.Unlock() // nothing inside: waiting out the append in flight is the point
	}
}

// endRead ends a read of entries started by beginRead.
func (m *Manager) endRead() { m.readers.Add(-1) }

// readEntries runs read between beginRead and endRead, again until no
// Reload ran beside it (reloads even and unchanged), so that no reader of
// entries returns the empty state between a reload's reset and rebuild.
// Every reader of entries goes through it.
func readEntries[T any](m *Manager, read func() T) T {
	for {
		m.beginRead()
		gen := m.reloads.Load()
		v := read()
		m.endRead()
		if gen%2 == 0 && m.reloads.Load() == gen {
			return v
		}
	}
}

// loadMEO returns the MEO.
func (m *Manager) loadMEO() int64 { return m.mapEndOffset.Load() }

// Producer returns a copy of pid's entry. It takes only pid's shard lock,
// after waiting out the append in flight (beginRead).
func (m *Manager) Producer(pid int64) (Entry, bool) {
	type found struct {
		e  Entry
		ok bool
	}
	f := readEntries(m, func() found {
		s := m.shardFor(pid)
		s.mu.Lock()
		defer s.mu.Unlock()
		e := s.producers.get(pid)
		if e == nil {
			return found{}
		}
		return found{e.export(), true}
	})
	return f.e, f.ok
}

// Producers returns a consistent copy of every entry, sorted by producer id.
// The caller must not hold the append lock (ProducersAppendLocked).
func (m *Manager) Producers() []Entry {
	return readEntries(m, m.producers)
}

// ProducersAppendLocked is Producers for a caller that holds
// the append lock (no append is in flight, so there is none to wait
// for), such as a check run as the log closes.
func (m *Manager) ProducersAppendLocked() []Entry { return m.producers() }

// producers is Producers' copy, for a caller either between beginRead and
// endRead or serialised with appends.
func (m *Manager) producers() []Entry {
	m.mu.Lock()
	out := make([]Entry, 0, m.count)
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock() // an append of one batch changes an entry under it alone
		for _, sl := range s.producers.slots {
			if sl.e != nil {
				out = append(out, sl.e.export())
			}
		}
		s.mu.Unlock()
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int { return cmp64(a.ProducerID, b.ProducerID) })
	return out
}

// Len returns the number of producer entries.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}

// MapEndOffset returns the MEO: the state reflects exactly the batches
// with offset below it.
func (m *Manager) MapEndOffset() int64 { return m.loadMEO() }

// SetMapEndOffset sets the MEO (a roll forces it to the new segment base;
// a rebuild sets it to its target). A negative o counts as 0.
func (m *Manager) SetMapEndOffset(o int64) {
	m.mu.Lock()
	m.setMEOLocked(o)
	m.mu.Unlock()
}

// setMEOLocked sets the MEO to o, or to 0 if o is negative (offsets are
// ≥ 0). Caller holds mu.
func (m *Manager) setMEOLocked(o int64) { m.mapEndOffset.Store(max(o, 0)) }

// LastSnapshotOffset returns the offset of the last snapshot written by
// TakeSnapshot or loaded by LoadSnapshot (0 initially).
func (m *Manager) LastSnapshotOffset() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastSnapOffset
}

// SetLastSnapshotOffset records that the newest snapshot of the directory
// is at o (the log calls it after deleting snapshots, §4.2).
func (m *Manager) SetLastSnapshotOffset(o int64) {
	m.mu.Lock()
	m.lastSnapOffset = o
	m.mu.Unlock()
}

// Barriers returns the offsets of the barriers applied since creation,
// the last Reset/TruncateAndReset or the last LoadSnapshot, in order.
// After a load from a snapshot plus replay it lists the barriers met in
// the replay.
func (m *Manager) Barriers() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.barriers)
}

// BarrierCount returns len(Barriers()) without copying.
func (m *Manager) BarrierCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.barriers)
}

// OrphanedTransactions returns how many open transactions barriers have
// dropped since creation (§6.8 R4 error metric; 0 when the writer honoured
// the R2 precondition).
func (m *Manager) OrphanedTransactions() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.orphanedTxns
}

// RemoveExpired removes every producer without an open transaction whose
// last timestamp is at least ProducerIDExpirationMs before nowMs (§4.1).
// Transactions are not touched and no snapshot is taken. It returns the
// number removed. Like Commit, it must not run concurrently with an
// append (the log serialises them).
func (m *Manager) RemoveExpired(nowMs int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	removed := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		removed += s.producers.removeIf(func(e *entry) bool { return m.expired(e, nowMs) })
		s.mu.Unlock()
	}
	m.count -= removed
	return removed
}

func (m *Manager) expired(e *entry, nowMs int64) bool {
	return e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= m.expirationMs
}

// OnLogStartOffsetIncremented applies a log start advance to logStart
// (§4.2): entries stay in memory; unreplicated transactions whose marker
// is below logStart are dropped; MEO := max(MEO, logStart); the first
// unstable offset is clamped up to logStart from now on.
func (m *Manager) OnLogStartOffsetIncremented(logStart int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logStartOffset = logStart
	m.unreplicated = slices.DeleteFunc(m.unreplicated, func(t txnRecord) bool { return t.lastOffset < logStart })
	m.mapEndOffset.Store(max(m.loadMEO(), logStart))
}

// OnHighWatermarkUpdated drops the decided transactions whose marker is
// below hw (§3.5); from then on they no longer pin the first unstable
// offset.
func (m *Manager) OnHighWatermarkUpdated(hw int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unreplicated = slices.DeleteFunc(m.unreplicated, func(t txnRecord) bool { return t.lastOffset < hw })
}

// FirstUnstableOffset returns the first offset of the earliest
// transaction that is open, or decided with its marker not yet below the
// high watermark (§1.4, §3.6), clamped up to the log start offset.
func (m *Manager) FirstUnstableOffset() (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.firstUnstableLocked(-1)
}

// firstUnstableLocked computes the FUO, ignoring unreplicated
// transactions whose marker is below hw (hw < 0: consider all).
func (m *Manager) firstUnstableLocked(hw int64) (int64, bool) {
	fuo, ok := int64(0), false
	if len(m.ongoing) > 0 {
		fuo, ok = m.ongoing[0].firstOffset, true
	}
	for _, t := range m.unreplicated {
		if hw >= 0 && t.lastOffset < hw {
			continue
		}
		if !ok || t.firstOffset < fuo {
			fuo, ok = t.firstOffset, true
		}
	}
	if ok && fuo < m.logStartOffset {
		fuo = m.logStartOffset
	}
	return fuo, ok
}

// LastStableOffset returns min(FUO, highWatermark) (§1.4): FUO when there
// is one below the high watermark, else the high watermark. Decided
// transactions whose marker is below highWatermark are not counted even
// if OnHighWatermarkUpdated has not been called yet.
func (m *Manager) LastStableOffset(highWatermark int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fuo, ok := m.firstUnstableLocked(highWatermark); ok && fuo < highWatermark {
		return fuo
	}
	return highWatermark
}

// OngoingTransactions returns the open transactions, ordered by first
// offset, as CompletedTxn values with LastOffset -1.
func (m *Manager) OngoingTransactions() []CompletedTxn {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]CompletedTxn, len(m.ongoing))
	for i, t := range m.ongoing {
		out[i] = CompletedTxn{ProducerID: t.producerID, FirstOffset: t.firstOffset, LastOffset: -1, LastStableOffset: -1}
	}
	return out
}

// TruncateAndReset clears every entry and transaction, the barrier list,
// MEO and the last snapshot offset (before a reload). The log start
// offset is kept.
func (m *Manager) TruncateAndReset() { m.reset(0) }

// Reload empties the state and rebuilds it (a truncation's reload from a
// snapshot and the log), with readers of entries kept from seeing the
// empty state between the two (reloads). The caller holds the append
// lock, as for any mutation.
func (m *Manager) Reload(r *Rebuild) error {
	m.reloads.Add(1)
	defer m.reloads.Add(1)
	m.reset(0)
	return m.Rebuild(r)
}

// Reset empties the state at mapEndOffset (full truncation, §4.5): no
// producers, no transactions, MEO and last snapshot offset = mapEndOffset
// (0 if it is negative).
func (m *Manager) Reset(mapEndOffset int64) { m.reset(mapEndOffset) }

func (m *Manager) reset(offset int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resetLocked(offset)
}

// resetLocked empties the state and puts the map end offset and the last
// snapshot offset at offset. Caller holds mu.
func (m *Manager) resetLocked(offset int64) {
	m.clearLocked()
	m.unreplicated = m.unreplicated[:0]
	m.barriers = nil
	m.setMEOLocked(offset)
	m.lastSnapOffset = m.loadMEO()
}

// clearLocked removes every producer and open transaction (the barrier's
// effect, also used by resets and loads). Caller holds mu.
func (m *Manager) clearLocked() {
	for i := range m.shards {
		s := &m.shards[i]
		if s.producers.count == 0 {
			continue
		}
		s.mu.Lock()
		s.producers.clear()
		s.mu.Unlock()
	}
	m.count = 0
	m.ongoing = m.ongoing[:0]
	m.slab = nil
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
