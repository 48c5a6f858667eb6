package segment

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/filenames"
)

// TestTimeIndexedMatchesAsking: skipping the time index on appends whose
// largest timestamp is not above timeIndexed writes the same time index
// as asking it at every offset-index entry (Kafka's cadence): the same
// random appends (timestamps growing, flat, going back) and truncations
// go to two segments, one of which forgets timeIndexed before every
// append; they roll at the same append and seal to identical indexes.
func TestTimeIndexedMatchesAsking(t *testing.T) {
	created := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		// A small time index in half the runs, so that it fills first.
		cfg := Config{SegmentBytes: 256 << 10, MaxIndexBytes: 64 << 10, IndexIntervalBytes: int64(200 + rng.IntN(2000))}
		if seed%2 == 0 {
			cfg.MaxIndexBytes = 240
		}
		var segs [2]*Segment
		for i := range segs {
			s, err := Create(t.TempDir(), 0, cfg, created)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			segs[i] = s
		}
		ts := int64(1000)
		for i := 0; i < 100_000; i++ {
			switch r := rng.IntN(10); {
			case r < 5:
				ts += int64(rng.IntN(50))
			case r < 7:
				ts -= int64(rng.IntN(50))
			}
			if i%40 == 39 && segs[0].NextOffset() > 2 {
				// Cut a little off the end (the segment still fills).
				to := max(0, segs[0].NextOffset()-1-rng.Int64N(8))
				for _, s := range segs {
					if _, err := s.TruncateTo(to, created); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			src := segMakeBatch(t, 1+rng.IntN(4), rng.IntN(600), ts)
			segs[1].timeIndexed = math.MinInt64
			r0, _ := appendLeaderOrGeneral(t, segs[0], src, 1, -1, 0, created)
			r1, _ := appendLeaderOrGeneral(t, segs[1], src, 1, -1, 0, created)
			if r0 != r1 {
				t.Fatalf("seed %d append %d: rolled %v and %v", seed, i, r0, r1)
			}
			if r0 {
				break
			}
			if i == 100_000-1 {
				t.Fatalf("seed %d: no roll", seed)
			}
		}
		var files [2][]byte
		for i, s := range segs {
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(s.Path(filenames.TimeIndex))
			if err != nil {
				t.Fatal(err)
			}
			files[i] = b
		}
		if !bytes.Equal(files[0], files[1]) {
			t.Fatalf("seed %d: time indexes differ: %d and %d bytes", seed, len(files[0]), len(files[1]))
		}
		if len(files[0]) == 0 {
			t.Fatalf("seed %d: empty time index", seed)
		}
	}
}
