package partlog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
)

// TestFilesMatchKafka replays the batches of a segment written by Kafka
// (testdata/kafka-segment, the shared golden vectors) as follower appends,
// rolls at offset 18 as the broker did, and compares the files with
// Kafka's: the .log byte for byte, the .index empty (no append reached
// index.interval.bytes), the .timeindex holding the one entry written at
// roll, and the leader-epoch-checkpoint text.
func TestFilesMatchKafka(t *testing.T) {
	kafkaLog, err := os.ReadFile("testdata/kafka-segment/00000000000000000000.log")
	if err != nil {
		t.Fatal(err)
	}
	kafkaTimeIndex, err := os.ReadFile("testdata/kafka-segment/00000000000000000000.timeindex")
	if err != nil {
		t.Fatal(err)
	}
	opts := smallOpts(t)
	opts.SegmentBytes = 1 << 20
	opts.MaxIndexBytes = 10 << 20
	opts.IndexIntervalBytes = DefaultIndexIntervalBytes
	l, dir := openTestLog(t, opts)
	it := batch.NewIterator(kafkaLog, 0)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if _, err := l.AppendAsFollower(bytes.Clone(v)); err != nil {
			t.Fatalf("append batch at %d: %v", v.BaseOffset(), err)
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	if l.LogEndOffset() != 18 {
		t.Fatalf("LEO %d, want 18", l.LogEndOffset())
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got := read("00000000000000000000.log"); !bytes.Equal(got, kafkaLog) {
		t.Errorf(".log differs from Kafka's (%d vs %d bytes)", len(got), len(kafkaLog))
	}
	if got := read("00000000000000000000.index"); len(got) != 0 {
		t.Errorf(".index is %d bytes, Kafka's is empty", len(got))
	}
	if got := read("00000000000000000000.timeindex"); !bytes.Equal(got, kafkaTimeIndex) {
		t.Errorf(".timeindex %x, Kafka's %x", got, kafkaTimeIndex)
	}
	if got, want := string(read("leader-epoch-checkpoint")), "0\n3\n0 0\n1 6\n2 10\n"; got != want {
		t.Errorf("leader-epoch-checkpoint %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000018.log")); err != nil {
		t.Errorf("new segment: %v", err)
	}
}
