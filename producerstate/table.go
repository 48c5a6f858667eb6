package producerstate

// pidTable is one shard's map from producer id to entry: open
// addressing with linear probing over a power-of-two array of (id,
// entry pointer) slots, at most 3/4 full. It replaces a Go map because
// the lookup is on every idempotent append: the index is one multiply
// and two shifts of the id, a probe is one 16-byte slot (four to a
// cache line) and a hit is usually the first slot looked at. Entries are
// allocated separately and never move, so a pointer to one stays valid
// while the table grows.
//
// It is not safe for concurrent use; the shard's locking applies
// (package doc, Locking).
type pidTable struct {
	slots []pidSlot // nil until the first insert; len is a power of two
	count int       // slots in use
	// The index of pid is the top bits of its Fibonacci hash after the
	// top skip bits, which picked the shard, are shifted out: the bits
	// [skip, skip+log2(len(slots))) of the hash.
	skip  uint8
	shift uint8 // 64 - log2(len(slots))
}

// pidSlot is one slot; e == nil marks it empty.
type pidSlot struct {
	pid int64
	e   *entry
}

// minTableSlots is the size of a table's first array.
const minTableSlots = 8

// fibonacci is 2^64 divided by the golden ratio: multiplying by it
// spreads sequential producer ids over the top bits (Fibonacci hashing).
const fibonacci = 0x9E3779B97F4A7C15

// index is pid's home slot; the table must have slots.
func (t *pidTable) index(pid int64) int {
	// Both shifts are below 64 (masked, so the compiler adds no clamp).
	return int((uint64(pid) * fibonacci << (t.skip & 63)) >> (t.shift & 63))
}

// get returns pid's entry, or nil.
func (t *pidTable) get(pid int64) *entry {
	if len(t.slots) == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.index(pid); ; i++ {
		s := &t.slots[i&mask]
		if s.e == nil {
			return nil
		}
		if s.pid == pid {
			return s.e
		}
	}
}

// put stores e as pid's entry and returns the entry it replaced, or nil
// if pid was not in the table.
func (t *pidTable) put(pid int64, e *entry) *entry {
	if (t.count+1)*4 > len(t.slots)*3 {
		t.resize(max(2*len(t.slots), minTableSlots))
	}
	mask := len(t.slots) - 1
	for i := t.index(pid); ; i++ {
		s := &t.slots[i&mask]
		if s.e == nil {
			s.pid, s.e = pid, e
			t.count++
			return nil
		}
		if s.pid == pid {
			old := s.e
			s.e = e
			return old
		}
	}
}

// resize moves the entries into a new array of n slots (a power of two
// with room for all of them), or drops the array when n is 0 (the table
// must then be empty).
func (t *pidTable) resize(n int) {
	old := t.slots
	if n == 0 {
		t.slots, t.shift = nil, 0
		return
	}
	t.slots = make([]pidSlot, n)
	k := 0
	for 1<<k < n {
		k++
	}
	t.shift = uint8(64 - k)
	mask := n - 1
	for _, s := range old {
		if s.e == nil {
			continue
		}
		for i := t.index(s.pid); ; i++ {
			if d := &t.slots[i&mask]; d.e == nil {
				*d = s
				break
			}
		}
	}
}

// removeIf removes every entry for which drop returns true and returns
// how many went. A linear-probing table cannot simply empty a slot (a
// later entry of the same probe run would become unreachable), so the
// survivors are rehashed into an array sized for them, once, when
// anything went.
func (t *pidTable) removeIf(drop func(*entry) bool) int {
	removed := 0
	for i := range t.slots {
		s := &t.slots[i]
		if s.e != nil && drop(s.e) {
			s.e = nil
			removed++
		}
	}
	if removed == 0 {
		return 0
	}
	// The array now has holes inside probe runs: rehash what is left.
	t.count -= removed
	n := 0
	if t.count > 0 {
		n = minTableSlots
		for t.count*4 > n*3 {
			n *= 2
		}
	}
	t.resize(n)
	return removed
}

// clear empties the table and releases its array.
func (t *pidTable) clear() {
	t.slots, t.count, t.shift = nil, 0, 0
}
