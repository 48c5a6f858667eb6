package cleaner

import (
	"sync"
	"time"
)

// Throttle bounds the bytes every worker of a pool reads and writes per
// second together (Kafka's log.cleaner.io.max.bytes.per.second, one
// Throttler shared by the cleaner threads). A rate of 0 or less is
// unbounded.
type Throttle struct {
	rate float64
	mu   sync.Mutex
	// debt is the bytes taken beyond what the rate allowed by last.
	debt float64
	last time.Time
	now  func() time.Time
}

// maxThrottleSleep is the longest single sleep, so a stop request is
// seen within it.
const maxThrottleSleep = 100 * time.Millisecond

// NewThrottle returns a throttle of bytesPerSec.
func NewThrottle(bytesPerSec float64) *Throttle {
	return &Throttle{rate: bytesPerSec, now: time.Now}
}

// Wait accounts for n bytes and sleeps while the workers are ahead of the
// rate; it returns early, false, when stop reports true.
func (t *Throttle) Wait(n int, stop func() bool) bool {
	if t == nil || t.rate <= 0 || n <= 0 {
		return true
	}
	t.mu.Lock()
	now := t.now()
	if !t.last.IsZero() {
		t.debt = max(0, t.debt-now.Sub(t.last).Seconds()*t.rate)
	}
	t.last = now
	t.debt += float64(n)
	// Allow a burst of a tenth of a second before sleeping.
	wait := time.Duration((t.debt - t.rate/10) / t.rate * float64(time.Second))
	t.mu.Unlock()
	for wait > 0 {
		if stop != nil && stop() {
			return false
		}
		d := min(wait, maxThrottleSleep)
		time.Sleep(d)
		wait -= d
	}
	return true
}
