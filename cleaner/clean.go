package cleaner

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/segment"
)

// LastRecord is what the live producer state holds of one producer (Kafka's
// LastRecord): the cleaner keeps the batch that carries it.
type LastRecord struct {
	// LastDataOffset is the last offset of the producer's last data batch,
	// -1 when its state holds none (after a marker that bumped its epoch).
	LastDataOffset int64
	// Epoch is its producer epoch.
	Epoch int16
}

// Round is one cleaning of one log, as the log hands it to a Worker.
type Round struct {
	// Dir is the partition directory (the cleaned segments are written
	// there).
	Dir string
	// Segments are the log's segments from its first up to the last whose
	// base is below FirstUncleanable (never the active one), oldest
	// first; the log keeps them open for the round. Stats are their
	// stats, Next[i] the base of the segment after Segments[i] (the end of
	// its offsets).
	Segments []*segment.Segment
	Stats    []SegmentStat
	Next     []int64
	// FirstDirty and FirstUncleanable are the plan's.
	FirstDirty, FirstUncleanable int64
	// Producers is the live producer state's last record of each producer.
	Producers map[int64]LastRecord
	// AbortedTxns returns the aborted transactions that overlap [from, to),
	// from every transaction index of the log (Log.AbortedTransactions).
	AbortedTxns func(from, to int64) ([]index.AbortedTxn, error)
	// NowMs is the round's clock (delete horizons are compared with it).
	NowMs  int64
	Config *Config
	// Install puts a cleaned group in place of the segments it replaces
	// (consecutive, offset order), following the swap protocol (Output,
	// package doc). An error stops the round; while out is still .cleaned
	// the round removes its files.
	Install func(group []*segment.Segment, out *Output) error
	// Stop, when set, is asked between chunks of work: true stops the
	// round with ErrStopped.
	Stop func() bool
}

// Result says what a round did.
type Result struct {
	// EndOffset is where the next round's dirty section starts (the
	// cleaner-offset-checkpoint value): the offset after the last one the
	// offset map covered.
	EndOffset int64
	// Groups is the number of cleaned segments installed; Unchanged the
	// groups of one segment that kept every batch as it was, left in
	// place rather than rewritten.
	Groups, Unchanged int
	// BytesRead and BytesWritten are the .log bytes the cleaning read and
	// wrote; MapBytesRead those read to build the offset map.
	BytesRead, BytesWritten, MapBytesRead int64
	// RecordsRead and RecordsKept count the records of the batches read
	// and of the batches written.
	RecordsRead, RecordsKept int64
	// Keys is the number of keys in the offset map, Utilization the
	// fraction of its slots they took.
	Keys        int64
	Utilization float64
	Elapsed     time.Duration
}

// Errors of a round.
var (
	// ErrStopped: Round.Stop asked the round to stop (the log closed, was
	// truncated or its segments changed).
	ErrStopped = errors.New("partlog/cleaner: cleaning stopped")
	// ErrUncleanable: the log holds something the cleaner cannot clean (a
	// corrupt batch, a legacy message, a batch too large to decompress);
	// the error says what and where. Kafka marks such a partition
	// uncleanable.
	ErrUncleanable = errors.New("partlog/cleaner: log cannot be cleaned")
)

// Worker is what one cleaning needs: the offset map, buffers and the
// pool's throttle. A worker cleans one log at a time.
type Worker struct {
	m        *OffsetMap
	throttle *Throttle
	bld      batch.Builder
	scratch  []byte // decompressed records
	built    []byte // one built batch
	keep     []bool
	aborted  []index.AbortedTxn
}

// NewWorker returns a worker with an offset map of mapBytes; throttle may
// be nil.
func NewWorker(mapBytes int64, throttle *Throttle) (*Worker, error) {
	m, err := NewOffsetMap(mapBytes)
	if err != nil {
		return nil, err
	}
	return &Worker{m: m, throttle: throttle}, nil
}

// Map is the worker's offset map.
func (w *Worker) Map() *OffsetMap { return w.m }

// Release hands the memory the worker touched back (an idle worker costs
// nothing); it stays usable.
func (w *Worker) Release() error {
	w.scratch, w.built, w.keep, w.aborted = nil, nil, nil, nil
	return w.m.Release()
}

// Close releases the worker for good.
func (w *Worker) Close() error { return w.m.Close() }

// maxDecompressed bounds the decompressed records of one batch.
const maxDecompressed = 256 << 20

// checkEvery is how many bytes of work go between Stop checks and
// throttle accounting.
const checkEvery = 1 << 20

// pass is the state of one round.
type pass struct {
	w   *Worker
	r   *Round
	res Result
	// lastMarker is, per live producer, the base offset of its last
	// control batch in the round's segments (partlog keeps it; package
	// doc, "Producer state").
	lastMarker map[int64]int64
	sinceCheck int
}

func (p *pass) check(n int) error {
	p.sinceCheck += n
	if p.sinceCheck < checkEvery {
		return nil
	}
	p.sinceCheck = 0
	stop := p.r.Stop
	if stop != nil && stop() {
		return ErrStopped
	}
	if !p.w.throttle.Wait(checkEvery, stop) {
		return ErrStopped
	}
	return nil
}

// Clean runs one round: it builds the offset map over the dirty section,
// then rewrites every segment from the log's first up to the map's end,
// group by group, and installs each cleaned group. On error, the groups
// already installed stay (each is a complete cleaning of its range).
func (w *Worker) Clean(r *Round) (Result, error) {
	start := time.Now()
	p := &pass{w: w, r: r, res: Result{EndOffset: r.FirstDirty}}
	if r.FirstDirty >= r.FirstUncleanable || len(r.Segments) == 0 {
		return p.res, nil
	}
	if len(r.Producers) > 0 {
		if err := p.findLastMarkers(); err != nil {
			return p.res, err
		}
	}
	end, err := p.buildMap()
	if err != nil {
		return p.res, err
	}
	p.res.Keys, p.res.Utilization = w.m.Size(), w.m.Utilization()
	groups := Group(r.Stats, end, r.FirstUncleanable, r.Config)
	t := newTxnTracker()
	for _, g := range groups {
		if err := p.cleanGroup(g[0], g[1], t, r.FirstUncleanable); err != nil {
			return p.res, err
		}
	}
	p.res.EndOffset = end
	p.res.Elapsed = time.Since(start)
	return p.res, nil
}

// segmentData maps segment i whole; release must be called.
func (p *pass) segmentData(i int) ([]byte, func(), error) {
	s := p.r.Segments[i]
	rng, err := s.Read(s.BaseOffset(), math.MaxInt64, math.MaxInt64)
	if err != nil {
		return nil, nil, fmt.Errorf("partlog/cleaner: read segment %d: %w", s.BaseOffset(), err)
	}
	return rng.Bytes, rng.Release, nil
}

func uncleanable(s *segment.Segment, pos int64, err error) error {
	return fmt.Errorf("%w: segment %d at position %d: %w", ErrUncleanable, s.BaseOffset(), pos, err)
}

// findLastMarkers walks the batch headers of the round's segments for the
// last control batch of each live producer.
func (p *pass) findLastMarkers() error {
	p.lastMarker = map[int64]int64{}
	for i := range p.r.Segments {
		data, release, err := p.segmentData(i)
		if err != nil {
			return err
		}
		// Up to the first entry that does not frame as a batch: the
		// cleaning pass reports it.
		w := batch.NewWalker(data)
		for v, ok := w.Next(); ok; v, ok = w.Next() {
			if v.Magic() == batch.MagicV2 && v.IsControl() {
				if _, live := p.r.Producers[v.ProducerID()]; live {
					p.lastMarker[v.ProducerID()] = v.BaseOffset()
				}
			}
		}
		release()
		if err := p.check(len(data)); err != nil {
			return err
		}
	}
	return nil
}

// controlType reads the type of a control batch's record; ok is false for
// an empty control batch.
func (w *Worker) controlType(v batch.View) (typ batch.ControlType, ok bool, err error) {
	if v.RecordsCount() <= 0 {
		return 0, false, nil
	}
	var rec batch.Record
	typ, data, err := v.ControlRecord(w.scratch[:0], &rec)
	w.keepScratch(v, data)
	return typ, err == nil, err
}

// records returns v's decompressed records, keeping a grown buffer.
func (w *Worker) records(v batch.View) ([]byte, error) {
	data, err := v.RecordData(w.scratch[:0], maxDecompressed)
	if err != nil {
		return nil, err
	}
	w.keepScratch(v, data)
	return data, nil
}

// keepScratch keeps data, v's records decompressed into the worker's
// scratch, as the scratch when decompressing grew it: the next batch of
// the pass reuses it.
func (w *Worker) keepScratch(v batch.View, data []byte) {
	if v.Compression() != batch.CompressionNone && cap(data) > cap(w.scratch) {
		w.scratch = data[:0]
	}
}

// buildMap fills the offset map with the keys of the dirty section
// (Kafka's buildOffsetMap) and returns the end of the section it covers:
// the whole dirty section, or less when the map filled up.
func (p *pass) buildMap() (int64, error) {
	w, r := p.w, p.r
	m := w.m
	m.Reset(r.FirstUncleanable - r.FirstDirty)
	t := newTxnTracker()
	aborted, err := r.AbortedTxns(r.FirstDirty, r.FirstUncleanable)
	if err != nil {
		return 0, err
	}
	t.add(aborted)
	for i, s := range r.Segments {
		if r.Next[i] <= r.FirstDirty || s.BaseOffset() >= r.FirstUncleanable {
			continue
		}
		data, release, err := p.segmentData(i)
		if err != nil {
			return 0, err
		}
		full, err := func() (bool, error) {
			defer release()
			pos := int64(0)
			if r.FirstDirty > s.BaseOffset() {
				if pos, _, err = s.PositionOf(r.FirstDirty); err != nil {
					return false, err
				}
			}
			it := batch.NewIterator(data[pos:], pos)
			for v, ok := it.Next(); ok; v, ok = it.Next() {
				p.res.MapBytesRead += int64(len(v))
				if err := p.check(len(v)); err != nil {
					return false, err
				}
				if v.IsControl() {
					typ, has, err := w.controlType(v)
					if err != nil {
						return false, uncleanable(s, it.Position()-int64(len(v)), err)
					}
					t.onControl(v, typ, has)
				} else if !t.onData(v) {
					recs, err := w.records(v)
					if err != nil {
						return false, uncleanable(s, it.Position()-int64(len(v)), err)
					}
					ri := v.Records(recs)
					for rec, ok := ri.Next(); ok; rec, ok = ri.Next() {
						if rec.Key == nil || rec.Offset < r.FirstDirty {
							continue
						}
						if m.Full() {
							return true, nil
						}
						m.Put(rec.Key, rec.Offset)
					}
					if err := ri.Err(); err != nil {
						return false, uncleanable(s, it.Position()-int64(len(v)), err)
					}
				}
				if v.LastOffset() >= r.FirstDirty {
					m.UpdateLatestOffset(v.LastOffset())
				}
			}
			if err := it.Err(); err != nil {
				return false, uncleanable(s, it.Position(), err)
			}
			return false, nil
		}()
		if err != nil {
			return 0, err
		}
		if full {
			break
		}
		// Offsets of the segment past its last batch (gaps) are covered.
		m.UpdateLatestOffset(min(r.Next[i], r.FirstUncleanable) - 1)
	}
	return m.LatestOffset() + 1, nil
}

// cleanGroup rewrites Segments[from:to] into one cleaned segment and has
// it installed.
func (p *pass) cleanGroup(from, to int, t *txnTracker, upperBound int64) error {
	r := p.r
	out, err := createOutput(r.Dir, r.Segments[from].BaseOffset(), r.Config.IndexIntervalBytes)
	if err != nil {
		return err
	}
	installed := false
	defer func() {
		if !installed {
			_ = out.Remove()
		}
	}()
	t.kept = t.kept[:0]
	var modified time.Time
	same := to-from == 1 // a lone segment may come out as it went in
	for i := from; i < to; i++ {
		verbatim, err := p.cleanSegment(i, out, t, upperBound)
		if err != nil {
			return err
		}
		same = same && verbatim
		if mod, err := r.Segments[i].LastModified(); err == nil {
			modified = mod
		}
	}
	if same {
		// Every batch kept as it was: the segment is left as it is (Kafka
		// rewrites it), unless its transaction index changes.
		s := r.Segments[from]
		had, _, err := s.CollectAbortedTxns(nil, s.BaseOffset(), r.Next[from])
		if err != nil {
			return err
		}
		if slices.Equal(had, t.kept) {
			p.res.Unchanged++
			return nil
		}
	}
	if err := out.finish(t.kept, modified); err != nil {
		return err
	}
	p.res.BytesWritten += out.Size()
	if err := r.Install(r.Segments[from:to], out); err != nil {
		return err
	}
	installed = true
	p.res.Groups++
	return nil
}

// cleanSegment writes what Segments[i] keeps into out, and reports
// whether it kept every batch as it was.
func (p *pass) cleanSegment(i int, out *Output, t *txnTracker, upperBound int64) (verbatim bool, _ error) {
	r, w := p.r, p.w
	s := r.Segments[i]
	data, release, err := p.segmentData(i)
	if err != nil {
		return false, err
	}
	defer release()
	aborted, err := r.AbortedTxns(s.BaseOffset(), r.Next[i])
	if err != nil {
		return false, err
	}
	t.add(aborted)
	// [runStart, runEnd) are batches copied as they are, not yet written
	// (written in one go, straight from the mapping).
	runStart, runEnd := 0, 0
	flushRun := func() error {
		err := out.appendRun(data[runStart:runEnd])
		runStart = runEnd
		return err
	}
	changed := false
	it := batch.NewIterator(data, 0)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		pos := int(it.Position()) - len(v)
		p.res.BytesRead += int64(len(v))
		p.res.RecordsRead += int64(max(v.RecordsCount(), 0))
		if err := p.check(len(v)); err != nil {
			return false, err
		}
		d, err := p.decide(v, t, upperBound)
		if err != nil {
			return false, uncleanable(s, int64(pos), err)
		}
		p.res.RecordsKept += int64(d.kept)
		if d.verbatim {
			if runEnd != pos {
				if err := flushRun(); err != nil {
					return false, err
				}
				runStart = pos
			}
			runEnd = pos + len(v)
			continue
		}
		changed = true
		if err := flushRun(); err != nil {
			return false, err
		}
		runStart, runEnd = pos+len(v), pos+len(v)
		if len(w.built) > 0 {
			if err := out.appendBuilt(w.built); err != nil {
				return false, err
			}
		}
	}
	if err := it.Err(); err != nil {
		return false, uncleanable(s, it.Position(), err)
	}
	return !changed, flushRun()
}

// decision is what happens to one batch.
type decision struct {
	// verbatim: the batch is kept as it is; otherwise w.built holds what
	// replaces it (nothing: it goes).
	verbatim bool
	kept     int
}

// decide applies the cleaning rules (package doc, "Rules") to batch v.
func (p *pass) decide(v batch.View, t *txnTracker, upperBound int64) (decision, error) {
	w, r := p.w, p.r
	w.built = w.built[:0]
	if v.Magic() != batch.MagicV2 {
		return decision{}, fmt.Errorf("magic %d batch: legacy messages are not cleaned", v.Magic())
	}
	control := v.IsControl()
	var canDiscard bool
	if control {
		typ, has, err := w.controlType(v)
		if err != nil {
			return decision{}, err
		}
		canDiscard = t.onControl(v, typ, has)
	} else {
		canDiscard = t.onData(v)
	}
	horizon, hasHorizon := v.DeleteHorizon()
	var discardRecords bool
	if control {
		discardRecords = canDiscard && hasHorizon && horizon <= r.NowMs
	} else {
		discardRecords = canDiscard
	}
	lastOfProducer := false
	if pid := v.ProducerID(); pid >= 0 {
		if lr, ok := r.Producers[pid]; ok {
			if lr.LastDataOffset >= 0 {
				lastOfProducer = v.LastOffset() == lr.LastDataOffset
			} else {
				lastOfProducer = control && v.ProducerEpoch() == lr.Epoch
			}
			if control {
				if at, ok := p.lastMarker[pid]; ok && at == v.BaseOffset() {
					// The producer's last marker carries its epoch and
					// coordinator epoch: kept whole (partlog).
					discardRecords = false
				}
			}
		}
	}
	retainEmpty := (v.HasProducerID() && lastOfProducer) || v.NextOffset() == upperBound
	if discardRecords && !retainEmpty {
		return decision{}, nil
	}
	// The records kept.
	n := int(v.RecordsCount())
	if cap(w.keep) < n {
		w.keep = make([]bool, n)
	}
	keep := w.keep[:n]
	kept, tombstones := 0, false
	var data []byte
	if n > 0 && !discardRecords {
		var err error
		if data, err = w.records(v); err != nil {
			return decision{}, err
		}
		it := v.Records(data)
		retainDeletes := !hasHorizon || r.NowMs < horizon
		m := w.m
		for i := 0; ; i++ {
			rec, ok := it.Next()
			if !ok {
				break
			}
			k := true
			switch {
			case control:
			case rec.Offset > m.LatestOffset():
			case rec.Key == nil:
				k = false // Kafka drops keyless records of a compacted log
			default:
				k = rec.Offset >= m.Get(rec.Key) && (rec.Value != nil || retainDeletes)
			}
			keep[i] = k
			if k {
				kept++
				tombstones = tombstones || rec.Value == nil
			}
		}
		if err := it.Err(); err != nil {
			return decision{}, err
		}
	} else {
		clear(keep)
	}
	if kept == 0 {
		if retainEmpty {
			w.built = batch.AppendEmpty(w.built, v)
			if bytes.Equal(w.built, v) {
				return decision{verbatim: true}, nil // already in its empty form
			}
		}
		return decision{}, nil
	}
	markerForEmptyTxn := canDiscard && control
	setHorizon := (tombstones || markerForEmptyTxn) && !hasHorizon
	if kept == n && !setHorizon {
		return decision{verbatim: true, kept: kept}, nil
	}
	if setHorizon {
		horizon, hasHorizon = satAdd(r.NowMs, r.Config.DeleteRetentionMs), true
	}
	var err error
	w.built, err = w.bld.AppendRetained(w.built, v, data, keep, horizon, hasHorizon)
	if err != nil {
		return decision{}, err
	}
	return decision{kept: kept}, nil
}

// satAdd is a+b, saturated at the int64 bounds (a delete.retention.ms of
// Long.MAX_VALUE keeps tombstones forever instead of wrapping to a horizon
// in the past, as Kafka's sum does).
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
