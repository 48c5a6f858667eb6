package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorSourceTopicRecreated: the source deletes the mirrored topic
// and creates it again (a new topic id, offsets from 0). The link
// learned the new id from the source's metadata and went on fetching
// from its log end: the new incarnation's batches above it were appended
// after the old one's, one partition made of two different topics. The
// session's topic id (in mirror.checkpoint) must be checked: the
// partition fails instead.
func TestMirrorSourceTopicRecreated(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra := dial(t, a.addr)
	createTopic(t, ra, "rc", 1)
	produceOK(t, ra, "rc", 0, records(t, 5, -1, 0, 0, false, 10))
	mirrorTopic(t, b, a, "rc")
	if err := a.deleteTopic("rc"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, ra, "rc", 1)
	produceOK(t, ra, "rc", 0, records(t, 5, -1, 0, 0, false, 10))
	produceOK(t, ra, "rc", 0, records(t, 3, -1, 0, 0, false, 10))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if logOf(t, b, "rc", 0).LogEndOffset() != 5 {
			t.Fatalf("B appended the new topic's records after the old one's: log end %d", logOf(t, b, "rc", 0).LogEndOffset())
		}
		if st := b.MirrorStatus(); len(st) == 1 && st[0].State == "FAILED" {
			// A new start mirrors the new topic from its start.
			if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"rc"}}); err != nil {
				t.Fatal(err)
			}
			waitMirrored(t, b, a, "rc", 0)
			if !bytes.Equal(segmentBytes(t, a, "rc", 0), segmentBytes(t, b, "rc", 0)) {
				t.Fatal("after the new start the bytes differ from the source's")
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the partition still mirrors a different topic: %+v", b.MirrorStatus())
}

// TestMirrorStatusSourceDown: once the source stops answering, status
// showed the lag of the last fetch that worked (0 after catching up)
// beside the error, so an operator read "caught up" while the source
// might be taking writes elsewhere. The lag is unknown (-1) until a
// fetch works again.
func TestMirrorStatusSourceDown(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra := dial(t, a.addr)
	createTopic(t, ra, "down", 1)
	produceOK(t, ra, "down", 0, records(t, 2, -1, 0, 0, false, 10))
	mirrorTopic(t, b, a, "down")
	deadline := time.Now().Add(20 * time.Second)
	for st := b.MirrorStatus(); len(st) != 1 || st[0].Lag != 0; st = b.MirrorStatus() {
		if time.Now().After(deadline) {
			t.Fatalf("caught up, status %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.close(t)
	for {
		st := b.MirrorStatus()
		if len(st) != 1 {
			t.Fatalf("status %+v", st)
		}
		if st[0].Error != "" {
			if st[0].Lag != -1 || st[0].SourceHighWatermark != -1 {
				t.Fatalf("source down (%s) but lag %d, source high watermark %d", st[0].Error, st[0].Lag, st[0].SourceHighWatermark)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no error in status %+v after the source closed", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMirrorStaleFetchVerdictAfterStop: a link's fetch loop holds its
// partitions (fetchable) across a round, and StopMirror removes them from
// the link only after every partition stopped, then closes the link. A
// verdict of that loop landing after a partition's stop (under load the
// loop's next round comes in that window) failed the stopped partition:
// the stop's barrier puts the local log end one past the source's, so the
// next fetch is OFFSET_OUT_OF_RANGE and the link's outOfRange calls it a
// divergence. The partition the operator had just failed over went FAILED
// and read-only, the link stayed (topicMirrors), and a restart resumed it
// (TestMirrorRestartAfterStopCrashDropsLink failed that way). The loop's
// actions are run here, by the test, at that point: after the stop,
// with the loop's partition as it held it; each must leave the partition
// STOPPED and writable.
func TestMirrorStaleFetchVerdictAfterStop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict func(t *testing.T, a *testServer, b *testServer, stale *mirrorLink, mp *mirrorPart)
	}{
		{"out of range after the barrier", func(t *testing.T, a, b *testServer, stale *mirrorLink, mp *mirrorPart) {
			// The fetch the loop sends from the stopped log's end.
			resp := roundTrip[*kmsg.FetchResponse](dial(t, a.addr), fetchReq("st", 0, mp.p.log.LogEndOffset(), 0, 1, 1<<20, 1<<20, 0))
			if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.OffsetOutOfRange.Code {
				t.Fatalf("fetch from the stopped log end: error %d, want OFFSET_OUT_OF_RANGE", c)
			}
			if err := stale.outOfRange(context.Background(), mp); err == nil || !strings.Contains(err.Error(), "divergence") {
				t.Fatalf("the loop's verdict: %v, want the divergence it took the barrier for", err)
			}
		}},
		{"source topic created again", func(t *testing.T, a, b *testServer, stale *mirrorLink, mp *mirrorPart) {
			if err := a.deleteTopic("st"); err != nil {
				t.Fatal(err)
			}
			createTopic(t, dial(t, a.addr), "st", 1)
			if err := stale.refreshMetadata(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !mp.stopped || !strings.Contains(mp.lastErr, "created again") {
				t.Fatalf("the loop did not take the topic for created again: %+v", mp)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startTest(t, Config{})
			dir := t.TempDir()
			b := startTest(t, Config{Dir: dir})
			ra, rb := dial(t, a.addr), dial(t, b.addr)
			createTopic(t, ra, "st", 1)
			produceOK(t, ra, "st", 0, records(t, 3, -1, 0, 0, false, 10))
			if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"st"}, Name: "dr"}); err != nil {
				t.Fatal(err)
			}
			waitMirrored(t, b, a, "st", 0)
			var saved mirrorLinkState
			b.meta.view(func(m *metaState) { saved = *m.Mirrors["dr"] })
			tp := partlog.TopicPartition{Topic: "st", Partition: 0}
			b.lmu.RLock()
			l := b.links["dr"]
			b.lmu.RUnlock()
			l.mu.Lock()
			held := *l.parts[tp] // as the loop's round holds it
			l.mu.Unlock()
			mp := &held // the link's own may change until it is closed
			if _, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"st"}}); err != nil {
				t.Fatal(err)
			}
			// The loop as it was before the stop closed it: its partition,
			// and a client (the link's own is closed now).
			cl, err := newMirrorClient(a.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl); err != nil {
				t.Fatal(err) // the brokers, as the loop's client knows them
			}
			stale := &mirrorLink{name: l.name, source: l.source, sourceCluster: l.sourceCluster, cl: cl,
				parts: map[partlog.TopicPartition]*mirrorPart{tp: mp}}
			tc.verdict(t, a, b, stale, mp)

			p, _ := b.partitionFor("st", 0)
			if st, f := p.mirror.State(), p.mirror.Failure(); st != mirror.StateStopped || f != nil {
				t.Fatalf("after the stop and a stale verdict of the fetch loop: %s (%v), want STOPPED", st, f)
			}
			if off := produceOK(t, rb, "st", 0, records(t, 1, -1, 0, 0, false, 10)); off != 4 {
				t.Errorf("first produce after the stop at %d, want 4 (after the barrier)", off)
			}
			// The crash of TestMirrorRestartAfterStopCrashDropsLink: the link
			// is not resumed either.
			if err := b.meta.update(func(m *metaState) { m.Mirrors = map[string]*mirrorLinkState{"dr": &saved} }); err != nil {
				t.Fatal(err)
			}
			b.close(t)
			b = startTest(t, Config{Dir: dir})
			if running, stored := linkNames(b); len(running) != 0 || len(stored) != 0 {
				t.Fatalf("after the restart: running %v, stored %v", running, stored)
			}
			if st := b.MirrorStatus(); len(st) != 1 || st[0].State != "STOPPED" {
				t.Fatalf("after the restart: %+v", st)
			}
		})
	}
}

// TestMirrorSourceTopicAbsentAtRefresh: a link that learns no source
// leader for any of its partitions (the source topic deleted, or not
// there for a while) must ask the source again. The loop waited for the
// next start's wake instead: after a restart whose metadata refresh found
// the topic absent at the source, the partition stayed MIRRORING and
// fetched nothing ever again, with nothing in its status to say why
// (TestMirrorSourceTopicRecreated hung that way when the loop's refresh
// fell between the source's delete and create).
func TestMirrorSourceTopicAbsentAtRefresh(t *testing.T) {
	a := startTest(t, Config{})
	dir := t.TempDir()
	b := startTest(t, Config{Dir: dir})
	ra := dial(t, a.addr)
	createTopic(t, ra, "ab", 1)
	produceOK(t, ra, "ab", 0, records(t, 3, -1, 0, 0, false, 10))
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"ab"}, Name: "dr"}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, b, a, "ab", 0)
	b.close(t)
	// The topic is gone from the source while B is down: B's first
	// refresh after the restart (a resumed link knows no leaders) finds
	// it absent.
	id := a.topicByName("ab").id
	if err := a.deleteTopic("ab"); err != nil {
		t.Fatal(err)
	}
	b = startTest(t, Config{Dir: dir})
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := b.MirrorStatus()
		if len(st) == 1 && strings.Contains(st[0].Error, "source metadata") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source has no topic ab, the status does not say so: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The source answers for the topic again (same id and offsets, as
	// after a leader election there) and has more records.
	a.cmu.Lock()
	err := a.createTopicLocked("ab", id, 0, 1, nil)
	a.cmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	produceOK(t, ra, "ab", 0, records(t, 3, -1, 0, 0, false, 10))
	produceOK(t, ra, "ab", 0, records(t, 5, -1, 0, 0, false, 10))
	waitMirrored(t, b, a, "ab", 0)
	if st := b.MirrorStatus(); len(st) != 1 || st[0].State != "MIRRORING" || st[0].Error != "" {
		t.Fatalf("after the source topic came back: %+v", st)
	}
}
