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
// pwritev even when nothing is synced: small appends gain from skipping
// the system call, large ones from skipping the page faults (the kernel
// fills page-cache pages without mapping them; bench/RESULTS.md,
// writeMinBytes).
const writeMinBytes = 32 << 10

// loneWriteMinBytes is the append size from which a lone appender that
// syncs each append (see writePolicy.lone) writes with pwritev: below
// it stores into the mapping are faster (bench/RESULTS.md,
// loneWriteMinBytes).
const loneWriteMinBytes = 16 << 10

// write reports whether the next append, of n bytes, uses pwritev, and
// whether the log's appends are being synced (a flush in the last
// durableWindow appends), in which case no path populates pages ahead
// (segment.Stamp.Synced). Caller holds appendMu.
func (w *writePolicy) write(path WritePath, n int) (write, synced bool) {
	if f := int(w.flushes.Load()); f != w.seen {
		w.seen, w.left = f, durableWindow
	}
	if synced = w.left > 0; synced {
		w.left--
	}
	switch {
	case path == WriteMapped:
		return false, synced
	case path == WritePwrite:
		return true, synced
	case synced:
		// Appenders that sync: the stores' page faults would serialize
		// under appendMu (bench/RESULTS.md, writePolicy.write). A lone
		// appender that syncs each append stores below
		// loneWriteMinBytes.
		return !w.lone.Load() || n >= loneWriteMinBytes, true
	}
	return n >= writeMinBytes, false
}
