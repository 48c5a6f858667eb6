package recovery

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testutil"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
)

// baseTs is the timestamp of offset 0 in the fixture.
const baseTs = 1_700_000_000_000

var testCfg = segment.Config{SegmentBytes: 512 << 10, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 4096}

func testNow() time.Time { return time.UnixMilli(baseTs + 3_600_000) }

// fixtureBatch describes one batch of fixture F (recovery.md §8.1).
type fixtureBatch struct {
	records int
	pid     int64 // 1: idempotent P1; 2: transactional P2
	abort   bool  // an ABORT marker of P2
}

// fixturePlan returns the batches of one segment: P1 data, with P2's
// aborted transaction in S1 and its open transaction at the end of S2.
func fixturePlan() [][]fixtureBatch {
	var s0, s1, s2 []fixtureBatch
	for range 30 {
		s0 = append(s0, fixtureBatch{records: 10, pid: 1})
	}
	for range 10 {
		s1 = append(s1, fixtureBatch{records: 10, pid: 1}) // 300..399
	}
	s1 = append(s1, fixtureBatch{records: 9, pid: 2})  // 400..408
	s1 = append(s1, fixtureBatch{abort: true, pid: 2}) // 409
	for range 19 {
		s1 = append(s1, fixtureBatch{records: 10, pid: 1}) // 410..599
	}
	for range 13 {
		s2 = append(s2, fixtureBatch{records: 10, pid: 1}) // 600..729
	}
	s2 = append(s2, fixtureBatch{records: 10, pid: 2}) // 730..739, left open
	s2 = append(s2, fixtureBatch{records: 10, pid: 1}) // 740..749
	return [][]fixtureBatch{s0, s1, s2}
}

// encodeBatch builds the client bytes of b at offset (for timestamps and
// sequences); the segment stamps the offset and epoch.
func encodeBatch(b fixtureBatch, offset int64, seq map[int64]int32) []byte {
	if b.abort {
		return batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: baseTs + offset,
			ProducerID: b.pid, ProducerEpoch: 0}, false, 3)
	}
	spec := batch.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = b.pid, 0, seq[b.pid]
	spec.Transactional = b.pid == 2
	seq[b.pid] += int32(b.records)
	recs := make([]batch.RecordSpec, b.records)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: baseTs + offset + int64(i), Key: []byte("key"), Value: []byte(strings.Repeat("v", 90))}
	}
	var bld batch.Builder
	out, err := bld.AppendBatch(nil, &spec, recs)
	if err != nil {
		panic(err)
	}
	return out
}

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  error
)

// fixture returns a fresh copy of fixture F: S0 = 0..299, S1 = 300..599
// (with an aborted transaction, hence a .txnindex), S2 = 600..749 (P2's
// transaction open), epochs (0,0),(1,450), snapshots 300, 600, 750, closed
// cleanly with the real segment writer.
func fixture(t testing.TB) string {
	fixtureOnce.Do(func() {
		fixtureDir, fixtureErr = os.MkdirTemp("", "recovery-fixture")
		if fixtureErr == nil {
			fixtureErr = buildFixture(fixtureDir)
		}
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	dir := filepath.Join(t.TempDir(), "t-0")
	testutil.CopyTree(t, fixtureDir, dir)
	return dir
}

func buildFixture(dir string) error {
	m := producerstate.New(producerstate.Config{})
	var a producerstate.Append
	seq := map[int64]int32{}
	offset := int64(0)
	for si, plan := range fixturePlan() {
		s, err := segment.Create(dir, offset, testCfg, testNow())
		if err != nil {
			return err
		}
		for _, b := range plan {
			epoch := int32(0)
			if offset >= 450 {
				epoch = 1
			}
			raw := encodeBatch(b, offset, seq)
			var out segment.Appended
			hdrs, err := batch.CheckAll(raw, nil)
			if err != nil {
				return err
			}
			if err := s.Append(raw, hdrs, segment.Stamp{Assign: true, NextOffset: offset, LeaderEpoch: epoch}, &out); err != nil {
				return err
			}
			v := batch.View(raw)
			v.SetBaseOffset(offset)
			v.SetPartitionLeaderEpoch(epoch)
			m.Begin(&a, producerstate.Replication, baseTs)
			if err := m.Validate(&a, v, offset); err != nil {
				return err
			}
			m.Commit(&a)
			for _, c := range a.CompletedTxns() {
				if c.Aborted {
					if err := s.AppendAbortedTxn(index.AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset,
						LastOffset: c.LastOffset, LastStableOffset: c.LastStableOffset}); err != nil {
						return err
					}
				}
			}
			offset = out.LastOffset + 1
		}
		if err := s.Close(); err != nil {
			return err
		}
		_ = si
		if err := m.TakeSnapshot(dir); err != nil {
			return err
		}
	}
	return checkpoint.WriteLeaderEpochs(filepath.Join(dir, epochFileName),
		[]checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 450}})
}

func diffHashes(a, b map[string]string) []string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, k)
		}
	}
	sort.Strings(d)
	return d
}

func segPath(dir string, base int64, kind string) string { return filenames.Path(dir, base, kind) }

// batchPositions returns (position, base offset, size) of every batch of a
// segment file.
type batchPos struct {
	pos, base, last int64
	size            int
}

func batchesOf(t testing.TB, dir string, base int64) []batchPos {
	t.Helper()
	b, err := os.ReadFile(segPath(dir, base, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	var out []batchPos
	it := batch.NewIterator(b, 0)
	var pos int64
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		out = append(out, batchPos{pos: pos, base: v.BaseOffset(), last: v.LastOffset(), size: len(v)})
		pos += int64(len(v))
	}
	return out
}

// batchAt returns the batch of segment base holding offset.
func batchAt(t testing.TB, dir string, base, offset int64) batchPos {
	t.Helper()
	for _, b := range batchesOf(t, dir, base) {
		if b.base <= offset && offset <= b.last {
			return b
		}
	}
	t.Fatalf("no batch holds offset %d in segment %d", offset, base)
	return batchPos{}
}

func unclean(rp int64) Options {
	return Options{RecoveryPoint: rp, Segment: testCfg, Now: testNow}
}

func clean() Options {
	return Options{Clean: true, RecoveryPoint: 750, Segment: testCfg, Now: testNow}
}

// patch rewrites bytes of a file in place.
func patch(t testing.TB, path string, fn func(b []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fn(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkLoadable asserts that the directory is clean for the Log: every
// segment's batches validate to the end of its file, offsets increase
// across segments, and segment.OpenActive accepts the last segment (on a
// copy, since OpenActive preallocates).
func checkLoadable(t testing.TB, dir string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, de := range des {
		if n, err := filenames.Parse(de.Name()); err == nil && n.Kind == filenames.Log && n.Transient == "" {
			bases = append(bases, n.Offset)
		}
	}
	if len(bases) == 0 {
		t.Fatal("no segment left")
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	last := int64(-1)
	for _, base := range bases {
		b, err := os.ReadFile(segPath(dir, base, filenames.Log))
		if err != nil {
			t.Fatal(err)
		}
		it := batch.NewIterator(b, 0)
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			if v.BaseOffset() <= last || v.BaseOffset() < base {
				t.Fatalf("segment %d: batch %d after %d", base, v.BaseOffset(), last)
			}
			last = v.LastOffset()
		}
		if err := it.Err(); err != nil {
			t.Fatalf("segment %d: %v", base, err)
		}
	}
	cp := filepath.Join(t.TempDir(), "copy")
	testutil.CopyTree(t, dir, cp)
	s, err := segment.OpenActive(cp, bases[len(bases)-1], testCfg, testNow(), segment.Opened{})
	if err != nil {
		t.Fatalf("OpenActive on the repaired directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func batchesOfBytes(b []byte) []batchPos {
	var out []batchPos
	it := batch.NewIterator(b, 0)
	var pos int64
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		out = append(out, batchPos{pos: pos, base: v.BaseOffset(), last: v.LastOffset(), size: len(v)})
		pos += int64(len(v))
	}
	return out
}

// decodeOffsets decodes an offset index file of segment 0.
func decodeOffsets(t testing.TB, b []byte) []index.OffsetEntry {
	t.Helper()
	var out []index.OffsetEntry
	for len(b) >= 8 {
		rel := int64(int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])))
		pos := int32(uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]))
		out = append(out, index.OffsetEntry{Offset: rel, Position: pos})
		b = b[8:]
	}
	return out
}

// writeLiveSegment writes a closed segment at base with the live writer,
// one batch per element of bs (stamped from base on at epoch 1).
func writeLiveSegment(t testing.TB, dir string, base int64, bs [][]byte) {
	t.Helper()
	s, err := segment.Create(dir, base, testCfg, testNow())
	if err != nil {
		t.Fatal(err)
	}
	next := base
	for _, raw := range bs {
		var out segment.Appended
		hdrs, err := batch.CheckAll(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(raw, hdrs, segment.Stamp{Assign: true, NextOffset: next, LeaderEpoch: 1}, &out); err != nil {
			t.Fatal(err)
		}
		next = out.LastOffset + 1
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
