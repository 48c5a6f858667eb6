package partlog

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/snapshot"
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
	// The producer snapshot written at the roll. Kafka's (from a broker
	// that does not know control type 7) holds producers 2000, 1000 and
	// 3000; here the MIRROR_PID_RESET barrier at offset 13 removed every
	// entry made before it, so only 3000 (offsets 16-17) remains, with
	// exactly Kafka's fields. The entry order is not part of the format.
	kafka, err := snapshot.Read("testdata/kafka-segment/00000000000000000018.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.Read(filepath.Join(dir, "00000000000000000018.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	byPID := func(e []snapshot.Entry) map[int64]snapshot.Entry {
		m := map[int64]snapshot.Entry{}
		for _, x := range e {
			m[x.ProducerID] = x
		}
		return m
	}
	want := byPID(kafka)
	delete(want, 1000)
	delete(want, 2000)
	if b := l.Barriers(); len(b) != 1 || b[0] != 13 {
		t.Errorf("barriers %v, want [13]", b)
	}
	if !maps.Equal(byPID(got), want) {
		t.Errorf("snapshot entries\n got %+v\nwant %+v", got, want)
	}
}
