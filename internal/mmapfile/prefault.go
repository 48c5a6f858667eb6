package mmapfile

import (
	"errors"
	"sync"
	"sync/atomic"
)

// DefaultPrefaultWindow is the distance a Prefaulter keeps populated ahead of
// the write position when NewPrefaulter is given a window ≤ 0.
const DefaultPrefaultWindow = 8 << 20

// prefaultChunk bounds one madvise call, so Stop is noticed quickly and
// populated pages become usable by the writer in small steps.
const prefaultChunk = 1 << 20

// Prefaulter keeps the pages just ahead of a writer populated, on its own
// goroutine.
//
// The writer reports its position with Advance after each store; Advance only
// stores an integer and, when the populated region has fallen more than a
// quarter window behind, does a non-blocking send to wake the goroutine. The
// goroutine then populates [max(populated, position), position+window) in
// chunks with File.Prefault. Populating a page the writer is storing into at
// the same moment is harmless: MADV_POPULATE_WRITE only faults pages in, it
// never changes their contents.
//
// Why a goroutine and not an inline call: on the reference VM a store into a
// fresh mapped page costs about 2 µs per 4 KiB page (1.9 GB/s) in the page
// fault, while MADV_POPULATE_WRITE provides pages at 5.8 GB/s. Calling it
// inline would still put that cost on the append path; running it a window
// ahead takes it off the path on a machine with a spare core.
//
// Advance must be called by one goroutine (the writer). Stop may be called
// from any goroutine, more than once.
type Prefaulter struct {
	f      *File
	window int64

	pos  atomic.Int64 // latest position reported by Advance
	done atomic.Int64 // pages below this offset have been populated

	wake     chan struct{}
	stop     chan struct{}
	exited   chan struct{}
	stopOnce sync.Once

	errMu sync.Mutex // guards err
	err   error      // first error other than ErrClosed
}

// NewPrefaulter starts a goroutine that keeps window bytes of f populated
// ahead of the position reported with Advance, beginning at offset 0.
func NewPrefaulter(f *File, window int64) *Prefaulter {
	if window <= 0 {
		window = DefaultPrefaultWindow
	}
	p := &Prefaulter{
		f:      f,
		window: window,
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	go p.run()
	p.kick()
	return p
}

// Advance reports that the writer has written up to pos. It never blocks.
// A position lower than the previous one (after a truncation) restarts
// population from there.
func (p *Prefaulter) Advance(pos int64) {
	prev := p.pos.Swap(pos)
	if pos < prev {
		p.kick()
		return
	}
	if pos+p.window-p.done.Load() > p.window/4 {
		p.kick()
	}
}

func (p *Prefaulter) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Stop ends the goroutine and waits for it to exit. It returns the first
// error the goroutine met, other than the File being closed.
func (p *Prefaulter) Stop() error {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.exited
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.err
}

func (p *Prefaulter) run() {
	defer close(p.exited)
	var last int64 // position seen in the previous round, to detect rewinds
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		for {
			pos := p.pos.Load()
			if pos < last {
				// The writer moved back (truncation): pages after pos may
				// have been dropped with the file's tail.
				p.done.Store(pos)
			}
			last = pos
			target := min(pos+p.window, p.f.Size())
			start := max(p.done.Load(), pos)
			if start >= target {
				break
			}
			n := min(target-start, prefaultChunk)
			if err := p.f.Prefault(start, n); err != nil {
				if !errors.Is(err, ErrClosed) {
					p.errMu.Lock()
					if p.err == nil {
						p.err = err
					}
					p.errMu.Unlock()
				}
				return
			}
			p.done.Store(start + n)
			select {
			case <-p.stop:
				return
			default:
			}
		}
	}
}
