package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBrokerLifecycle starts a broker, produces through it, dumps its
// segment with the tool JVM, stops it cleanly (clean-shutdown marker)
// and starts it again over the same directory.
func TestBrokerLifecycle(t *testing.T) {
	in := Need(t)
	b := in.StartBroker(t, BrokerConfig{})
	cl := b.Client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("lifecycle"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	tl := in.StartTools(t)
	seg := b.PartitionDir("lifecycle", 0) + "/00000000000000000000.log"
	out, err := tl.Dump([]string{seg}, "--deep-iteration")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "| offset: "); n != 3 {
		t.Fatalf("DumpLogSegments shows %d records, want 3:\n%s", n, out)
	}
	// The tool JVM survives a tool's exit code and answers again.
	res, err := tl.Run(0, DumpLogSegments, "--no-such-flag")
	if err != nil {
		t.Fatal(err)
	}
	if res.Code == 0 {
		t.Fatalf("DumpLogSegments accepted an unknown flag: %+v", res)
	}
	if _, err := tl.Dump([]string{seg}); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl2 := b.Client(t, kgo.ConsumeTopics("lifecycle"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 3 {
		fs := cl2.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 3 records after restart: %v", got, err)
		}
		got += fs.NumRecords()
	}
	b.Kill()
}
