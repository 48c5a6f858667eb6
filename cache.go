package partlog

import (
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/partlog/partlog/segment"
)

// MappingCache bounds the bytes of sealed segments kept mapped by every
// Log that shares it. A broker with thousands of partitions would
// otherwise keep three map areas per segment forever (recovery.md §9
// item 11). Sealed segments are mapped on first read and registered here
// with their size as cost; when the cache evicts (or rejects) one, the
// segment drops its mapping, and the munmap happens when its last reader
// releases its view. The active segments are not counted.
//
// ristretto is used for its admission policy (TinyLFU) and its cost
// accounting: hot segments of busy partitions stay mapped, one-off reads
// of old segments do not push them out.
type MappingCache struct {
	c    *ristretto.Cache[uint64, *segment.Segment]
	next atomic.Uint64
}

// NewMappingCache returns a cache that keeps at most maxBytes of sealed
// segments mapped.
func NewMappingCache(maxBytes int64) (*MappingCache, error) {
	c, err := ristretto.NewCache(&ristretto.Config[uint64, *segment.Segment]{
		NumCounters: 100_000,
		MaxCost:     maxBytes,
		BufferItems: 64,
		OnEvict:     unmapItem,
		OnReject:    unmapItem,
	})
	if err != nil {
		return nil, err
	}
	return &MappingCache{c: c}, nil
}

// unmapItem drops the mapping of an evicted or rejected segment. The
// value is nil when ristretto evicts a key that Del already removed from
// its store but not yet from its policy.
func unmapItem(it *ristretto.Item[*segment.Segment]) {
	if it != nil && it.Value != nil {
		it.Value.Unmap()
	}
}

var (
	defaultCacheOnce sync.Once
	defaultCache     *MappingCache
)

// DefaultMappingCacheBytes is the budget of DefaultMappingCache.
const DefaultMappingCacheBytes = 8 << 30

// DefaultMappingCache returns the process-wide cache used by logs opened
// without Options.MappingCache.
func DefaultMappingCache() *MappingCache {
	defaultCacheOnce.Do(func() {
		c, err := NewMappingCache(DefaultMappingCacheBytes)
		if err != nil {
			panic(err) // only for an invalid constant configuration
		}
		defaultCache = c
	})
	return defaultCache
}

// register makes s report its mappings to the cache and returns the key
// to forget it with.
func (m *MappingCache) register(s *segment.Segment) uint64 {
	key := m.next.Add(1)
	s.SetOnMap(func(s *segment.Segment, cost int64) {
		if !m.c.Set(key, s, max(cost, 1)) {
			s.Unmap()
		}
	})
	return key
}

// forget removes a segment (closed, deleted or made active).
func (m *MappingCache) forget(key uint64) { m.c.Del(key) }

// Wait blocks until pending registrations are applied (for tests).
func (m *MappingCache) Wait() { m.c.Wait() }
