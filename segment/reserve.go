package segment

import (
	"errors"
	"fmt"
	"time"

	"github.com/partlog/partlog/internal/mmapfile"
	"github.com/partlog/partlog/internal/prefault"
)

// Disk reservation of the active .log (see the Segment doc).
const (
	// ReserveMinBytes is the first reservation of a new active segment
	// and the smallest step.
	ReserveMinBytes = 256 << 10
	// DefaultReserveMaxBytes is the default largest step.
	DefaultReserveMaxBytes = 16 << 20
	// reserveFastGrowth: a step used up within this long doubles the next
	// one; a slower one halves it.
	reserveFastGrowth = time.Second
)

// monotonic is the clock of the reservation policy (tests replace it).
var monotonic = time.Now

// noteReserved refreshes mapped and room from the active .log. Owner
// only, after s.log or its reserved size changed.
func (s *Segment) noteReserved() {
	s.mapped = s.log.Bytes()
	s.room = int64(len(s.mapped)) - s.reserveAhead(Stamp{})
}

// dropMapped forgets the cached mapping when the .log is let go: a later
// Append (a bug) then takes the cold path, which fails on the missing
// File, instead of storing into an unmapped range.
func (s *Segment) dropMapped() { s.mapped, s.room = nil, -1 }

// firstReserve is the reservation of a newly created .log.
func (s *Segment) firstReserve() int64 {
	if s.cfg.ReserveMaxBytes < 0 {
		return s.cfg.SegmentBytes
	}
	return min(s.cfg.SegmentBytes, ReserveMinBytes)
}

// reserve grows the .log's reservation to cover need bytes (≤ Cap) plus
// the next step of the policy described in the Segment doc. Owner only.
func (s *Segment) reserve(need int64) error {
	maxStep := s.cfg.ReserveMaxBytes
	if maxStep <= 0 {
		maxStep = DefaultReserveMaxBytes
	}
	maxStep = max(maxStep, ReserveMinBytes)
	now := monotonic()
	fast := false
	switch {
	case s.reserveStep == 0:
		s.reserveStep = ReserveMinBytes
	case now.Sub(s.reservedAt) < reserveFastGrowth:
		s.reserveStep = min(s.reserveStep*2, maxStep)
		fast = true
	default:
		s.reserveStep = max(s.reserveStep/2, ReserveMinBytes)
	}
	s.reservedAt = now
	size := min(need+s.reserveStep, s.log.Cap())
	if m := s.log.MapLen(); size > m && m == MapMinBytes && need+ReserveMinBytes <= m {
		// The step would outgrow the MapMinBytes mapping while the data
		// is still well inside it: it ends at the mapping's end instead,
		// which leaves ReserveMinBytes or more, and the remap waits for
		// a step the data needs. A writer whose steps double (a step
		// used up within a second: each of 1 000 partitions appended to
		// round robin) then keeps the mapping up to 1 MiB of data
		// without a prefault window, and to about 512 KiB with one
		// (stores keep the 512 KiB step reserved ahead). Steps that stay
		// at ReserveMinBytes (a writer slower than that) need
		// 768 KiB plus an append's length at the third one, past the
		// cut's bound, so it maps the whole capacity there (at about
		// 512 KiB with a prefault window).
		size = m
	}
	if err := s.mapFor(size); err != nil {
		return err
	}
	err := s.log.Grow(size)
	if err != nil && size > need {
		// Too little room for the step (a nearly full disk): reserve
		// just what this append needs, so the disk is used to the end.
		s.reserveStep = ReserveMinBytes
		err = s.log.Grow(need)
	}
	s.noteReserved() // also after a failed step: the policy changed
	if err == nil && s.prefaulter != nil && (fast || s.reserveStep < preallocMinStep) {
		// The next step (the one a writer whose steps double takes;
		// a slower one's is half of it), allocated by a prefault worker
		// so that the Grow that takes it makes no system call. It
		// starts an append's length past size (the append that takes
		// it overshoots room), so a little more is allocated.
		margin := int64(preallocMargin)
		if s.reserveStep >= preallocMinStep {
			margin = MapMinBytes
		}
		s.prefaulter.Preallocate(size, min(s.reserveStep*2, maxStep)+margin)
	}
	return err
}

// A prefaulted segment's next reservation step is allocated ahead by a
// prefault worker (prefault.Writer.Preallocate): always while the
// steps are below preallocMinStep, and past it for a writer whose steps
// are growing.
//
// Small steps: with many partitions appended round robin their steps fall
// due in the same round, each fallocate on the writer's path; a Grow
// within blocks a worker allocated makes no system call. The cost: a
// partition that has appended keeps up to twice its step (and
// preallocMargin) of blocks ahead of its data, until it rolls or closes;
// one that has appended less than preallocFirstAt (a few batches) has no
// step and no preallocation, so a directory of thousands of nearly empty
// partitions holds no blocks it has no data for.
//
// Large steps: a step of megabytes is where the file system moves on to
// block groups whose bitmaps it has not read, and its fallocate then
// waits for the disk. A writer whose large steps shrink (slower than a
// step a second) keeps one step of blocks ahead of its data, no more
// (bench/RESULTS.md, preallocMinStep).
const (
	preallocMinStep = 4 << 20
	preallocMargin  = 64 << 10
	preallocFirstAt = ReserveMinBytes / 8
)

// mapFor makes the active .log's mapping reach size bytes (≤ Cap), by
// mapping the file again (mmapfile.File.Remap): at MapMinBytes while size
// fits in it (a reopened segment's mapping covers only its data), else at
// the whole capacity. A new segment is mapped at MapMinBytes from the
// start (Create), so an idle or slow partition's mapping stays
// MapMinBytes, beside its neighbours' in the address space, and its first
// reservation steps take no remap (each remap of a partition appended
// round robin costs a good part of its appends' time). A segment written
// past MapMinBytes is mapped anew only once: a doubling policy cost the
// pages populated ahead, unmapped in each new mapping (bench/RESULTS.md,
// mapFor). The old File goes to its readers
// (they keep their references) and the owner's reference is dropped off
// the append's path (mmapfile.File.Retire: unmapping written pages costs
// about a microsecond each); the prefaulter moves to the new one, and the
// swap is made under mu, where readers take their references. Owner only.
func (s *Segment) mapFor(size int64) error {
	old := s.log
	if size <= old.MapLen() {
		return nil
	}
	n := old.Cap()
	if size <= MapMinBytes {
		n = min(n, MapMinBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := old.Remap(n)
	if err != nil {
		return err
	}
	if n > MapMinBytes {
		// Written past MapMinBytes: a writer that may outrun the
		// prefaulter (its appends store about as fast as new pages are
		// populated). Its faults then read ahead again (mmapfile,
		// "Read-ahead"): one fault brings the next megabytes, which it is
		// about to write, instead of a major fault per page
		// (bench/RESULTS.md, mapFor).
		f.FaultReadahead()
	}
	if s.prefaulter != nil {
		s.prefaulter.Retarget(f)
	}
	s.log = f
	s.noteReserved()
	old.Retire()
	return nil
}

// MapMinBytes is the length a new active .log is mapped at, and a
// reopened one mapped again at while it is small (see mapFor); past it,
// the mapping covers the whole capacity.
// Each remap costs a mapping, the unmapping of the old one and page
// faults on the window ahead, so neither the small early steps nor the
// large ones are each given one.
const MapMinBytes = 1 << 20

// startPrefault gives the active segment a prefault.Writer. It populates
// nothing until the first append reports a position.
func (s *Segment) startPrefault() {
	if s.cfg.Prefault > 0 && s.log != nil {
		pool := s.cfg.PrefaultPool
		if pool == nil {
			pool = prefault.Default()
		}
		s.prefaulter = pool.NewWriter(s.log, s.cfg.Prefault)
	}
	s.prefaultAt = 0
}

// prefaultStride is how far the write position moves between two reports
// to the prefaulter: at most a quarter of its window, the step at which
// the prefaulter itself requeues, so reporting less often never lets it
// fall behind by more than that; but not every append, which with
// thousands of partitions would touch one more cold cache line each.
func (s *Segment) prefaultStride() int64 { return min(s.cfg.Prefault/4, 16<<10) }

func (s *Segment) stopPrefault() error {
	if s.prefaulter == nil {
		return nil
	}
	err := s.prefaulter.Stop()
	s.prefaulter = nil
	if errors.Is(err, mmapfile.ErrClosed) {
		err = nil
	}
	return err
}

// advancePrefault reports the write position end to the prefaulter, at
// publish's stride. The first report past preallocFirstAt of a segment
// that has not taken a reservation step yet also asks for its first
// step's blocks ahead (see preallocMinStep): that step falls due after
// half its reservation, in the same round for partitions appended round
// robin.
func (s *Segment) advancePrefault(end int64) {
	if !s.firstPrealloc && s.reserveStep == 0 && end >= preallocFirstAt {
		s.firstPrealloc = true
		s.prefaulter.Preallocate(s.log.Size(), ReserveMinBytes+preallocMargin)
	}
	s.prefaulter.Advance(end)
	s.prefaultAt = end + s.prefaultStride()
}

// reserveAhead is how far past an append's end its stores want the
// reservation to reach (see Append).
//
// A segment that has not grown yet (new, or reopened) counts as having
// half the smallest step ahead: a new segment's first step is then taken
// while the append is still inside its first reservation, so the
// prefaulter populates the pages after it before the writer gets there.
// Otherwise the first append past ReserveMinBytes stored into pages the
// prefaulter could not reach (past the reserved end) and took their page
// faults itself, each reading around the fault (the device's read-ahead,
// up to megabytes of zeroed pages) under the append: with 1 000
// partitions appended round robin, most of the append time.
func (s *Segment) reserveAhead(st Stamp) int64 {
	if s.prefaulter != nil && !st.Write {
		return min(s.cfg.Prefault, max(s.reserveStep, ReserveMinBytes/2))
	}
	return 0
}

// makeRoom reserves room for an append ending at end (cold path of
// Append): ErrFull past the capacity, else the reservation grown.
func (s *Segment) makeRoom(end int64, st Stamp) error {
	f := s.log
	if c := f.Cap(); end > c {
		return fmt.Errorf("%w: %d bytes at position %d of %d", ErrFull, end-s.size.Load(), s.size.Load(), c)
	}
	need := min(end+s.reserveAhead(st), f.Cap())
	if need > f.Size() {
		if err := s.reserve(need); err != nil && end > f.Size() {
			return err
		}
		if s.prefaulter != nil {
			s.prefaulter.Grew()
			s.prefaultAt = 0 // report at once: the window may have been cut short
		}
	}
	return nil
}
