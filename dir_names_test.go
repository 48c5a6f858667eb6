package partlog

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestParsePartitionDirKafkaRules: only names Kafka could have made for a
// partition parse; every partition has exactly one directory name.
func TestParsePartitionDirKafkaRules(t *testing.T) {
	long := strings.Repeat("x", maxTopicLen)
	for _, c := range []struct {
		name string
		ok   bool
		tp   TopicPartition
	}{
		{"t-1", true, TopicPartition{Topic: "t", Partition: 1}},
		{"a.b_c-D9-0", true, TopicPartition{Topic: "a.b_c-D9", Partition: 0}},
		{long + "-7", true, TopicPartition{Topic: long, Partition: 7}},
		{"t-2147483647", true, TopicPartition{Topic: "t", Partition: 2147483647}},
		// Kafka splits at the last '-': topic "t-", partition 1.
		{"t--1", true, TopicPartition{Topic: "t-", Partition: 1}},
		// A leading '.' is a legal topic character in Kafka.
		{".hidden-0", true, TopicPartition{Topic: ".hidden", Partition: 0}},
		{"t-01", false, TopicPartition{}},
		{"t-00", false, TopicPartition{}},
		{"t-+1", false, TopicPartition{}},
		{"t- 1", false, TopicPartition{}},
		{"t-2147483648", false, TopicPartition{}},
		{"t-１", false, TopicPartition{}}, // full-width digit
		{"-0", false, TopicPartition{}},
		{"a b-0", false, TopicPartition{}},
		{"\x01-0", false, TopicPartition{}},
		{"t\x00-0", false, TopicPartition{}},
		{"tö-0", false, TopicPartition{}},
		{"a/b-0", false, TopicPartition{}},
		{".-0", false, TopicPartition{}},
		{"..-0", false, TopicPartition{}},
		{long + "x-0", false, TopicPartition{}},
	} {
		tp, ok := ParsePartitionDir(c.name)
		if ok != c.ok || tp != c.tp {
			t.Errorf("ParsePartitionDir(%q) = %v, %v; want %v, %v", c.name, tp, ok, c.tp, c.ok)
		}
	}
}

// TestOpenDirOddNames: directories whose names Kafka would not have made
// (and KRaft's metadata log, which Kafka's log manager skips too) are
// reported and left alone (nothing created inside,
// the rest of the directory served), also on reopen.
func TestOpenDirOddNames(t *testing.T) {
	root := t.TempDir()
	odd := []string{"a b-0", "\x01-0", "t-01", "t-+1", "..-0", strings.Repeat("x", maxTopicLen+1) + "-0", "t-0.0123abcd-delete",
		"remote-log-index-cache", "__cluster_metadata-0"}
	for _, name := range append([]string{"t-1"}, odd...) {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A partition name linked to a directory outside: not followed.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "u-0")); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		d, err := OpenDir(root, dirOpts(t))
		if err != nil {
			t.Fatalf("round %d: OpenDir: %v", round, err)
		}
		if len(d.Logs()) != 1 {
			t.Fatalf("round %d: logs %v", round, d.Logs())
		}
		l, ok := d.Log(TopicPartition{Topic: "t", Partition: 1})
		if !ok {
			t.Fatalf("round %d: t-1 not loaded", round)
		}
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 50, 1), 0); err != nil {
			t.Fatal(err)
		}
		kinds := map[string]string{}
		for _, p := range d.Problems() {
			kinds[p.Name] = p.Kind
		}
		if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 || kinds["u-0"] != "unrecognized" {
			t.Errorf("round %d: linked partition: %v %v, reported %q", round, entries, err, kinds["u-0"])
		}
		for _, name := range odd {
			want := "unrecognized"
			switch {
			case strings.HasSuffix(name, "-delete"):
				want = "scheduled-for-deletion"
			case strings.HasPrefix(name, metadataTopic):
				want = "metadata-log"
			}
			if kinds[name] != want {
				t.Errorf("round %d: %q reported as %q, want %q (problems %+v)", round, name, kinds[name], want, d.Problems())
			}
			entries, err := os.ReadDir(filepath.Join(root, name))
			if err != nil || len(entries) != 0 {
				t.Errorf("round %d: %q touched: %v %v", round, name, entries, err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzParsePartitionDir: a name that parses is exactly the name Kafka
// makes for its topic and partition (one name per partition), with a legal
// topic; nothing panics.
func FuzzParsePartitionDir(f *testing.F) {
	for _, s := range []string{"t-0", "t-01", "t--1", "a b-0", ".-0", "__consumer_offsets-49", "t-2147483648", "-0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		tp, ok := ParsePartitionDir(name)
		if !ok {
			return
		}
		if want := tp.Topic + "-" + strconv.Itoa(int(tp.Partition)); want != name {
			t.Fatalf("%q parsed as %v, whose name is %q", name, tp, want)
		}
		if !validTopic(tp.Topic) || tp.Partition < 0 {
			t.Fatalf("%q parsed as %v", name, tp)
		}
	})
}
