package cleaner

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/segment"
)

// rec is a test record: a key ("" with noKey for none), a value (tomb for
// a null value).
type rec struct {
	key, value  string
	noKey, tomb bool
}

// tb is a test batch: data records, or a control batch (ctl set).
type tb struct {
	recs  []rec
	pid   int64 // 0: none (-1 in the batch)
	epoch int16
	seq   int32
	txn   bool
	ctl   string // "commit", "abort", "barrier"
	comp  batch.Compression
	ts    int64
	gap   int64 // offsets skipped before this batch
}

func kv(pairs ...string) []rec {
	var out []rec
	for i := 0; i+1 < len(pairs); i += 2 {
		r := rec{key: pairs[i], value: pairs[i+1]}
		if r.value == "∅" {
			r.value, r.tomb = "", true
		}
		if r.key == "-" {
			r.key, r.noKey = "", true
		}
		out = append(out, r)
	}
	return out
}

var testCfg = Config{MinCleanableRatio: 0.5, MaxCompactionLagMs: math.MaxInt64, DeleteRetentionMs: 1000,
	SegmentBytes: 1 << 30, MaxIndexBytes: 10 << 20, IndexIntervalBytes: 4096, MaxBatchBytes: 1 << 20}

// testLog is a log written straight into a directory: sealed segments and
// an (empty) active segment after them.
type testLog struct {
	t    testing.TB
	dir  string
	segs []*segment.Segment
	leo  int64
}

// buildLog writes the segments (each a list of batches) with offsets
// from 0, their indexes and the .txnindex entries of the aborted
// transactions, then an empty active segment at the log end.
func buildLog(t testing.TB, segs [][]tb) *testLog {
	t.Helper()
	l := &testLog{t: t, dir: t.TempDir()}
	var bld batch.Builder
	next := int64(0)
	txnFirst := map[int64]int64{}
	for _, sb := range segs {
		base := next
		var data []byte
		ib := index.NewBuilder(base, 0)
		var txns []byte
		for _, b := range sb {
			next += b.gap
			pos := int64(len(data))
			pid, epoch, seq := int64(-1), int16(-1), int32(-1)
			if b.pid > 0 {
				pid, epoch, seq = b.pid, b.epoch, b.seq
			}
			ts := b.ts
			if ts == 0 {
				ts = 1000 + next
			}
			switch b.ctl {
			case "commit", "abort":
				data = batch.AppendEndTxnMarkerBatch(data, batch.ControlSpec{BaseOffset: next, Timestamp: ts, ProducerID: pid, ProducerEpoch: epoch}, b.ctl == "commit", 5)
				if b.ctl == "abort" {
					txns = index.AppendAbortedTxn(txns, index.AbortedTxn{ProducerID: pid, FirstOffset: txnFirst[pid], LastOffset: next, LastStableOffset: next})
				}
				delete(txnFirst, pid)
				next++
			case "barrier":
				data = batch.AppendMirrorPidResetBatch(data, batch.ControlSpec{BaseOffset: next, Timestamp: ts, ProducerID: -1, ProducerEpoch: -1}, "src")
				next++
			default:
				spec := batch.NewBatchSpec(next)
				spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
				spec.Transactional, spec.Compression = b.txn, b.comp
				var rs []batch.RecordSpec
				for i, r := range b.recs {
					s := batch.RecordSpec{Timestamp: ts + int64(i), Key: []byte(r.key), Value: []byte(r.value)}
					if r.noKey {
						s.Key = nil
					}
					if r.tomb {
						s.Value = nil
					}
					rs = append(rs, s)
				}
				var err error
				if data, err = bld.AppendBatch(data, &spec, rs); err != nil {
					t.Fatal(err)
				}
				if b.txn {
					if _, ok := txnFirst[pid]; !ok {
						txnFirst[pid] = next
					}
				}
				next += int64(max(len(b.recs), 1))
			}
			v := batch.View(data[pos:])
			ib.Add(pos, v.LastOffset(), v.MaxTimestamp())
		}
		offs, times := ib.Finish()
		l.write(base, filenames.Log, data)
		l.write(base, filenames.Index, offs)
		l.write(base, filenames.TimeIndex, times)
		if len(txns) > 0 {
			l.write(base, filenames.TxnIndex, txns)
		}
	}
	l.leo = next
	for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex} {
		l.write(next, k, nil)
	}
	l.open()
	return l
}

func (l *testLog) write(base int64, kind string, data []byte) {
	if err := os.WriteFile(filepath.Join(l.dir, filenames.Make(base, kind)), data, 0o644); err != nil {
		l.t.Fatal(err)
	}
}

var segCfg = segment.Config{SegmentBytes: 1 << 30, MaxIndexBytes: 10 << 20, IndexIntervalBytes: 0}

// open opens every live segment of the directory.
func (l *testLog) open() {
	for _, s := range l.segs {
		_ = s.Close()
	}
	l.segs = nil
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		l.t.Fatal(err)
	}
	for _, e := range ents {
		n, err := filenames.Parse(e.Name())
		if err != nil || n.Kind != filenames.Log || n.Transient != "" {
			continue
		}
		s, err := segment.OpenSealed(l.dir, n.Offset, segCfg, time.Now())
		if err != nil {
			l.t.Fatal(err)
		}
		l.segs = append(l.segs, s)
	}
	sort.Slice(l.segs, func(i, j int) bool { return l.segs[i].BaseOffset() < l.segs[j].BaseOffset() })
	l.t.Cleanup(func() {
		for _, s := range l.segs {
			_ = s.Close()
		}
	})
}

// stats are the planning stats of every segment, the active one last.
func (l *testLog) stats() []SegmentStat {
	var out []SegmentStat
	for _, s := range l.segs {
		ts, _, err := s.MaxTimestampSoFar()
		if err != nil {
			l.t.Fatal(err)
		}
		out = append(out, SegmentStat{Base: s.BaseOffset(), Size: s.Size(), LargestTimestamp: ts, FirstTimestamp: -1})
	}
	return out
}

func (l *testLog) aborted(from, to int64) ([]index.AbortedTxn, error) {
	var out []index.AbortedTxn
	for _, s := range l.segs {
		var err error
		if out, _, err = s.CollectAbortedTxns(out, from, to); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// install follows the swap protocol as the log does.
func (l *testLog) install(group []*segment.Segment, out *Output) error {
	if err := out.RenameSwap(); err != nil {
		return err
	}
	for _, s := range group {
		paths, err := s.RenameDeleted()
		if err != nil {
			return err
		}
		for _, p := range paths {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		return err
	}
	if err := out.RenameLive(); err != nil {
		return err
	}
	ns, err := segment.OpenSealed(l.dir, out.Base(), segCfg, time.Now())
	if err != nil {
		return err
	}
	at := slices.Index(l.segs, group[0])
	l.segs = slices.Concat(l.segs[:at], []*segment.Segment{ns}, l.segs[at+len(group):])
	return nil
}

// clean runs one round over the sealed segments below the active one.
func (l *testLog) clean(w *Worker, firstDirty int64, producers map[int64]LastRecord, now int64, cfg Config) Result {
	l.t.Helper()
	res, err := l.tryClean(w, firstDirty, producers, now, cfg)
	if err != nil {
		l.t.Fatal(err)
	}
	return res
}

func (l *testLog) tryClean(w *Worker, firstDirty int64, producers map[int64]LastRecord, now int64, cfg Config) (Result, error) {
	sealed := l.segs[:len(l.segs)-1]
	st := l.stats()
	var next []int64
	for i := range sealed {
		next = append(next, l.segs[i+1].BaseOffset())
	}
	r := &Round{Dir: l.dir, Segments: slices.Clone(sealed), Stats: st[:len(sealed)], Next: next,
		FirstDirty: firstDirty, FirstUncleanable: l.segs[len(l.segs)-1].BaseOffset(),
		Producers: producers, AbortedTxns: l.aborted, NowMs: now, Config: &cfg, Install: l.install}
	res, err := w.Clean(r)
	l.open()
	return res, err
}

func newTestWorker(t testing.TB, mapBytes int64) *Worker {
	w, err := NewWorker(mapBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// dump lists the log's batches as text: "o:k=v" for records ("k=∅" for a
// tombstone, "-" for no key), "[commit]"/"[abort]"/"[barrier]" for
// markers, "[empty a-b]" for an empty batch, "h" after a batch with a
// delete horizon; batches separated by " | ".
func (l *testLog) dump() string {
	var parts []string
	for _, s := range l.segs {
		rng, err := s.Read(s.BaseOffset(), math.MaxInt64, math.MaxInt64)
		if err != nil {
			l.t.Fatal(err)
		}
		it := batch.NewIterator(rng.Bytes, 0)
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			parts = append(parts, describe(l.t, v))
		}
		if err := it.Err(); err != nil {
			l.t.Fatalf("segment %d: %v", s.BaseOffset(), err)
		}
		rng.Release()
	}
	return strings.Join(parts, " | ")
}

func describe(t testing.TB, v batch.View) string {
	var b strings.Builder
	if v.RecordsCount() == 0 {
		fmt.Fprintf(&b, "[empty %d-%d]", v.BaseOffset(), v.LastOffset())
	}
	data, err := v.RecordData(nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	it := v.Records(data)
	var recs []string
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		switch {
		case v.IsControl():
			_, typ, _ := batch.ParseControlKey(r.Key)
			name := map[batch.ControlType]string{batch.ControlCommit: "commit", batch.ControlAbort: "abort", batch.ControlMirrorPidReset: "barrier"}[typ]
			recs = append(recs, fmt.Sprintf("%d:[%s]", r.Offset, name))
		default:
			k, val := string(r.Key), string(r.Value)
			if r.Key == nil {
				k = "-"
			}
			if r.Value == nil {
				val = "∅"
			}
			recs = append(recs, fmt.Sprintf("%d:%s=%s", r.Offset, k, val))
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	b.WriteString(strings.Join(recs, " "))
	if v.HasDeleteHorizon() {
		b.WriteString(" h")
	}
	return b.String()
}
