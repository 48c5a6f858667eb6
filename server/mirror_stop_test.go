package server

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestMirrorStopDuringCloseFinishes: Close cancels the server's context
// and then waits for a running stop (mirror mutex). The stop used that
// context for its fsyncs, so a shutdown (SIGTERM) during a stop left the
// partition FAILED and read-only after the restart instead of STOPPED.
func TestMirrorStopDuringCloseFinishes(t *testing.T) {
	a := startTest(t, Config{})
	dir := t.TempDir()
	b := startTest(t, Config{Dir: dir})
	ra := dial(t, a.addr)
	createTopic(t, ra, "sc", 1)
	produceOK(t, ra, "sc", 0, records(t, 3, 0, 0, 0, false, 10))
	mirrorTopic(t, b, a, "sc")
	b.cancel() // what Close does first, before it waits for the stop
	_, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"sc"}})
	b.close(t)
	b = startTest(t, Config{Dir: dir})
	st := b.MirrorStatus()
	if len(st) != 1 || st[0].State != "STOPPED" || st[0].BarrierOffset != 3 {
		t.Fatalf("stop during shutdown (err %v): after restart %+v", err, st)
	}
}

// TestMirrorRestartAfterStopCrashDropsLink: a crash after a partition's
// stop reached STOPPED but before the state file dropped the topic from
// its link (StopMirror does the partitions first). The restart must not
// bring the link back: it has nothing to fetch.
func TestMirrorRestartAfterStopCrashDropsLink(t *testing.T) {
	a := startTest(t, Config{})
	dir := t.TempDir()
	b := startTest(t, Config{Dir: dir})
	createTopic(t, dial(t, a.addr), "sk", 1)
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"sk"}, Name: "dr"}); err != nil {
		t.Fatal(err)
	}
	var saved mirrorLinkState
	b.meta.view(func(m *metaState) { saved = *m.Mirrors["dr"] })
	if _, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"sk"}}); err != nil {
		t.Fatal(err)
	}
	// The state file as the crash left it.
	if err := b.meta.update(func(m *metaState) { m.Mirrors = map[string]*mirrorLinkState{"dr": &saved} }); err != nil {
		t.Fatal(err)
	}
	b.close(t)
	b = startTest(t, Config{Dir: dir})
	if running, stored := linkNames(b); len(running) != 0 || len(stored) != 0 {
		t.Fatalf("after the restart: running %v, stored %v", running, stored)
	}
}

// TestMirrorChainMiddleStopTruncates: A → B → C, and B stops with
// TRUNCATE_LSO while A's transaction is open: B truncates the open
// transaction that C already fetched (read_uncommitted), writes its
// barrier there and takes writes. C must not go on fetching from its own
// log end as if nothing happened: its log would keep the open
// transaction (never closed), miss B's barrier and continue with B's
// records from another offset on.
func TestMirrorChainMiddleStopTruncates(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	c := startTest(t, Config{})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "ch", 1)
	produceOK(t, ra, "ch", 0, records(t, 5, 0, 0, 0, false, 10))     // [0, 5)
	appendBypassing(t, a, "ch", 0, records(t, 3, 1, 0, 0, true, 10)) // [5, 8) open
	ctx := context.Background()
	if _, err := b.StartMirror(ctx, MirrorStartRequest{Source: a.addr, Topics: []string{"ch"}}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, b, a, "ch", 0)
	if _, err := c.StartMirror(ctx, MirrorStartRequest{Source: b.addr, Topics: []string{"ch"}}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, c, b, "ch", 0) // C has the open transaction too
	if _, err := b.StopMirror(ctx, MirrorStopRequest{Topics: []string{"ch"}}); err != nil {
		t.Fatal(err)
	}
	// B: [0, 5) of A, its barrier at 5, then its own batches.
	produceOK(t, rb, "ch", 0, records(t, 2, 0, 0, 0, false, 10)) // [6, 8)
	produceOK(t, rb, "ch", 0, records(t, 4, 0, 0, 2, false, 10)) // [8, 12)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st := c.MirrorStatus()
		if len(st) == 1 && st[0].State == "FAILED" {
			// Divergence seen; a new start mirrors B's history.
			if _, err := c.StartMirror(ctx, MirrorStartRequest{Source: b.addr, Topics: []string{"ch"}}); err != nil {
				t.Fatal(err)
			}
			waitMirrored(t, c, b, "ch", 0)
			if !bytes.Equal(segmentBytes(t, b, "ch", 0), segmentBytes(t, c, "ch", 0)) {
				t.Fatal("after the new start C's bytes differ from B's")
			}
			return
		}
		cl, bl := logOf(t, c, "ch", 0), logOf(t, b, "ch", 0)
		if cl.LogEndOffset() == bl.LogEndOffset() {
			if !bytes.Equal(segmentBytes(t, b, "ch", 0), segmentBytes(t, c, "ch", 0)) {
				t.Fatalf("C's log differs from B's (C kept A's open transaction at 5 and took B's batches from 8): C %d, B %d", cl.LastStableOffset(), bl.LastStableOffset())
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("C neither follows B nor fails: %+v; C log end %d, B %d", c.MirrorStatus(), logOf(t, c, "ch", 0).LogEndOffset(), logOf(t, b, "ch", 0).LogEndOffset())
}
