package partlog

import (
	"context"
	"sync/atomic"
	"testing"
)

// TestWritePolicy checks the rules of Options.WritePath: the fixed paths,
// and WriteAuto's pwritev for large appends and for the 1024 appends that
// follow a flush; and that every path counts those appends as synced
// (nothing populated ahead, segment.Stamp.Synced).
func TestWritePolicy(t *testing.T) {
	var w writePolicy
	for _, tc := range []struct {
		path WritePath
		n    int
		want bool
	}{
		{WriteMapped, 1 << 20, false},
		{WritePwrite, 10, true},
		{WriteAuto, 256, false},
		{WriteAuto, writeMinBytes - 1, false},
		{WriteAuto, writeMinBytes, true},
	} {
		if got, synced := w.write(tc.path, tc.n); got != tc.want || synced {
			t.Errorf("%v, %d bytes: pwritev %v (want %v), synced %v before any flush", tc.path, tc.n, got, tc.want, synced)
		}
	}
	w.flushes.Add(1)
	for i := range durableWindow {
		path := []WritePath{WriteAuto, WriteMapped, WritePwrite}[i%3]
		write, synced := w.write(path, 256)
		if !synced || write != (path != WriteMapped) {
			t.Fatalf("append %d after a flush (%v): pwritev %v, synced %v", i, path, write, synced)
		}
	}
	if write, synced := w.write(WriteAuto, 256); write || synced {
		t.Fatalf("long after the last flush: pwritev %v, synced %v", write, synced)
	}
	if write, _ := w.write(WriteMapped, 256); write {
		t.Fatal("WriteMapped used pwritev")
	}
}

// TestWritePolicyLoneSyncer: after a flush made for one caller alone in
// Sync, WriteAuto stores appends below loneWriteMinBytes into the mapping
// (one appender syncing each append); after a flush that ended with a
// group gathering behind it, or a plain Flush, it writes them with
// pwritev.
func TestWritePolicyLoneSyncer(t *testing.T) {
	var w writePolicy
	pw := func(p WritePath, n int) bool {
		write, synced := w.write(p, n)
		if !synced {
			t.Errorf("%v, %d bytes right after a flush: not synced", p, n)
		}
		return write
	}
	w.flushes.Add(1)
	w.lone.Store(true)
	if pw(WriteAuto, 1<<10) || pw(WriteAuto, loneWriteMinBytes-1) {
		t.Error("a lone syncer's small append used pwritev")
	}
	if !pw(WriteAuto, 16<<10) || !pw(WriteAuto, writeMinBytes) {
		t.Error("a lone syncer's 16 KiB or larger append stored into the mapping")
	}
	if !pw(WritePwrite, 256) || pw(WriteMapped, 1<<20) {
		t.Error("the fixed paths follow the lone rule")
	}
	w.lone.Store(false)
	if !pw(WriteAuto, 16<<10) {
		t.Error("a shared flush's next append stored into the mapping")
	}

	l, _ := openTestLog(t, smallOpts(t))
	b := makeBatch(t, 1, 50, 1)
	info, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background(), info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if !l.writes.lone.Load() {
		t.Error("a Sync by one caller alone is not marked lone")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.writes.lone.Load() {
		t.Error("a plain Flush is marked lone")
	}
	// Two callers: the second waits behind the first's flush.
	var loneAtSecond atomic.Bool
	entered, release, calls := blockFirstFlush(l, nil, func(n int64) {
		if n == 2 {
			loneAtSecond.Store(l.writes.lone.Load())
		}
	})
	if info, err = l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- l.Sync(context.Background(), info.LastOffset+1) }()
	<-entered
	if info, err = l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	go func() { done <- l.Sync(context.Background(), info.LastOffset+1) }()
	waitParked(t, l, 1)
	close(release)
	waitDone(t, done, 2)
	l.flushFault = nil
	if calls.Load() != 2 || loneAtSecond.Load() {
		t.Errorf("%d flushes; the flush that ended with a group behind it marked lone: %v", calls.Load(), loneAtSecond.Load())
	}
}

// TestFlushStartsDurableWindow: a Log's Flush counts for the write
// policy, so the appends after it use pwritev (durableWindow) rather than
// stores whose page faults would serialize under appendMu.
func TestFlushStartsDurableWindow(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	if _, err := l.AppendAsLeader(makeBatch(t, 1, 50, 1), 0); err != nil {
		t.Fatal(err)
	}
	l.appendMu.Lock()
	before, _ := l.writes.write(WriteAuto, 256)
	l.appendMu.Unlock()
	if before {
		t.Fatal("a small append used pwritev before any flush")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.appendMu.Lock()
	after, _ := l.writes.write(WriteAuto, 256)
	l.appendMu.Unlock()
	if !after {
		t.Error("the append after a Flush stored into the mapping: the flush was not counted")
	}
}
