package partlog

import (
	"sync/atomic"
)

// writePolicy decides, for each append, whether its bytes go to the page
// cache by stores into the mapping or by pwritev (Options.WritePath).
type writePolicy struct {
	// flushes counts flushes started; written by flush, read by appends.
	flushes atomic.Int64
	// lone is set when the last flush was a Sync whose caller was alone
	// in Sync (one appender syncing each append): see write.
	lone atomic.Bool
	// syncers counts the callers inside Sync (in the padding after lone,
	// on the line appends read: enterAppend looks at it).
	syncers atomic.Int32
	// Under appendMu: the flush count seen last, and how many more
	// appends use pwritev because of it.
	seen, left int
}

// durableWindow is how many appends after a flush WriteAuto writes with
// pwritev: long enough to cover appenders that sync every few appends,
// short enough that a log flushed now and then (by a periodic flusher)
// is back to stores within microseconds to milliseconds.
const durableWindow = 1024

// writeMinBytes is the append size from which WriteAuto writes with
// pwritev even when nothing is synced. In BenchmarkWritePath (sync=false,
// one run, pwrite time / mapped time): 256 B 6.1, 1 KiB 4.7, 16 KiB 0.97,
// 64 KiB 0.65, 256 KiB 0.61, 1 MiB 0.49. Small appends gain from skipping
// the syscall; large ones from skipping the page faults (the kernel fills
// page-cache pages without mapping them).
const writeMinBytes = 32 << 10

// loneWriteMinBytes is the append size from which a lone appender that
// syncs each append (see writePolicy.lone) writes with pwritev.
// BenchmarkWritePath (sync, 1 writer, 4 096 appends per variant, one
// process): pwrite/mapped 1.57 at 1 KiB, 0.54 and 0.50 (two runs) at
// 16 KiB, 0.93 at 16 KiB with 640 appends. Earlier short runs (1 280-
// 2 560 durable 16 KiB appends, seven runs) had stores at 0.70-0.91 of
// pwritev's time, which is why the rule once stored up to writeMinBytes;
// over longer runs the stores at 16 KiB fell far behind.
const loneWriteMinBytes = 16 << 10

// write reports whether the next append, of n bytes, uses pwritev.
// Caller holds appendMu.
func (w *writePolicy) write(path WritePath, n int) bool {
	switch path {
	case WriteMapped:
		return false
	case WritePwrite:
		return true
	}
	if f := int(w.flushes.Load()); f != w.seen {
		w.seen, w.left = f, durableWindow
	}
	if w.left > 0 {
		w.left--
		// With 8 writers pwritev took 0.76-0.94 of the stores' time, with
		// 64 0.47-0.75 in four runs of five (1.22 in one): the stores'
		// page faults serialize under appendMu. A lone appender that
		// syncs each append stores below loneWriteMinBytes.
		return !w.lone.Load() || n >= loneWriteMinBytes
	}
	return n >= writeMinBytes
}
