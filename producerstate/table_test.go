package producerstate

import (
	"math/rand/v2"
	"testing"
)

// TestPidTable: the table agrees with a Go map over random puts
// (new ids and replacements), gets of present and absent ids and
// removals, for sequential, random and negative ids (a snapshot may hold
// any id) and every shard split; entries never move; the load stays at
// most 3/4.
func TestPidTable(t *testing.T) {
	for _, skip := range []uint8{0, 1, 4, 10} {
		rng := rand.New(rand.NewPCG(uint64(skip), 7))
		var tb pidTable
		tb.skip = skip
		ref := map[int64]*entry{}
		id := func() int64 {
			switch rng.IntN(4) {
			case 0:
				return int64(rng.IntN(5000)) // sequential ids, as brokers hand them out
			case 1:
				return -1 - int64(rng.IntN(4))
			default:
				return int64(rng.Uint64() >> 1)
			}
		}
		check := func(step int) {
			t.Helper()
			if tb.count != len(ref) {
				t.Fatalf("skip %d step %d: count %d, want %d", skip, step, tb.count, len(ref))
			}
			if tb.count*4 > len(tb.slots)*3 {
				t.Fatalf("skip %d step %d: %d entries in %d slots", skip, step, tb.count, len(tb.slots))
			}
			for pid, e := range ref {
				if got := tb.get(pid); got != e {
					t.Fatalf("skip %d step %d: get(%d) = %p, want %p", skip, step, pid, got, e)
				}
			}
			seen := 0
			for _, s := range tb.slots {
				if s.e != nil {
					seen++
					if ref[s.pid] != s.e {
						t.Fatalf("skip %d step %d: slot of %d holds a stale entry", skip, step, s.pid)
					}
				}
			}
			if seen != len(ref) {
				t.Fatalf("skip %d step %d: %d slots in use, want %d", skip, step, seen, len(ref))
			}
		}
		for step := range 20_000 {
			switch r := rng.IntN(100); {
			case r < 60:
				pid := id()
				e := &entry{producerID: pid}
				old := tb.put(pid, e)
				if old != ref[pid] {
					t.Fatalf("skip %d step %d: put(%d) replaced %p, want %p", skip, step, pid, old, ref[pid])
				}
				ref[pid] = e
			case r < 98:
				pid := id()
				if got := tb.get(pid); got != ref[pid] {
					t.Fatalf("skip %d step %d: get(%d) = %p, want %p", skip, step, pid, got, ref[pid])
				}
			default:
				mod := int64(2 + rng.IntN(5))
				drop := func(e *entry) bool { return e.producerID%mod == 0 }
				want := 0
				for pid, e := range ref {
					if drop(e) {
						delete(ref, pid)
						want++
					}
				}
				if got := tb.removeIf(drop); got != want {
					t.Fatalf("skip %d step %d: removeIf removed %d, want %d", skip, step, got, want)
				}
			}
			if step%1000 == 0 {
				check(step)
			}
		}
		check(-1)
		tb.removeIf(func(*entry) bool { return true })
		if tb.count != 0 || tb.slots != nil || tb.get(0) != nil {
			t.Fatalf("skip %d: not empty after removing everything", skip)
		}
		tb.put(3, &entry{})
		tb.clear()
		if tb.count != 0 || tb.get(3) != nil {
			t.Fatalf("skip %d: not empty after clear", skip)
		}
	}
}

// TestShardsAndTablesSpreadSequentialIDs: sequential producer ids spread
// over every shard, and each shard's table uses other bits of the hash
// than the shard index (so a shard's ids do not pile up in a few slots).
func TestShardsAndTablesSpreadSequentialIDs(t *testing.T) {
	m := New(Config{})
	const n = 16_000
	for pid := range int64(n) {
		sh := m.shardFor(pid)
		sh.producers.put(pid, &entry{producerID: pid})
	}
	for i := range m.shards {
		tb := &m.shards[i].producers
		if c := tb.count; c < n/len(m.shards)/2 || c > 2*n/len(m.shards) {
			t.Fatalf("shard %d holds %d of %d ids", i, c, n)
		}
		// Average probe length of a hit: a clustered table would have long
		// runs.
		probes := 0
		mask := len(tb.slots) - 1
		for j, s := range tb.slots {
			if s.e != nil {
				probes += (j-tb.index(s.pid))&mask + 1
			}
		}
		if avg := float64(probes) / float64(tb.count); avg > 3 {
			t.Fatalf("shard %d: %.2f probes per hit", i, avg)
		}
	}
}
