package partlog

import (
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/internal/checkpoint"
)

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry = checkpoint.EpochEntry

// epochCache is the leader-epoch cache of a partition and its
// leader-epoch-checkpoint file (formats.md §6.5): epochs strictly
// increase, and so do their start offsets. Writers hold the log's
// appendMu; mu lets readers copy the entries concurrently.
type epochCache struct {
	path    string
	mu      sync.RWMutex // guards entries
	entries []EpochEntry
	// latestEpoch mirrors the last entry's epoch (-1 when empty) so the
	// append path reads it without a lock; written under mu. It points
	// into the Log's hot lines (Log.latestEpoch).
	latestEpoch *atomic.Int32
}

// loadEpochCache makes the cache of dir holding entries (what recovery
// decided), or, when entries is nil, what leader-epoch-checkpoint holds,
// publishing its latest epoch into *latest.
func loadEpochCache(dir string, entries []EpochEntry, latest *atomic.Int32) (*epochCache, error) {
	c := &epochCache{path: filepath.Join(dir, checkpoint.LeaderEpochFile), latestEpoch: latest}
	if entries == nil {
		var err error
		if entries, err = checkpoint.ReadLeaderEpochs(c.path); err != nil {
			return nil, err
		}
	}
	c.entries = slices.Clone(entries)
	c.publishLatest()
	return c, nil
}

// latest returns the latest epoch, or -1.
func (c *epochCache) latest() int32 { return c.latestEpoch.Load() }

// publishLatest refreshes latestEpoch. Caller holds mu (or owns c).
func (c *epochCache) publishLatest() {
	if len(c.entries) == 0 {
		c.latestEpoch.Store(-1)
		return
	}
	c.latestEpoch.Store(c.entries[len(c.entries)-1].Epoch)
}

// assign records that epoch starts at startOffset if it is newer than
// the latest, and rewrites the checkpoint (fsynced) when it changed.
// Kafka also drops entries whose start offset is not below startOffset.
func (c *epochCache) assign(epoch int32, startOffset int64) error {
	if epoch < 0 {
		return nil
	}
	c.mu.Lock()
	n := len(c.entries)
	if n > 0 && c.entries[n-1].Epoch >= epoch {
		c.mu.Unlock()
		return nil
	}
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= startOffset {
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return c.unlockAndWrite(true)
}

// truncateFromEnd removes entries starting at or after offset.
func (c *epochCache) truncateFromEnd(offset int64) error {
	c.mu.Lock()
	n := len(c.entries)
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= offset {
		c.entries = c.entries[:len(c.entries)-1]
	}
	return c.unlockAndWrite(len(c.entries) != n)
}

// truncateFromStart drops the entries starting at or below offset; the
// last of them comes back with its start moved to offset (Kafka's
// truncateFromStart), so the epoch in force at offset is kept.
func (c *epochCache) truncateFromStart(offset int64) error {
	c.mu.Lock()
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= offset {
		i++
	}
	changed := false
	if i > 0 {
		keep := c.entries[i-1]
		keep.StartOffset = offset
		rest := slices.Clone(c.entries[i:])
		c.entries = append([]EpochEntry{keep}, rest...)
		changed = true
	}
	return c.unlockAndWrite(changed)
}

// unlockAndWrite ends a change of the entries made under c.mu: it
// publishes the latest epoch, releases c.mu and, when the entries
// changed, writes the checkpoint (outside the lock, from a copy).
func (c *epochCache) unlockAndWrite(changed bool) error {
	snapshot := slices.Clone(c.entries)
	c.publishLatest()
	c.mu.Unlock()
	if !changed {
		return nil
	}
	return checkpoint.WriteLeaderEpochs(c.path, snapshot)
}

// clear removes every entry and writes the empty checkpoint.
func (c *epochCache) clear() error {
	c.mu.Lock()
	c.entries = nil
	c.publishLatest()
	c.mu.Unlock()
	return checkpoint.WriteLeaderEpochs(c.path, nil)
}

// list returns a copy of the entries.
func (c *epochCache) list() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.entries)
}
