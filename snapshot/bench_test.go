package snapshot

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// benchEntries is the size of the large benchmarks: the goal is a write and
// a load of 1,000,000 producers each under 250 ms.
const benchEntries = 1_000_000

func benchData(b *testing.B) ([]Entry, []byte) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	entries := randomEntries(r, benchEntries)
	return entries, Encode(nil, entries)
}

// BenchmarkWrite compares Write (encode, temp file, fsync, rename, dir
// fsync) with plain os.WriteFile of the same bytes, with and without an
// fsync. The ratio Write/WriteFileSync is the cost of encoding plus the
// rename protocol.
func BenchmarkWrite(b *testing.B) {
	entries, raw := benchData(b)
	dir := b.TempDir()
	b.Run("snapshot.Write/1M", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if err := Write(dir, 1000, entries); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline.WriteFile/1M", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		p := filepath.Join(dir, "baseline")
		for b.Loop() {
			if err := os.WriteFile(p, raw, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline.WriteFileSync/1M", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		p := filepath.Join(dir, "baseline-sync")
		for b.Loop() {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(raw); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Encode/1M", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		buf := make([]byte, 0, len(raw))
		for b.Loop() {
			buf = Encode(buf[:0], entries)
		}
	})
}

// BenchmarkRead compares Read (read the file, check the CRC, decode into a
// preallocated slice) with plain os.ReadFile of the same file.
func BenchmarkRead(b *testing.B) {
	entries, raw := benchData(b)
	dir := b.TempDir()
	if err := Write(dir, 1000, entries); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(dir, filenames.Make(1000, filenames.Snapshot))
	b.Run("snapshot.Read/1M", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			got, err := Read(p)
			if err != nil || len(got) != benchEntries {
				b.Fatal(len(got), err)
			}
		}
	})
	b.Run("baseline.ReadFile/1M", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			got, err := os.ReadFile(p)
			if err != nil || len(got) != len(raw) {
				b.Fatal(len(got), err)
			}
		}
	})
	b.Run("Decode/1M", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
