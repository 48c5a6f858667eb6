package server

import (
	"strconv"
	"testing"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createCode creates a topic with one config and returns the error code.
func createCode(t *testing.T, rc *rawConn, name string, configs map[string]string) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, -1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	return roundTrip[*kmsg.CreateTopicsResponse](rc, req).Topics[0].ErrorCode
}

// TestTopicConfigBounds: every implemented config's type and lower bound
// as Kafka 4.4 checks them (LogConfig), Kafka's zero values among the
// accepted ones (the wire diff checks the same against Kafka).
func TestTopicConfigBounds(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	for i, c := range []struct {
		name, value string
		ok          bool
	}{
		{"retention.ms", "0", true}, {"retention.ms", "-1", true}, {"retention.ms", "-2", false},
		{"retention.bytes", "0", true}, {"retention.bytes", "-5", true},
		{"max.message.bytes", "0", true}, {"max.message.bytes", "-1", false}, {"max.message.bytes", "2147483648", false},
		{"segment.ms", "0", false}, {"segment.ms", "1", true},
		{"segment.bytes", "1048575", false}, {"segment.bytes", "1048576", true},
		{"segment.jitter.ms", "-1", false}, {"segment.index.bytes", "3", false},
		{"index.interval.bytes", "0", true}, {"index.interval.bytes", "-1", false},
		{"file.delete.delay.ms", "0", true}, {"file.delete.delay.ms", "-1", false},
		{"message.timestamp.after.max.ms", "0", true}, {"message.timestamp.before.max.ms", "-1", false},
		{"message.timestamp.type", "logappendtime", false}, {"message.timestamp.type", "LogAppendTime", true},
		{"cleanup.policy", "delete", true}, {"cleanup.policy", "bogus", false},
		{"min.insync.replicas", "0", false}, {"min.insync.replicas", "2", true},
		{"preallocate", "TRUE", true}, {"preallocate", "yes", false},
		{"retention.ms", " 100", true}, {"retention.ms", "abc", false},
		{"no.such.config", "1", false},
	} {
		want := errInvalidConfig
		if c.ok {
			want = errNone
		}
		if got := createCode(t, rc, "b"+strconv.Itoa(i), map[string]string{c.name: c.value}); got != want {
			t.Errorf("%s=%q: error %d, want %d", c.name, c.value, got, want)
		}
	}
	// Kafka's zero reaches the log as partlog.Zero, not the default.
	l, ok := ts.Dir().Log(partlog.TopicPartition{Topic: "b5", Partition: 0}) // max.message.bytes=0
	if !ok {
		t.Fatal("b5 not created")
	}
	rec := records(t, 1, -1, 0, 0, false, 1)
	if _, err := l.AppendAsLeader(rec, 0); err == nil {
		t.Fatal("max.message.bytes=0 accepted a batch")
	}
}

func describe(t *testing.T, rc *rawConn, topic, name string) (string, kmsg.ConfigSource) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{name}
	req.Resources = append(req.Resources, rr)
	resp := roundTrip[*kmsg.DescribeConfigsResponse](rc, req)
	if len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("describe %s of %s: %+v", name, topic, resp.Resources[0])
	}
	c := resp.Resources[0].Configs[0]
	return *c.Value, c.Source
}

func incrementalAlter(t *testing.T, rc *rawConn, topic string, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version, req.ValidateOnly = 1, validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeTopic, topic, ops
	req.Resources = append(req.Resources, rr)
	return roundTrip[*kmsg.IncrementalAlterConfigsResponse](rc, req).Resources[0].ErrorCode
}

func op(name string, o kmsg.IncrementalAlterConfigOp, v *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, o, v
	return c
}

// TestAlterConfigs: IncrementalAlterConfigs' operations and refusals,
// validate-only, the legacy AlterConfigs replacing the whole set, and a
// change reaching the running logs (a lower max.message.bytes refuses
// the next batch; a restart keeps it).
func TestAlterConfigs(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	createTopicWith(t, rc, "ac", 2, map[string]string{"retention.ms": "1000"})
	s := kmsg.StringPtr
	for _, c := range []struct {
		name string
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want int16
	}{
		{"set", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.bytes", kmsg.IncrementalAlterConfigOpSet, s("2048"))}, errNone},
		{"invalid value", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("segment.ms", kmsg.IncrementalAlterConfigOpSet, s("0"))}, errInvalidConfig},
		{"unknown config", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("no.such", kmsg.IncrementalAlterConfigOpSet, s("1"))}, errInvalidConfig},
		{"append to a long", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", kmsg.IncrementalAlterConfigOpAppend, s("5"))}, errInvalidConfig},
		{"append to a list", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, s("delete"))}, errNone},
		{"null value", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", kmsg.IncrementalAlterConfigOpSet, nil)}, errInvalidRequest},
	} {
		if got := incrementalAlter(t, rc, "ac", false, c.ops...); got != c.want {
			t.Errorf("%s: error %d, want %d", c.name, got, c.want)
		}
	}
	if got := incrementalAlter(t, rc, "ac-none", false, op("retention.ms", kmsg.IncrementalAlterConfigOpSet, s("5"))); got != errUnknownTopicOrPartition {
		t.Errorf("unknown topic: %d", got)
	}
	if v, src := describe(t, rc, "ac", "retention.bytes"); v != "2048" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.bytes after the set: %s (source %d)", v, src)
	}
	if c := incrementalAlter(t, rc, "ac", false, op("retention.ms", kmsg.IncrementalAlterConfigOpDelete, nil)); c != 0 {
		t.Fatalf("delete: %d", c)
	}
	if v, src := describe(t, rc, "ac", "retention.ms"); v != "604800000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms after the delete: %s (source %d)", v, src)
	}
	if c := incrementalAlter(t, rc, "ac", true, op("retention.ms", kmsg.IncrementalAlterConfigOpSet, s("77"))); c != 0 {
		t.Fatalf("validate only: %d", c)
	}
	if v, _ := describe(t, rc, "ac", "retention.ms"); v != "604800000" {
		t.Fatalf("validate only changed retention.ms to %s", v)
	}
	// The running logs take a change at once.
	if c := incrementalAlter(t, rc, "ac", false, op("max.message.bytes", kmsg.IncrementalAlterConfigOpSet, s("100"))); c != 0 {
		t.Fatalf("lower max.message.bytes: %d", c)
	}
	big := roundTrip[*kmsg.ProduceResponse](rc, produceReq("ac", 1, -1, records(t, 1, -1, 0, 0, false, 200)))
	if c := big.Topics[0].Partitions[0].ErrorCode; c != errMessageTooLarge {
		t.Fatalf("a batch over the new max.message.bytes: %d", c)
	}
	// The legacy AlterConfigs replaces every config.
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 2
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "ac"
	rc1 := kmsg.NewAlterConfigsRequestResourceConfig()
	rc1.Name, rc1.Value = "segment.ms", s("60000")
	rr.Configs = append(rr.Configs, rc1)
	req.Resources = append(req.Resources, rr)
	if c := roundTrip[*kmsg.AlterConfigsResponse](rc, req).Resources[0].ErrorCode; c != 0 {
		t.Fatalf("legacy alter: %d", c)
	}
	if _, src := describe(t, rc, "ac", "retention.bytes"); src != kmsg.ConfigSourceDefaultConfig {
		t.Fatal("the legacy alter kept retention.bytes")
	}
	ts.close(t)
	ts = startTest(t, Config{Dir: dir})
	rc = dial(t, ts.addr)
	if v, src := describe(t, rc, "ac", "segment.ms"); v != "60000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("segment.ms after a restart: %s (source %d)", v, src)
	}
}
