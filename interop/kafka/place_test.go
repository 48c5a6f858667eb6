package kafka

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPlacePartition moves a partition's files into another topic's
// partition directory (keeping that topic's id) in the other of two log
// directories, sets its checkpoints there, and has the broker load them:
// without the clean-shutdown marker it recovers them and serves the
// records; the checkpoint files read back.
func TestPlacePartition(t *testing.T) {
	in := Need(t)
	b := in.StartBroker(t, BrokerConfig{LogDirs: 2})
	if err := b.CreateTopic("src", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("dst", 1, map[string]string{"index.interval.bytes": "100"}); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic("src"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{'v', byte('0' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	other := b.LogDirs[0]
	if filepath.Dir(b.PartitionDir("dst", 0)) == other {
		other = b.LogDirs[1]
	}
	if err := b.MovePartition("dst", 0, other); err != nil {
		t.Fatal(err)
	}
	if got := filepath.Dir(b.PartitionDir("dst", 0)); got != other {
		t.Fatalf("dst-0 is in %s after the move to %s", got, other)
	}
	if err := b.PlacePartition("dst", 0, b.PartitionDir("src", 0)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCheckpoint(RecoveryPointCheckpoint, "dst", 0, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCheckpoint(LogStartCheckpoint, "dst", 0, 1, true); err != nil {
		t.Fatal(err)
	}
	rp, err := ReadCheckpoint(filepath.Join(other, RecoveryPointCheckpoint))
	if err != nil || rp[TopicPartition{"dst", 0}] != 2 {
		t.Fatalf("recovery point checkpoint: %v %v", rp, err)
	}
	if err := b.SetCleanShutdown(false); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	leaders, err := b.WaitLeaders("dst", 1, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if leaders[0].Leader != 1 {
		t.Fatalf("dst-0 leader %+v", leaders[0])
	}
	start, end, err := b.ListOffsets("dst", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	if start[0] != 1 || end[0] != 5 {
		t.Fatalf("dst-0 offsets: start %d end %d, want 1 and 5", start[0], end[0])
	}
	// The consumer's own deadline: the produce's is spent by the
	// restarts on a loaded machine.
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	c := b.Client(t, kgo.ConsumeTopics("dst"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 4 {
		fs := c.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consumed %q", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if got[0] != "v1" || got[3] != "v4" {
		t.Fatalf("consumed %q", got)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}
