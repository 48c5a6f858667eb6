package server

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicConfig is one topic config (Kafka's name) that partlog serve
// implements: how a value sets a log's Options, and how the options a log
// runs with (defaults filled in) read back as Kafka would print the value.
// CreateTopics, the partitions' options at Open and DescribeConfigs all go
// through this one table.
type topicConfig struct {
	name string
	typ  kmsg.ConfigType
	set  func(o *partlog.Options, v string) error
	get  func(o partlog.Options) string
}

// longConfig is a numeric config kept in one int64 field. show maps the
// field to Kafka's value (for the fields whose "unbounded" partlog spells
// differently); nil prints the field.
func longConfig(name string, field func(o *partlog.Options) *int64, show func(v int64) int64) topicConfig {
	typ := kmsg.ConfigTypeLong
	return topicConfig{name: name, typ: typ,
		set: func(o *partlog.Options, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("config %s: %q is not a number", name, v)
			}
			*field(o) = n
			return nil
		},
		get: func(o partlog.Options) string {
			n := *field(&o)
			if show != nil {
				n = show(n)
			}
			return strconv.FormatInt(n, 10)
		}}
}

// unboundedAsMax: partlog's 0 or negative "no bound" is Kafka's
// Long.MAX_VALUE; noLimit: partlog's 0 or negative is Kafka's -1.
func unboundedAsMax(v int64) int64 { return cond(v <= 0, math.MaxInt64, v) }
func noLimit(v int64) int64        { return cond(v <= 0, -1, v) }

func cond(c bool, a, b int64) int64 {
	if c {
		return a
	}
	return b
}

var topicConfigs = []topicConfig{
	{name: "cleanup.policy", typ: kmsg.ConfigTypeList,
		set: func(_ *partlog.Options, v string) error {
			if v != "delete" {
				return fmt.Errorf("config cleanup.policy=%s: only delete is supported (no compaction)", v)
			}
			return nil
		},
		get: func(partlog.Options) string { return "delete" }},
	{name: "message.timestamp.type", typ: kmsg.ConfigTypeString,
		set: func(o *partlog.Options, v string) error {
			switch v {
			case "CreateTime":
				o.MessageTimestampType = partlog.CreateTime
			case "LogAppendTime":
				o.MessageTimestampType = partlog.LogAppendTime
			default:
				return fmt.Errorf("config message.timestamp.type: %q", v)
			}
			return nil
		},
		get: func(o partlog.Options) string {
			if o.MessageTimestampType == partlog.LogAppendTime {
				return "LogAppendTime"
			}
			return "CreateTime"
		}},
	longConfig("segment.bytes", func(o *partlog.Options) *int64 { return &o.SegmentBytes }, nil),
	longConfig("segment.ms", func(o *partlog.Options) *int64 { return &o.SegmentMs }, unboundedAsMax),
	longConfig("segment.jitter.ms", func(o *partlog.Options) *int64 { return &o.SegmentJitterMs }, nil),
	longConfig("segment.index.bytes", func(o *partlog.Options) *int64 { return &o.MaxIndexBytes }, nil),
	// Effective options hold Kafka's value (0: every append) here.
	longConfig("index.interval.bytes", func(o *partlog.Options) *int64 { return &o.IndexIntervalBytes }, nil),
	longConfig("retention.ms", func(o *partlog.Options) *int64 { return &o.RetentionMs }, func(v int64) int64 { return cond(v < 0, -1, v) }),
	longConfig("retention.bytes", func(o *partlog.Options) *int64 { return &o.RetentionBytes }, noLimit),
	longConfig("max.message.bytes", func(o *partlog.Options) *int64 { return &o.MaxBatchBytes }, nil),
	longConfig("file.delete.delay.ms", func(o *partlog.Options) *int64 { return &o.FileDeleteDelayMs }, func(v int64) int64 { return max(v, 0) }),
	longConfig("message.timestamp.before.max.ms", func(o *partlog.Options) *int64 { return &o.MessageTimestampBeforeMaxMs }, unboundedAsMax),
	longConfig("message.timestamp.after.max.ms", func(o *partlog.Options) *int64 { return &o.MessageTimestampAfterMaxMs }, unboundedAsMax),
}

// TopicConfigNames returns the names of the topic configs the server
// implements (CreateTopics, AlterConfigs, DescribeConfigs), in the order
// DescribeConfigs lists them.
func TopicConfigNames() []string {
	names := make([]string, len(topicConfigs))
	for i, c := range topicConfigs {
		names[i] = c.name
	}
	return names
}

func lookupTopicConfig(name string) (topicConfig, bool) {
	for _, c := range topicConfigs {
		if c.name == name {
			return c, true
		}
	}
	return topicConfig{}, false
}

// topicOptions applies a topic's configs (Kafka's names) to the
// template. Only the configs in topicConfigs are accepted.
func topicOptions(tmpl partlog.Options, configs map[string]string) (partlog.Options, error) {
	o := tmpl
	names := make([]string, 0, len(configs))
	for k := range configs {
		names = append(names, k)
	}
	sort.Strings(names) // the same error for the same request
	for _, k := range names {
		c, ok := lookupTopicConfig(k)
		if !ok {
			return o, fmt.Errorf("config %s is not supported by partlog serve", k)
		}
		if err := c.set(&o, configs[k]); err != nil {
			return o, err
		}
	}
	return o, nil
}

// configEntry is one topic config as DescribeConfigs and CreateTopics
// answer it.
type configEntry struct {
	name, value string
	typ         kmsg.ConfigType
	source      kmsg.ConfigSource
}

// configEntries lists every config of topicConfigs for a topic whose
// options are o (its configs applied) and whose own configs are set: a
// set config with its value as set (DYNAMIC_TOPIC_CONFIG), any other
// with the value its logs run with (DEFAULT_CONFIG: the server's
// defaults).
func configEntries(o partlog.Options, set map[string]string) []configEntry {
	eff := o.Effective()
	out := make([]configEntry, 0, len(topicConfigs))
	for _, c := range topicConfigs {
		e := configEntry{name: c.name, typ: c.typ, value: c.get(eff), source: kmsg.ConfigSourceDefaultConfig}
		if v, ok := set[c.name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceDynamicTopicConfig
		}
		out = append(out, e)
	}
	return out
}

// describeConfigs answers DescribeConfigs for topics: every config of
// topicConfigs (or the ones named), with the topic's own value
// (DYNAMIC_TOPIC_CONFIG) or the value its logs run with (DEFAULT_CONFIG:
// the server's defaults). Broker resources are refused: this server has
// no broker configs to show.
func (s *Server) describeConfigs(req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.Version = req.Version
	tmpl := partlog.Options{}
	if s.cfg.Log != nil {
		tmpl = *s.cfg.Log
	}
	for _, rr := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		fail := func(code int16, msg string) {
			r.ErrorCode = code
			r.ErrorMessage = &msg
		}
		switch {
		case rr.ResourceType != kmsg.ConfigResourceTypeTopic:
			fail(errInvalidRequest, "partlog serve describes topic configs only")
		case s.topicByName(rr.ResourceName) == nil:
			fail(errUnknownTopicOrPartition, "unknown topic")
		default:
			set := s.meta.topicConfigs(rr.ResourceName)
			o, err := topicOptions(tmpl, set)
			if err != nil {
				fail(errInvalidConfig, err.Error())
				break
			}
			for _, e := range configEntries(o, set) {
				if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.name) {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name = e.name
				v := e.value
				rc.Value = &v
				rc.ConfigType = e.typ
				rc.Source, rc.IsDefault = e.source, e.source == kmsg.ConfigSourceDefaultConfig
				r.Configs = append(r.Configs, rc)
			}
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}
