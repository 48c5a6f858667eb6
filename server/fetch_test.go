package server

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLongPollAnswersWhileWatchedPartitionsMove: a long-poll fetch of
// 1 000 partitions while another connection appends to them without
// pause is answered within its MaxWait every time. Its wait registered
// a watch on each partition and then looked once for a move it had
// missed, signalling its one-slot channel with a blocking send: a move
// during the 1 000 registrations had filled the slot already, the send
// never returned, and the fetch was never answered (in BenchmarkBrokers'
// end-to-end cells over 1 000 partitions, kgo's consumer timed out after
// 15 s and reconnected).
func TestLongPollAnswersWhileWatchedPartitionsMove(t *testing.T) {
	parts := 1000
	if testing.Short() {
		parts = 300
	}
	ts := startTest(t, Config{})
	pc := dial(t, ts.addr)
	createTopic(t, pc, "moving", int32(parts))
	stop := make(chan struct{})
	produced := make(chan struct{})
	// Raw frames: the helpers fail the test, which only its own
	// goroutine may do.
	frames := make([][]byte, parts)
	for p := range frames {
		frames[p] = frameOf(produceReq("moving", int32(p), 1, records(t, 1, -1, 0, 0, false, 10)), int32(p))
	}
	go func() {
		defer close(produced)
		var size [4]byte
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = pc.c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := pc.c.Write(frames[i%parts]); err != nil {
				return
			}
			if _, err := io.ReadFull(pc.r, size[:]); err != nil {
				return
			}
			if _, err := pc.r.Discard(int(binary.BigEndian.Uint32(size[:]))); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-produced }()

	fc := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	// Far more bytes than arrive within MaxWait: every fetch long-polls
	// to its end, moves arriving all along.
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 11, 100, 64<<20, 64<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "moving"
	for p := range int32(parts) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 0, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for i := range 20 {
		start := time.Now()
		// An unanswered fetch fails the read at this deadline.
		_ = fc.c.SetDeadline(start.Add(10 * time.Second))
		r := roundTrip[*kmsg.FetchResponse](fc, req)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != parts {
			t.Fatalf("fetch %d: error %d, %d topics", i, r.ErrorCode, len(r.Topics))
		}
		for j := range r.Topics[0].Partitions {
			p := &r.Topics[0].Partitions[j]
			req.Topics[0].Partitions[j].FetchOffset = max(req.Topics[0].Partitions[j].FetchOffset, p.HighWatermark)
		}
	}
}
