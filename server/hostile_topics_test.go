package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func createTopicsReq(version int16, validateOnly bool, topics map[string]int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.ValidateOnly = version, validateOnly
	for name, n := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// onDisk lists the log directory's entries that start with prefix.
func onDisk(t *testing.T, dir, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestTopicNamesKafkaRefuses: CreateTopics and auto-creation accepted
// __cluster_metadata (whose directory OpenDir leaves alone, so it was not
// served after a restart), Kafka's internal topic names, and a name
// colliding with another's after '.' and '_' are unified. Each is
// refused with Kafka's code and message, with and without validate-only,
// and nothing is made.
func TestTopicNamesKafkaRefuses(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir, AutoCreate: true})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "a.b", 1)
	createTopic(t, rc, "x_y", 1)
	for _, c := range []struct {
		name string
		code int16
		msg  string
	}{
		{"__cluster_metadata", errInvalidRequest, "Creation of internal topic __cluster_metadata is prohibited."},
		{"__consumer_offsets", errInvalidRequest, "internal topic"},
		{"__transaction_state", errInvalidRequest, "internal topic"},
		{"a_b", errInvalidTopic, "Topic 'a_b' collides with existing topic: a.b"},
		{"x.y", errInvalidTopic, "Topic 'x.y' collides with existing topic: x_y"},
	} {
		for _, validate := range []bool{false, true} {
			r := roundTrip[*kmsg.CreateTopicsResponse](rc, createTopicsReq(5, validate, map[string]int32{c.name: 1}))
			got := r.Topics[0]
			if got.ErrorCode != c.code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, c.msg) {
				t.Errorf("create %s (validate only %v): %d %v, want %d %q", c.name, validate, got.ErrorCode, got.ErrorMessage, c.code, c.msg)
			}
		}
		mr := kmsg.NewPtrMetadataRequest()
		mr.Version, mr.AllowAutoTopicCreation = 9, true
		n := c.name
		mr.Topics = []kmsg.MetadataRequestTopic{{Topic: &n}}
		if m := roundTrip[*kmsg.MetadataResponse](rc, mr); m.Topics[0].ErrorCode == 0 {
			t.Errorf("metadata auto-created %s", c.name)
		}
		pr := roundTrip[*kmsg.ProduceResponse](rc, produceReq(c.name, 0, 1, records(t, 1, -1, 0, 0, false, 4)))
		if pr.Topics[0].Partitions[0].ErrorCode == 0 {
			t.Errorf("produce auto-created %s", c.name)
		}
		if got := onDisk(t, dir, c.name+"-"); len(got) != 0 {
			t.Errorf("%s: %v on disk", c.name, got)
		}
	}
}

// TestTopicCreationBounds: the partitions one request may make are
// bounded as Kafka's controller bounds them (10 000 records: the whole
// request is refused), and the partitions the server serves by
// MaxPartitions; a refused creation makes nothing.
func TestTopicCreationBounds(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir, MaxPartitions: 10})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "eight", 8)
	r := roundTrip[*kmsg.CreateTopicsResponse](rc, createTopicsReq(5, false, map[string]int32{"three": 3}))
	if c := r.Topics[0]; c.ErrorCode != errPolicyViolation || c.ErrorMessage == nil || !strings.Contains(*c.ErrorMessage, "at most 10") {
		t.Fatalf("11 partitions with MaxPartitions 10: %d %v", c.ErrorCode, c.ErrorMessage)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 1
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "eight", Count: 11}}
	if c := roundTrip[*kmsg.CreatePartitionsResponse](rc, cp).Topics[0]; c.ErrorCode != errPolicyViolation {
		t.Fatalf("CreatePartitions past MaxPartitions: %d", c.ErrorCode)
	}
	if got := onDisk(t, dir, "three-"); len(got) != 0 || len(onDisk(t, dir, "eight-")) != 8 {
		t.Fatalf("after refused creations: %v, %d of eight", got, len(onDisk(t, dir, "eight-")))
	}

	big := startTest(t, Config{})
	rc = dial(t, big.addr)
	r = roundTrip[*kmsg.CreateTopicsResponse](rc, createTopicsReq(5, false, map[string]int32{"small": 1, "huge": 10_000}))
	for _, c := range r.Topics {
		if c.ErrorCode != errPolicyViolation {
			t.Fatalf("%s in a request of 10 003 records: %d, want POLICY_VIOLATION for the whole request", c.Topic, c.ErrorCode)
		}
	}
}

// TestFailedCreateTopicsLeavesNothing: a creation failing at its third
// partition left the first two and the topic's configs behind; it
// removes them, and the topic can be created once the cause is gone.
func TestFailedCreateTopicsLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	blocker := filepath.Join(dir, "half-2")
	if err := os.WriteFile(blocker, []byte("not a partition"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := createTopicsReq(5, false, map[string]int32{"half": 4})
	v := "1000"
	req.Topics[0].Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: &v}}
	if c := roundTrip[*kmsg.CreateTopicsResponse](rc, req).Topics[0]; c.ErrorCode == 0 {
		t.Fatal("creation over a file named like its partition succeeded")
	}
	for _, name := range onDisk(t, dir, "half-") {
		if name != "half-2" && !strings.HasSuffix(name, "-delete") {
			t.Fatalf("%s left by the failed creation", name)
		}
	}
	if ts.topicByName("half") != nil || ts.meta.topicConfigs("half") != nil {
		t.Fatal("the failed creation left the topic or its configs")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	createTopic(t, rc, "half", 4)
}

// TestDeleteTopicOfManyPartitions: a topic's partitions are deleted in
// one directory operation (it took 3.5 minutes for 10 000 partitions,
// the checkpoints rewritten and the directory synced per partition);
// BenchmarkDirDeleteTopic in the root package measures it.
func TestDeleteTopicOfManyPartitions(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "many", 300)
	createTopic(t, rc, "other", 1)
	dr := kmsg.NewPtrDeleteTopicsRequest()
	dr.Version = 3
	dr.TopicNames = []string{"many"}
	if c := roundTrip[*kmsg.DeleteTopicsResponse](rc, dr).Topics[0].ErrorCode; c != 0 {
		t.Fatalf("delete: %d", c)
	}
	for _, name := range onDisk(t, dir, "many-") {
		if !strings.HasSuffix(name, "-delete") {
			t.Fatalf("%s left after the delete", name)
		}
	}
	if n := len(ts.dir.Logs()); n != 1 {
		t.Fatalf("%d partitions served after the delete", n)
	}
	createTopic(t, rc, "many", 2)
}
