package producerstate

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/snapshot"
)

// BenchmarkValidateCommit measures Begin+Validate+Commit of one idempotent
// Client batch, round-robin over n existing producers, beside a baseline
// that does a plain map lookup+store per batch.
func BenchmarkValidateCommit(b *testing.B) {
	for _, n := range []int{1, 1_000, 1_000_000} {
		b.Run(fmt.Sprintf("producers=%d", n), func(b *testing.B) {
			m := New(Config{})
			v := build(b, data(0, 0, 0, 1))
			seqs := make([]int32, n)
			var a Append
			off := int64(0)
			for pid := 0; pid < n; pid++ {
				setPIDSeq(v, int64(pid), 0)
				m.Begin(&a, Client, 0)
				if err := m.Validate(&a, v, off); err != nil {
					b.Fatal(err)
				}
				m.Commit(&a)
				seqs[pid] = 1
				off++
			}
			b.ReportAllocs()
			b.ResetTimer()
			pid := 0
			for i := 0; i < b.N; i++ {
				setPIDSeq(v, int64(pid), seqs[pid])
				m.Begin(&a, Client, 0)
				if err := m.Validate(&a, v, off); err != nil {
					b.Fatal(err)
				}
				m.Commit(&a)
				seqs[pid]++
				off++
				if pid++; pid == n {
					pid = 0
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mbatches/s")
		})
		b.Run(fmt.Sprintf("baseline_map/producers=%d", n), func(b *testing.B) {
			type st struct{ seq int32 }
			mp := make(map[int64]st, n)
			for pid := 0; pid < n; pid++ {
				mp[int64(pid)] = st{}
			}
			b.ReportAllocs()
			b.ResetTimer()
			pid := 0
			for i := 0; i < b.N; i++ {
				s := mp[int64(pid)]
				s.seq++
				mp[int64(pid)] = s
				if pid++; pid == n {
					pid = 0
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mbatches/s")
		})
	}
}

// BenchmarkParallelLookups runs Producer lookups on all Ps while one
// goroutine appends continuously.
func BenchmarkParallelLookups(b *testing.B) {
	const n = 1000
	m := New(Config{})
	v := build(b, data(0, 0, 0, 1))
	var a Append
	for pid := 0; pid < n; pid++ {
		setPIDSeq(v, int64(pid), 0)
		m.Begin(&a, Client, 0)
		_ = m.Validate(&a, v, int64(pid))
		m.Commit(&a)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := build(b, data(0, 0, 0, 1))
		var a Append
		seqs := make([]int32, n)
		for i := range seqs {
			seqs[i] = 1
		}
		off := int64(n)
		for pid := 0; ; pid = (pid + 1) % n {
			select {
			case <-stop:
				return
			default:
			}
			setPIDSeq(w, int64(pid), seqs[pid])
			m.Begin(&a, Client, 0)
			if m.Validate(&a, w, off) == nil {
				m.Commit(&a)
				seqs[pid]++
				off++
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		pid := int64(0)
		for pb.Next() {
			if _, ok := m.Producer(pid); !ok {
				b.Error("missing")
			}
			pid = (pid + 7) % n
		}
	})
	b.StopTimer()
	close(stop)
	<-done
}

func millionEntries() []snapshot.Entry {
	es := make([]snapshot.Entry, 1_000_000)
	for i := range es {
		es[i] = snapshot.Entry{ProducerID: int64(i), ProducerEpoch: 1, LastSequence: 9, LastOffset: int64(i) * 10,
			OffsetDelta: 9, Timestamp: 1 << 40, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}
	}
	return es
}

// BenchmarkSnapshot1M measures SnapshotEntries+snapshot.Encode and
// snapshot.Decode+LoadSnapshot of 1 000 000 producers, beside
// os.WriteFile/os.ReadFile of the same bytes.
func BenchmarkSnapshot1M(b *testing.B) {
	m := New(Config{})
	m.LoadSnapshot(millionEntries(), 10_000_000, 1<<40)
	buf := snapshot.Encode(nil, m.SnapshotEntries())
	path := filepath.Join(b.TempDir(), "x.snapshot")
	b.Run("SnapshotEntries+Encode", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			buf = snapshot.Encode(buf[:0], m.SnapshotEntries())
		}
	})
	b.Run("Decode+LoadSnapshot", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		r := New(Config{})
		for i := 0; i < b.N; i++ {
			es, err := snapshot.Decode(buf)
			if err != nil {
				b.Fatal(err)
			}
			r.LoadSnapshot(es, 10_000_000, 1<<40)
		}
	})
	b.Run("baseline_os.WriteFile", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			if err := os.WriteFile(path, buf, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline_os.ReadFile", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			if _, err := os.ReadFile(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}
