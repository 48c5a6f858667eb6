package wirediff

import (
	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeTopicConfigs(version int16, topic string, names ...string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.Version = version
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		if names != nil {
			rr.ConfigNames = names
		}
		r.Resources = append(r.Resources, rr)
		return r
	}
}

// alterConfig is one IncrementalAlterConfigs operation: op 0 SET, 1
// DELETE, 2 APPEND, 3 SUBTRACT.
type alterConfig struct {
	name  string
	op    int8
	value *string
}

func incrementalAlter(version int16, topic string, validateOnly bool, ops ...alterConfig) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.Version = version
		r.ValidateOnly = validateOnly
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		for _, o := range ops {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = o.name, kmsg.IncrementalAlterConfigOp(o.op), o.value
			rr.Configs = append(rr.Configs, c)
		}
		r.Resources = append(r.Resources, rr)
		return r
	}
}

func alterConfigs(version int16, topic string, validateOnly bool, configs map[string]string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrAlterConfigsRequest()
		r.Version = version
		r.ValidateOnly = validateOnly
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		for _, k := range sortedKeys(configs) {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			v := configs[k]
			c.Name, c.Value = k, &v
			rr.Configs = append(rr.Configs, c)
		}
		r.Resources = append(r.Resources, rr)
		return r
	}
}

func deleteTopics(version int16, names ...string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.Version = version
		r.TimeoutMillis = 30000
		r.TopicNames = names
		for _, n := range names {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = Str(n)
			r.Topics = append(r.Topics, t)
		}
		return r
	}
}

func createPartitions(version int16, topic string, count int32, validateOnly bool) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.Version = version
		r.TimeoutMillis = 30000
		r.ValidateOnly = validateOnly
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = topic, count
		r.Topics = append(r.Topics, t)
		return r
	}
}

// configIs waits for a DescribeConfigs answer to show a config's value
// (Kafka's brokers learn a config change from the controller moments
// after the alter is answered). value "" waits for the default.
func configIs(name, value string) func(*Env, kmsg.Response) bool {
	return func(_ *Env, r kmsg.Response) bool {
		for _, res := range r.(*kmsg.DescribeConfigsResponse).Resources {
			for _, c := range res.Configs {
				if c.Name != name {
					continue
				}
				if value == "" {
					return c.Source != kmsg.ConfigSourceDynamicTopicConfig
				}
				return c.Value != nil && *c.Value == value
			}
		}
		return false
	}
}

// ConfigScripts are the topic and config APIs: CreateTopics with every
// config's bounds (the zero values among them), DescribeConfigs,
// IncrementalAlterConfigs and AlterConfigs, CreatePartitions and
// DeleteTopics.
func ConfigScripts() []*Script {
	type c struct{ name, value string }
	values := []c{
		{"retention.ms", "0"}, {"retention.ms", "-1"}, {"retention.ms", "-2"},
		{"retention.bytes", "0"}, {"retention.bytes", "-1"}, {"retention.bytes", "-5"},
		{"max.message.bytes", "0"}, {"max.message.bytes", "-1"},
		{"segment.ms", "0"}, {"segment.ms", "1"},
		{"segment.bytes", "14"}, {"segment.bytes", "1048576"},
		{"segment.jitter.ms", "0"}, {"segment.jitter.ms", "-1"},
		{"segment.index.bytes", "3"}, {"segment.index.bytes", "4096"},
		{"index.interval.bytes", "0"}, {"index.interval.bytes", "-1"},
		{"file.delete.delay.ms", "0"}, {"file.delete.delay.ms", "-1"},
		{"message.timestamp.before.max.ms", "0"}, {"message.timestamp.after.max.ms", "0"},
		{"message.timestamp.type", "logappendtime"}, {"message.timestamp.type", "LogAppendTime"},
		{"cleanup.policy", "delete"}, {"cleanup.policy", "bogus"},
		{"compression.type", "gzip"}, {"compression.type", "uncompressed"}, {"compression.type", "producer"}, {"compression.type", "brotli"},
		{"min.insync.replicas", "1"}, {"min.insync.replicas", "0"},
		{"preallocate", "true"}, {"unclean.leader.election.enable", "true"},
		{"retention.ms", "abc"}, {"retention.ms", " 100"},
	}
	var creates []Step
	for i, v := range values {
		name := "cfg-" + itoa(i)
		st := Step{Name: "create with " + v.name + "=" + v.value,
			Req: CreateTopic(7, name, 1, map[string]string{v.name: v.value})}
		creates = append(creates, st)
	}
	str := Str
	return []*Script{
		{Name: "config-create", Steps: creates},
		{Name: "config-min-isr", Steps: seq(
			create("cm", 1, map[string]string{"min.insync.replicas": "2"}),
			pv("acks=-1 above min.insync.replicas", produceV, -1, "cm", Batch{N: 1}),
			pv("acks=1", produceV, 1, "cm", Batch{N: 1}),
			Step{Name: "min.insync.replicas back to 1", Req: incrementalAlter(1, "cm", false, alterConfig{"min.insync.replicas", 0, str("1")})},
			Step{Name: "described after", Req: describeTopicConfigs(4, "cm", "min.insync.replicas"), Until: configIs("min.insync.replicas", "1")},
			pv("acks=-1", produceV, -1, "cm", Batch{N: 1}),
		)},
		{Name: "config-alter", Steps: seq(
			create("ca", 1, map[string]string{"retention.ms": "1000"}),
			Step{Name: "describe all", Req: describeTopicConfigs(4, "ca")},
			Step{Name: "describe two", Req: describeTopicConfigs(4, "ca", "retention.ms", "segment.bytes")},
			Step{Name: "describe v1", Req: describeTopicConfigs(1, "ca", "retention.ms")},
			Step{Name: "describe an unknown topic", Req: describeTopicConfigs(4, "ca-none")},
			Step{Name: "set retention.bytes", Req: incrementalAlter(1, "ca", false, alterConfig{"retention.bytes", 0, str("2048")})},
			Step{Name: "described after the set", Req: describeTopicConfigs(4, "ca", "retention.ms", "retention.bytes"), Until: configIs("retention.bytes", "2048")},
			Step{Name: "delete retention.ms", Req: incrementalAlter(1, "ca", false, alterConfig{"retention.ms", 1, nil})},
			Step{Name: "described after the delete", Req: describeTopicConfigs(4, "ca", "retention.ms", "retention.bytes"), Until: configIs("retention.ms", "")},
			Step{Name: "set an invalid value", Req: incrementalAlter(1, "ca", false, alterConfig{"segment.ms", 0, str("0")})},
			Step{Name: "set an unknown config", Req: incrementalAlter(1, "ca", false, alterConfig{"no.such", 0, str("1")})},
			Step{Name: "append to a list config", Req: incrementalAlter(1, "ca", false, alterConfig{"cleanup.policy", 2, str("delete")})},
			Step{Name: "append to a long config", Req: incrementalAlter(1, "ca", false, alterConfig{"retention.ms", 2, str("5")})},
			Step{Name: "validate only", Req: incrementalAlter(1, "ca", true, alterConfig{"retention.ms", 0, str("77")})},
			Step{Name: "described after validate only", Req: describeTopicConfigs(4, "ca", "retention.ms")},
			Step{Name: "alter an unknown topic", Req: incrementalAlter(1, "ca-none", false, alterConfig{"retention.ms", 0, str("5")})},
			Step{Name: "alter v0", Req: incrementalAlter(0, "ca", false, alterConfig{"segment.ms", 0, str("60000")})},
			Step{Name: "described after the alter v0", Req: describeTopicConfigs(4, "ca", "segment.ms"), Until: configIs("segment.ms", "60000")},
			Step{Name: "legacy alter replaces every config", Req: alterConfigs(2, "ca", false, map[string]string{"max.message.bytes": "5000"})},
			Step{Name: "described after the legacy alter", Req: describeTopicConfigs(4, "ca", "retention.bytes", "segment.ms", "max.message.bytes"), Until: configIs("max.message.bytes", "5000")},
			Step{Name: "legacy alter with an invalid value", Req: alterConfigs(2, "ca", false, map[string]string{"max.message.bytes": "-3"})},
			Step{Name: "lower max.message.bytes", Req: incrementalAlter(1, "ca", false, alterConfig{"max.message.bytes", 0, str("100")})},
			Step{Name: "described after lowering", Req: describeTopicConfigs(4, "ca", "max.message.bytes"), Until: configIs("max.message.bytes", "100")},
			produce("a batch over the new limit", "ca", 0, Batch{Records: []batch.RecordSpec{{Value: make([]byte, 200)}}}),
			Step{Name: "create partitions", Req: createPartitions(3, "ca", 3, false)},
			Step{Name: "create partitions, fewer", Req: createPartitions(3, "ca", 2, false)},
			Step{Name: "create partitions, validate only", Req: createPartitions(3, "ca", 5, true)},
			Step{Name: "create partitions of an unknown topic", Req: createPartitions(3, "ca-none", 2, false)},
			Step{Name: "metadata after create partitions", Req: Metadata(12, false, "ca"), Until: topicsExist},
			Step{Name: "delete topics v6", Req: deleteTopics(6, "ca", "ca-none")},
			Step{Name: "metadata after the delete", Req: Metadata(12, false, "ca"),
				Until: func(_ *Env, r kmsg.Response) bool { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode != 0 }},
			Step{Name: "delete topics v3", Req: deleteTopics(3, "ca")},
		)},
	}
}
