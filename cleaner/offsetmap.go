package cleaner

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"

	"golang.org/x/sys/unix"
)

// OffsetMap maps the keys of a log's dirty section to the offset of their
// last record, in a fixed amount of memory (Kafka's SkimpyOffsetMap and
// log.cleaner.dedupe.buffer.size). A key is stored as a 128-bit digest (two
// independently seeded hashes; Kafka stores MD5's 128 bits), so two keys
// are taken for one only with probability ~n²/2¹²⁹: the cleaner then keeps
// the older record's key out of the log, as Kafka would on an MD5
// collision.
//
// Layout: an anonymous mapping of Bytes() bytes, reserved at creation and
// touched only as far as a round needs: Reset sizes the table for the keys
// the round can hold at most (the offsets of its dirty section), so a small
// dirty section touches little of it, and Release hands the touched pages
// back to the kernel. Slots are 24 bytes (digest 16, offset 8), open
// addressing with linear probing from a position drawn from the digest; an
// all-zero digest marks an empty slot. The table takes keys up to
// loadFactor of its slots (Kafka's log.cleaner.io.buffer.load.factor, 0.9).
//
// Not safe for concurrent use: a worker owns one.
type OffsetMap struct {
	mem        []byte
	slots      uint64 // slots of this round, ≤ len(mem)/slotSize
	entries    int64
	maxEntries int64
	latest     int64
	seed1      maphash.Seed
	seed2      maphash.Seed
}

const (
	slotSize = 24
	// loadFactor is Kafka's default log.cleaner.io.buffer.load.factor.
	loadFactor = 0.9
	// minSlots keeps tiny rounds from probing long runs.
	minSlots = 1024
)

// NewOffsetMap reserves a map of size bytes (at least one page).
func NewOffsetMap(size int64) (*OffsetMap, error) {
	size = max(size-size%slotSize, slotSize*minSlots)
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("partlog/cleaner: reserve an offset map of %d bytes: %w", size, err)
	}
	m := &OffsetMap{mem: mem, seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), latest: -1}
	m.Reset(1) // touches minSlots only; a round resets it to its size
	return m, nil
}

// Bytes is the map's memory bound.
func (m *OffsetMap) Bytes() int64 { return int64(len(m.mem)) }

// Capacity is how many keys the map takes at most (in any round).
func (m *OffsetMap) Capacity() int64 {
	return int64(float64(len(m.mem)/slotSize) * loadFactor)
}

// Reset empties the map for a round that will offer at most expected
// keys (0 or less: unknown, the whole map), and forgets the latest offset.
func (m *OffsetMap) Reset(expected int64) {
	total := uint64(len(m.mem) / slotSize)
	want := total
	if expected > 0 {
		want = min(total, max(minSlots, uint64(float64(expected)/loadFactor)+1))
	}
	clear(m.mem[:max(m.slots, want)*slotSize])
	m.slots = want
	m.entries = 0
	m.maxEntries = int64(float64(want) * loadFactor)
	m.latest = -1
}

// Release gives the pages the map touched back to the kernel (an idle
// worker's map costs no memory); the map stays usable and empty.
func (m *OffsetMap) Release() error {
	n := m.slots * slotSize
	n += uint64(unix.Getpagesize()) - 1
	n -= n % uint64(unix.Getpagesize())
	n = min(n, uint64(len(m.mem)))
	m.slots, m.entries = 0, 0
	if n == 0 {
		return nil
	}
	return unix.Madvise(m.mem[:n], unix.MADV_DONTNEED)
}

// Close unmaps the map.
func (m *OffsetMap) Close() error {
	if m.mem == nil {
		return nil
	}
	err := unix.Munmap(m.mem)
	m.mem = nil
	return err
}

// Full reports whether the map holds as many keys as this round allows
// (Kafka checks this before every put).
func (m *OffsetMap) Full() bool { return m.entries >= m.maxEntries }

// Size is the number of keys held.
func (m *OffsetMap) Size() int64 { return m.entries }

// Utilization is the fraction of this round's slots in use.
func (m *OffsetMap) Utilization() float64 {
	if m.slots == 0 {
		return 0
	}
	return float64(m.entries) / float64(m.slots)
}

// LatestOffset is the last offset the map covers (-1: none).
func (m *OffsetMap) LatestOffset() int64 { return m.latest }

// UpdateLatestOffset records that the map covers the log up to o.
func (m *OffsetMap) UpdateLatestOffset(o int64) { m.latest = max(m.latest, o) }

func (m *OffsetMap) digest(key []byte) (uint64, uint64) {
	h1, h2 := maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)
	if h1 == 0 && h2 == 0 {
		h2 = 1 // all-zero marks an empty slot
	}
	return h1, h2
}

// find returns the slot holding the digest, or the empty slot where it
// would go.
func (m *OffsetMap) find(h1, h2 uint64) (slot uint64, found bool) {
	hi, _ := bits.Mul64(h1, m.slots)
	for i := hi; ; {
		e := m.mem[i*slotSize : i*slotSize+slotSize]
		a, b := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
		if a == h1 && b == h2 {
			return i, true
		}
		if a == 0 && b == 0 {
			return i, false
		}
		if i++; i == m.slots {
			i = 0
		}
	}
}

// Put records offset as the latest for key; a key already held takes the
// new offset. It returns false, storing nothing, for a new key when the
// map is Full.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	h1, h2 := m.digest(key)
	i, found := m.find(h1, h2)
	e := m.mem[i*slotSize : i*slotSize+slotSize]
	if !found {
		if m.entries >= m.maxEntries {
			return false
		}
		binary.LittleEndian.PutUint64(e, h1)
		binary.LittleEndian.PutUint64(e[8:], h2)
		m.entries++
	}
	binary.LittleEndian.PutUint64(e[16:], uint64(offset))
	m.latest = max(m.latest, offset)
	return true
}

// Get returns the latest offset of key, or -1 when the map does not hold
// it.
func (m *OffsetMap) Get(key []byte) int64 {
	h1, h2 := m.digest(key)
	i, found := m.find(h1, h2)
	if !found {
		return -1
	}
	return int64(binary.LittleEndian.Uint64(m.mem[i*slotSize+16:]))
}
