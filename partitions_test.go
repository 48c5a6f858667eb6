package partlog

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/checkpoint"
	"golang.org/x/sys/unix"
)

func mustTopicID(t *testing.T, s string) TopicID {
	t.Helper()
	id, err := ParseTopicID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestDirCreate: the partition directory and Kafka's partition.metadata
// are written, the id is read back at open, Create is idempotent for the
// same id and refuses another, bad names are refused.
func TestDirCreate(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	id := mustTopicID(t, "H3rkV2yvQbirbfJ6X1vAeg")
	other := mustTopicID(t, "AAAAAAAAAAAAAAAAAAAAAQ")
	l, err := d.Create("orders", 3, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "orders-3", checkpoint.PartitionMetadataFile))
	if err != nil || string(b) != "version: 0\ntopic_id: H3rkV2yvQbirbfJ6X1vAeg" {
		t.Fatalf("partition.metadata %q, %v", b, err)
	}
	if l.TopicID() != id {
		t.Fatalf("TopicID %v", l.TopicID())
	}
	for _, c := range []struct {
		name      string
		topic     string
		partition int32
		id        TopicID
		want      error
	}{
		{"same id again", "orders", 3, id, nil},
		{"other id", "orders", 3, other, ErrInconsistentTopicID},
		{"zero id", "orders", 4, TopicID{}, ErrInconsistentTopicID},
		{"empty topic", "", 0, id, ErrInvalidTopic},
		{"slash", "a/b", 0, id, ErrInvalidTopic},
		{"dot dot", "..", 0, id, ErrInvalidTopic},
		{"too long", strings.Repeat("x", 250), 0, id, ErrInvalidTopic},
		{"KRaft's metadata log", "__cluster_metadata", 0, id, ErrInvalidTopic},
		{"negative partition", "orders", -1, id, ErrUnknownPartition},
	} {
		got, err := d.Create(c.topic, c.partition, c.id, nil)
		if !errors.Is(err, c.want) || (c.want == nil && got != l) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Read back at open; a partition whose Options expect another id is
	// reported and not served.
	d, err = OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	l, ok := d.Log(TopicPartition{Topic: "orders", Partition: 3})
	if !ok || l.TopicID() != id {
		t.Fatalf("reopened: %v %v", ok, l)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	do := dirOpts(t)
	do.PartitionOptions = func(tp TopicPartition) *Options {
		o := *do.Log
		o.TopicID = other
		return &o
	}
	d, err = OpenDir(root, do)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Log(TopicPartition{Topic: "orders", Partition: 3}); ok {
		t.Fatal("mismatching partition served")
	}
	if p := d.Problems(); len(p) != 1 || p[0].Kind != "inconsistent-topic-id" || !strings.Contains(p[0].Detail, id.String()) {
		t.Fatalf("problems %+v", p)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDirPartitionOptions: options given to Create, or by
// DirOptions.PartitionOptions at open, override the template.
func TestDirPartitionOptions(t *testing.T) {
	root := t.TempDir()
	do := dirOpts(t)
	d, err := OpenDir(root, do)
	if err != nil {
		t.Fatal(err)
	}
	id := TopicID{7}
	own := *do.Log
	own.SegmentBytes = 2048
	own.IndexIntervalBytes = IndexEveryAppend
	a, err := d.Create("small", 0, id, &own)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Create("big", 0, TopicID{8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.opts.SegmentBytes != 2048 || a.opts.IndexIntervalBytes != 0 || b.opts.SegmentBytes != do.Log.SegmentBytes {
		t.Fatalf("small %d/%d big %d", a.opts.SegmentBytes, a.opts.IndexIntervalBytes, b.opts.SegmentBytes)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	do.PartitionOptions = func(tp TopicPartition) *Options {
		if tp.Topic == "small" {
			return &own
		}
		return nil
	}
	d, err = OpenDir(root, do)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, _ = d.Log(TopicPartition{Topic: "small"})
	b, _ = d.Log(TopicPartition{Topic: "big"})
	if a.opts.SegmentBytes != 2048 || a.opts.IndexIntervalBytes != 0 || b.opts.SegmentBytes != do.Log.SegmentBytes {
		t.Fatalf("reopened: small %d/%d big %d", a.opts.SegmentBytes, a.opts.IndexIntervalBytes, b.opts.SegmentBytes)
	}
}

var deleteDirRE = regexp.MustCompile(`^orders-1\.[0-9a-f]{32}-delete$`)

// TestDirDelete: the directory is renamed as Kafka names it, removed in
// the background after the delay, the partition can be created again at
// once, the checkpoints forget it, and Close finishes a pending removal.
func TestDirDelete(t *testing.T) {
	root := t.TempDir()
	do := dirOpts(t)
	do.Log.FileDeleteDelayMs = 1000 // long enough to see the -delete directory on a loaded machine
	d, err := OpenDir(root, do)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		l, err := d.Create("orders", p, TopicID{1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Delete("orders", 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete("orders", 1); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("second delete: %v", err)
	}
	names := func() (out []string) {
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, e.Name())
			}
		}
		return out
	}
	var pending string
	for _, n := range names() {
		if deleteDirRE.MatchString(n) {
			pending = n
		}
	}
	if pending == "" {
		t.Fatalf("no -delete directory: %v", names())
	}
	if _, ok := d.Log(TopicPartition{Topic: "orders", Partition: 1}); ok {
		t.Fatal("deleted partition still served")
	}
	rps, _ := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
	if _, ok := rps[TopicPartition{Topic: "orders", Partition: 1}]; ok {
		t.Fatal("checkpoint still lists the deleted partition")
	}
	// Created again at once, empty, while the old one waits for removal.
	l, err := d.Create("orders", 1, TopicID{2}, nil)
	if err != nil || l.LogEndOffset() != 0 {
		t.Fatalf("re-create: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(root, pending)); errors.Is(err, os.ErrNotExist) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(root, pending)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s not removed after the delay: %v", pending, err)
	}
	// A long delay: Close removes it.
	d.opts.Log.FileDeleteDelayMs = 1 << 40
	l.opts.FileDeleteDelayMs = 1 << 40
	if err := d.Delete("orders", 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names() {
		if strings.HasSuffix(n, "-delete") {
			t.Fatalf("Close left %s", n)
		}
	}
	if got := names(); len(got) != 1 || got[0] != "orders-0" {
		t.Fatalf("directories %v", got)
	}
}

func TestDeleteDirName(t *testing.T) {
	for _, c := range []struct {
		topic   string
		wantLen int
	}{
		{"orders", len("orders-12.") + 32 + len("-delete")},
		{strings.Repeat("t", 249), 255},
	} {
		n, err := deleteDirName(TopicPartition{Topic: c.topic, Partition: 12})
		if err != nil || len(n) != c.wantLen || !kafkaSuffixedDirRE.MatchString(n) || !strings.HasSuffix(n, "-delete") {
			t.Errorf("%q: %q (%d bytes), %v", c.topic, n, len(n), err)
		}
	}
}

// TestDirDeletePartitions: several partitions go in one call, with data
// appended and not flushed (their logs are discarded, not flushed), the
// ones the directory does not serve are named in the error, the others
// are gone from the checkpoints and the directory, and can be created
// again; the directory reopens cleanly.
func TestDirDeletePartitions(t *testing.T) {
	root := t.TempDir()
	o := dirOpts(t)
	o.Log.FileDeleteDelayMs = -1 // removed at once
	d, err := OpenDir(root, o)
	if err != nil {
		t.Fatal(err)
	}
	id := mustTopicID(t, "H3rkV2yvQbirbfJ6X1vAeg")
	var tps []TopicPartition
	for p := int32(0); p < 50; p++ {
		l, err := d.Create("big", p, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(makeBatch(t, 3, 100, 1000), 0); err != nil {
			t.Fatal(err)
		}
		tps = append(tps, TopicPartition{Topic: "big", Partition: p})
	}
	keep, err := d.Create("keep", 0, mustTopicID(t, "AAAAAAAAAAAAAAAAAAAAAQ"), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = d.DeletePartitions(append(tps, TopicPartition{Topic: "nope", Partition: 0}))
	if !errors.Is(err, ErrUnknownPartition) || !strings.Contains(err.Error(), "nope-0") {
		t.Fatalf("DeletePartitions with an unknown partition: %v", err)
	}
	if n := len(d.Logs()); n != 1 {
		t.Fatalf("%d partitions served after deleting 50 of 51", n)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "big-") {
			t.Fatalf("%s left in the log directory", e.Name())
		}
	}
	rps, err := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
	if err != nil || len(rps) != 1 {
		t.Fatalf("recovery points after the delete: %v %v", rps, err)
	}
	if _, err := keep.AppendAsLeader(makeBatch(t, 1, 10, 1000), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create("big", 7, id, nil); err != nil {
		t.Fatalf("create a deleted partition again: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n := len(d.Logs()); n != 2 || len(d.Problems()) != 0 {
		t.Fatalf("reopened: %d partitions, problems %v", n, d.Problems())
	}
}

// BenchmarkDirDeleteTopic deletes a topic of 500 partitions with one
// Delete per partition and with one DeletePartitions.
func BenchmarkDirDeleteTopic(b *testing.B) {
	const parts = 500
	for _, bc := range []struct {
		name string
		del  func(d *Dir, tps []TopicPartition) error
	}{
		{"delete-each", func(d *Dir, tps []TopicPartition) error {
			for _, tp := range tps {
				if err := d.Delete(tp.Topic, tp.Partition); err != nil {
					return err
				}
			}
			return nil
		}},
		{"delete-partitions", func(d *Dir, tps []TopicPartition) error { return d.DeletePartitions(tps) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			root := b.TempDir()
			d, err := OpenDir(root, &DirOptions{Log: &Options{FileDeleteDelayMs: 60_000}})
			if err != nil {
				b.Fatal(err)
			}
			id, _ := ParseTopicID("H3rkV2yvQbirbfJ6X1vAeg")
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var tps []TopicPartition
				for p := int32(0); p < parts; p++ {
					if _, err := d.Create("t", p, id, nil); err != nil {
						b.Fatal(err)
					}
					tps = append(tps, TopicPartition{Topic: "t", Partition: p})
				}
				unix.Sync() // the creations' writes are not the delete's to wait for
				b.StartTimer()
				if err := bc.del(d, tps); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer() // Close removes the renamed directories: not the delete's work
			if err := d.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
