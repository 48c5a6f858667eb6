package partlog

import (
	"testing"
	"time"
)

// TestProducerReadersWaitOutAppendAfterReopen: the commit of a known
// producer's batch writes its entry without the shard lock when no reader
// is counted, which is safe only because readers of entries wait out the
// append in flight on appendMu (producerstate.Manager.SetAppendLock). A Log
// whose producer state comes from recovery (every reopen) must give the
// Manager the same lock as a new one: a reader of entries started while
// appendMu is held waits for it, and readers racing known commits are
// ordered (run with -race).
func TestProducerReadersWaitOutAppendAfterReopen(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := map[bool]string{true: "clean", false: "unclean"}[clean]
		t.Run(name, func(t *testing.T) {
			l, dir := psNew(t)
			psLeader(t, l, psData(t, 7, 0, 0, 1, false))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			opts := psOpts(t)
			opts.CleanShutdown = clean
			l = psOpen(t, dir, opts)

			// A reader of entries waits for an append in flight.
			l.appendMu.Lock()
			got := make(chan struct{})
			go func() { l.ProducerState(7); l.Producers(); close(got) }()
			select {
			case <-got:
				l.appendMu.Unlock()
				t.Fatal("ProducerState returned while appendMu was held: the reopened Log's producer state has no append lock")
			case <-time.After(50 * time.Millisecond):
			}
			l.appendMu.Unlock()
			<-got

			// Known commits against readers: -race sees an unordered one.
			const n = 2000
			bs := make([][]byte, n+1)
			for seq := 1; seq <= n; seq++ {
				bs[seq] = psData(t, 7, 0, int32(seq), 1, false)
			}
			errs := make(chan error, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for seq := int32(1); seq <= n; seq++ {
					if _, err := l.AppendAsLeader(bs[seq], 1); err != nil {
						errs <- err
						return
					}
				}
			}()
			last := int32(-1)
			for reading := true; reading; {
				select {
				case <-done:
					reading = false
				default:
				}
				e, ok := l.ProducerState(7)
				if !ok {
					t.Fatal("producer 7 is gone")
				}
				if e.LastSequence < last {
					t.Fatalf("last sequence went back from %d to %d", last, e.LastSequence)
				}
				last = e.LastSequence
				l.Producers()
			}
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			if e := psProducer(t, l, 7); e.LastSequence != n {
				t.Fatalf("last sequence %d, want %d", e.LastSequence, n)
			}
		})
	}
}

// TestProducerReadersBesideWriters runs readers of producer entries
// against a writer that appends a known producer's batches, rolls and
// truncates a reopened log: every writer holds appendMu, which readers
// take after counting themselves, so none deadlocks and -race sees every
// lock-free commit ordered with the reads.
func TestProducerReadersBesideWriters(t *testing.T) {
	l, dir := psNew(t)
	psLeader(t, l, psData(t, 7, 0, 0, 1, false))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = psOpen(t, dir, psOpts(t))
	n := 3000
	if testing.Short() {
		n = 600
	}
	bs := make([][]byte, n+1)
	for seq := 1; seq <= n; seq++ {
		bs[seq] = psData(t, 7, 0, int32(seq), 1, false)
	}
	errs := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fail := func(err error) {
			select {
			case errs <- err:
			default:
			}
		}
		seq := 1
		for i := 0; seq <= n; i++ {
			switch {
			case i%97 == 96:
				if err := l.Roll(); err != nil {
					fail(err)
					return
				}
			case i%151 == 150 && seq > 2:
				// Drop the newest batch (one offset per sequence).
				if err := l.TruncateTo(l.LogEndOffset() - 1); err != nil {
					fail(err)
					return
				}
				seq--
			default:
				if _, err := l.AppendAsLeader(bs[seq], 1); err != nil {
					fail(err)
					return
				}
				seq++
			}
		}
	}()
	var reads int
	for reading := true; reading; reads++ {
		select {
		case <-done:
			reading = false
		default:
		}
		if _, ok := l.ProducerState(7); !ok {
			t.Fatal("producer 7 is gone")
		}
		if len(l.Producers()) != 1 {
			t.Fatal("not one producer")
		}
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if e := psProducer(t, l, 7); e.LastSequence != int32(n) {
		t.Fatalf("last sequence %d, want %d", e.LastSequence, n)
	}
	t.Logf("%d reads", reads)
}
