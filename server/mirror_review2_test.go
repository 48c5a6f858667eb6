package server

import (
	"bytes"
	"context"
	"testing"

	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicWith creates a topic with configs.
func createTopicWith(t *testing.T, rc *rawConn, name string, parts int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp := roundTrip[*kmsg.CreateTopicsResponse](rc, req)
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create %s: error %d", name, c)
	}
}

// TestMirrorFetchLargerThanSegment: the destination topic exists with a
// small segment.bytes (1 MiB, Kafka's minimum; an operator who creates
// the topic first to give it the source's configs). One fetch brings up
// to 4 MiB of whole batches, each below 1 MiB. Appended in one call they
// were refused ("append larger than a segment") and the partition went
// FAILED; the batches fit, so they must be appended segment by segment.
func TestMirrorFetchLargerThanSegment(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "seg", 1)
	for i := 0; i < 5; i++ {
		produceOK(t, ra, "seg", 0, records(t, 1, -1, 0, 0, false, 600<<10))
	}
	createTopicWith(t, rb, "seg", 1, map[string]string{"segment.bytes": "1048576"})
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"seg"}}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, b, a, "seg", 0)
	p, _ := b.partitionFor("seg", 0)
	if st := p.mirror.State(); st != mirror.StateMirroring {
		t.Fatalf("state %s (%v), want MIRRORING", st, p.mirror.Failure())
	}
	la, lb := logOf(t, a, "seg", 0), logOf(t, b, "seg", 0)
	va, err := la.Read(0, 64<<20, la.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer va.Release()
	var got []byte
	for off := int64(0); off < lb.LogEndOffset(); {
		v, err := lb.Read(off, 64<<20, lb.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v.Records...)
		off = endOfBatches(v.Records)
		v.Release()
	}
	if !bytes.Equal(va.Records, got) {
		t.Fatalf("B's batches differ from A's (%d bytes, want %d)", len(got), len(va.Records))
	}
}

// TestBatchesUpTo: prefixes of whole batches within the limit, at least
// one batch; unframed bytes go whole.
func TestBatchesUpTo(t *testing.T) {
	b1 := records(t, 1, -1, 0, 0, false, 100)
	b2 := records(t, 1, -1, 0, 0, false, 200)
	all := append(append(append([]byte{}, b1...), b2...), b1...)
	for _, c := range []struct {
		name  string
		in    []byte
		limit int64
		head  int
	}{
		{"all fit", all, int64(len(all)), len(all)},
		{"two fit", all, int64(len(b1) + len(b2)), len(b1) + len(b2)},
		{"one fits", all, int64(len(b1) + len(b2) - 1), len(b1)},
		{"first larger than limit", all, 10, len(b1)},
		{"unframed", []byte{1, 2, 3}, 10, 3},
		{"empty", nil, 10, 0},
	} {
		head, rest := batchesUpTo(c.in, c.limit)
		if len(head) != c.head || len(head)+len(rest) != len(c.in) {
			t.Errorf("%s: head %d rest %d, want head %d of %d", c.name, len(head), len(rest), c.head, len(c.in))
		}
	}
}
