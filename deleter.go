package partlog

import (
	"errors"
	"os"
	"slices"
	"sync"
	"time"
)

// deletion is a set of renamed files (or a renamed partition directory)
// to remove once due.
type deletion struct {
	due   time.Time
	paths []string
	// state: 0 queued, 1 being removed, 2 removed (guarded by
	// fileDeleter.mu); done is closed when removal finished.
	state int
	done  chan struct{}
	err   error
}

// fileDeleter removes scheduled deletions when they are due: one
// process-wide queue and one timer (time.AfterFunc) set for the earliest
// entry, so no goroutine exists while nothing is due, whatever the
// number of partitions (Kafka's file.delete.delay.ms).
type fileDeleter struct {
	mu    sync.Mutex
	queue []*deletion // by due time
	timer *time.Timer
}

var deleter fileDeleter

// schedule queues paths for removal after delay (at once, synchronously,
// when delay ≤ 0) and returns the entry.
func (d *fileDeleter) schedule(paths []string, delay time.Duration) *deletion {
	del := &deletion{due: time.Now().Add(delay), paths: paths, done: make(chan struct{})}
	if delay <= 0 {
		del.state = 1
		d.remove(del)
		return del
	}
	d.mu.Lock()
	i, _ := slices.BinarySearchFunc(d.queue, del, func(a, b *deletion) int { return a.due.Compare(b.due) })
	d.queue = slices.Insert(d.queue, i, del)
	d.armLocked()
	d.mu.Unlock()
	return del
}

// armLocked sets the timer for the earliest queued entry.
func (d *fileDeleter) armLocked() {
	if len(d.queue) == 0 {
		return
	}
	wait := time.Until(d.queue[0].due)
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.run)
		return
	}
	d.timer.Reset(wait)
}

// run removes every due entry (in the timer's goroutine) and re-arms.
func (d *fileDeleter) run() {
	d.mu.Lock()
	now := time.Now()
	var due []*deletion
	for len(d.queue) > 0 && !d.queue[0].due.After(now) {
		del := d.queue[0]
		d.queue = d.queue[1:]
		if del.state == 0 {
			del.state = 1
			due = append(due, del)
		}
	}
	d.armLocked()
	d.mu.Unlock()
	for _, del := range due {
		d.remove(del)
	}
}

// remove deletes an entry's paths (state 1, owned by the caller).
func (d *fileDeleter) remove(del *deletion) {
	var errs []error
	for _, p := range del.paths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	del.err = errors.Join(errs...)
	d.mu.Lock()
	del.state = 2
	d.mu.Unlock()
	close(del.done)
}

// now removes del at once if it is still queued, or waits for the
// removal under way, and returns its error.
func (d *fileDeleter) now(del *deletion) error {
	d.mu.Lock()
	mine := del.state == 0
	if mine {
		del.state = 1
		if i := slices.Index(d.queue, del); i >= 0 {
			d.queue = slices.Delete(d.queue, i, i+1)
		}
	}
	d.mu.Unlock()
	if mine {
		d.remove(del)
	}
	<-del.done
	return del.err
}

// pendingDeletions are one owner's (a Log's, a Dir's) scheduled
// deletions, finished at once when the owner closes.
type pendingDeletions struct {
	mu   sync.Mutex
	list []*deletion
}

// add schedules paths for removal after delayMs (negative: now).
func (p *pendingDeletions) add(paths []string, delayMs int64) error {
	if len(paths) == 0 {
		return nil
	}
	del := deleter.schedule(paths, time.Duration(max(delayMs, 0))*time.Millisecond)
	if delayMs <= 0 {
		return del.err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = slices.DeleteFunc(p.list, func(d *deletion) bool {
		select {
		case <-d.done:
			return true
		default:
			return false
		}
	})
	p.list = append(p.list, del)
	return nil
}

// removeNow removes everything still pending.
func (p *pendingDeletions) removeNow() error {
	p.mu.Lock()
	list := p.list
	p.list = nil
	p.mu.Unlock()
	var errs []error
	for _, d := range list {
		errs = append(errs, deleter.now(d))
	}
	return errors.Join(errs...)
}

// pending returns how many deletions are not finished (tests).
func (p *pendingDeletions) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, d := range p.list {
		select {
		case <-d.done:
		default:
			n++
		}
	}
	return n
}
