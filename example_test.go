package partlog_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

// records builds a client's record batch of n records stamped ts (what a
// produce request carries).
func records(n int, ts int64) []byte {
	spec := batch.NewBatchSpec(0)
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: ts, Value: []byte("hello")}
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		log.Fatal(err)
	}
	return out
}

func tempDir() string {
	d, err := os.MkdirTemp("", "partlog-example-")
	if err != nil {
		log.Fatal(err)
	}
	return d
}

// Open a partition directory, append a produce request's batch as the
// leader, and read it back.
func ExampleOpen() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	l, err := partlog.Open(filepath.Join(dir, "orders-0"), &partlog.Options{SegmentBytes: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	info, err := l.AppendAsLeader(records(3, 1_700_000_000_000), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended offsets", info.FirstOffset, "to", info.LastOffset, "log end", l.LogEndOffset())
	// Output: appended offsets 0 to 2 log end 3
}

// A leader appends, the followers' progress moves the high watermark, and
// a consumer's fetch is served up to it; the empty fetch at the high
// watermark still carries a non-nil, empty record set.
func ExampleLog_Read() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	l, err := partlog.Open(dir, &partlog.Options{SegmentBytes: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 4; i++ {
		if _, err := l.AppendAsLeader(records(2, 1_700_000_000_000), 5); err != nil {
			log.Fatal(err)
		}
	}
	l.SetHighWatermark(6) // every follower has fetched up to offset 6
	v, err := l.Read(0, 1<<20, l.HighWatermark())
	if err != nil {
		log.Fatal(err)
	}
	it := batch.NewIterator(v.Records, 0)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		fmt.Println("batch", b.BaseOffset(), "-", b.LastOffset(), "epoch", b.PartitionLeaderEpoch())
	}
	v.Release()
	empty, err := l.Read(6, 1<<20, l.HighWatermark())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("at the high watermark:", len(empty.Records), "bytes, nil:", empty.Records == nil)
	empty.Release()
	// Output:
	// batch 0 - 1 epoch 5
	// batch 2 - 3 epoch 5
	// batch 4 - 5 epoch 5
	// at the high watermark: 0 bytes, nil: false
}

// Producers with acks=all on a single-replica topic wait for durability:
// each calls Sync for its own offsets, and concurrent callers share the
// fsyncs (group commit).
func ExampleLog_Sync() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	l, err := partlog.Open(dir, &partlog.Options{SegmentBytes: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := l.AppendAsLeader(records(1, 1_700_000_000_000), 0)
			if err != nil {
				log.Fatal(err)
			}
			if err := l.Sync(context.Background(), info.LastOffset+1); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
	fmt.Println("durable up to", l.RecoveryPoint(), "of", l.LogEndOffset())
	// Output: durable up to 8 of 8
}

// A broker opens its log directory, creates partitions (writing Kafka's
// partition.metadata), deletes one, and after a restart finds the others
// with their high watermarks.
func ExampleOpenDir() {
	root := tempDir()
	defer os.RemoveAll(root)
	opts := &partlog.DirOptions{Log: &partlog.Options{SegmentBytes: 1 << 20}}
	d, err := partlog.OpenDir(root, opts)
	if err != nil {
		log.Fatal(err)
	}
	id, _ := partlog.ParseTopicID("H3rkV2yvQbirbfJ6X1vAeg")
	for p := int32(0); p < 2; p++ {
		l, err := d.Create("orders", p, id, nil)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := l.AppendAsLeader(records(3, 1_700_000_000_000), 0); err != nil {
			log.Fatal(err)
		}
		l.SetHighWatermark(2)
	}
	if err := d.Delete("orders", 1); err != nil {
		log.Fatal(err)
	}
	if err := d.Close(); err != nil {
		log.Fatal(err)
	}

	d, err = partlog.OpenDir(root, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	for tp, l := range d.Logs() {
		o := l.Offsets()
		fmt.Println(tp, "topic id", l.TopicID(), "high watermark", o.HighWatermark, "log end", o.LogEndOffset)
	}
	// Output: orders-0 topic id H3rkV2yvQbirbfJ6X1vAeg high watermark 2 log end 3
}

// ListOffsets: the first offset at or after a timestamp, and the special
// values for the latest, earliest and max-timestamp offsets.
func ExampleLog_OffsetForTimestamp() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	l, err := partlog.Open(dir, &partlog.Options{SegmentBytes: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for i := int64(0); i < 5; i++ {
		if _, err := l.AppendAsLeader(records(2, 1_700_000_000_000+i*1000), 1); err != nil {
			log.Fatal(err)
		}
	}
	for _, ts := range []int64{1_700_000_002_500, partlog.ListLatest, partlog.ListEarliest, partlog.ListMaxTimestamp, 1_800_000_000_000} {
		r, found, err := l.OffsetForTimestamp(ts)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ts, "->", r.Offset, r.Timestamp, r.LeaderEpoch, found)
	}
	// Output:
	// 1700000002500 -> 6 1700000003000 1 true
	// -1 -> 10 -1 1 true
	// -2 -> 0 -1 1 true
	// -3 -> 8 1700000004000 1 true
	// 1800000000000 -> 0 0 0 false
}

// Retention: segments older than RetentionMs, wholly below the high
// watermark, are deleted and the log start offset moves up.
func ExampleLog_DeleteOldSegments() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := partlog.Open(dir, &partlog.Options{SegmentBytes: 1 << 20, RetentionMs: 3_600_000, FileDeleteDelayMs: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for hour := 0; hour < 4; hour++ {
		if _, err := l.AppendAsLeader(records(10, day.Add(time.Duration(hour)*time.Hour).UnixMilli()), 0); err != nil {
			log.Fatal(err)
		}
		if err := l.Roll(); err != nil { // one segment per hour here
			log.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	n, err := l.DeleteOldSegments(day.Add(3*time.Hour + 30*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted", n, "segments; log start", l.LogStartOffset(), "segments", l.Segments())
	// Output: deleted 3 segments; log start 30 segments [30 40]
}
