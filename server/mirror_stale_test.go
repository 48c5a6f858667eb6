package server

import (
	"context"
	"strings"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorStaleFetchVerdictAfterStop: a link's fetch loop holds its
// partitions (fetchable) across a round, and StopMirror removes them from
// the link only after every partition stopped, then closes the link. A
// verdict of that loop landing after a partition's stop (under load the
// loop's next round comes in that window) failed the stopped partition:
// the stop's barrier puts the local log end one past the source's, so the
// next fetch is OFFSET_OUT_OF_RANGE and mirrorOutOfRange calls it a
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
			if err := b.mirrorOutOfRange(context.Background(), stale, mp); err == nil || !strings.Contains(err.Error(), "divergence") {
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
