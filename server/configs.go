package server

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

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
		set: func(o *partlog.Options, v string) error {
			p, err := partlog.ParseCleanupPolicy(v)
			if err != nil {
				return fmt.Errorf("config cleanup.policy=%s: delete, compact or compact,delete", v)
			}
			o.CleanupPolicy = p
			return nil
		},
		get: func(o partlog.Options) string { return o.CleanupPolicy.String() }},
	{name: "min.cleanable.dirty.ratio", typ: kmsg.ConfigTypeDouble,
		set: func(o *partlog.Options, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1 {
				return fmt.Errorf("config min.cleanable.dirty.ratio: %q is not a number in [0, 1]", v)
			}
			o.MinCleanableDirtyRatio = f
			if f == 0 {
				o.MinCleanableDirtyRatio = partlog.CleanAnyDirt
			}
			return nil
		},
		get: func(o partlog.Options) string { return javaDouble(o.MinCleanableDirtyRatio) }},
	longConfig("min.compaction.lag.ms", func(o *partlog.Options) *int64 { return &o.MinCompactionLagMs }, nil),
	atLeast(1, longConfig("max.compaction.lag.ms", func(o *partlog.Options) *int64 { return &o.MaxCompactionLagMs }, unboundedAsMax),
		func(o *partlog.Options) *int64 { return &o.MaxCompactionLagMs }),
	// Kafka's 0 is partlog's negative (0 is the default here).
	zeroAsNegative(longConfig("delete.retention.ms", func(o *partlog.Options) *int64 { return &o.DeleteRetentionMs }, nil),
		func(o *partlog.Options) *int64 { return &o.DeleteRetentionMs }),
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

// zeroAsNegative makes a long config store Kafka's 0 as -1, for the
// fields whose zero value means partlog's default.
func zeroAsNegative(c topicConfig, field func(o *partlog.Options) *int64) topicConfig {
	set := c.set
	c.set = func(o *partlog.Options, v string) error {
		if err := set(o, v); err != nil {
			return err
		}
		if *field(o) == 0 {
			*field(o) = -1
		}
		return nil
	}
	return c
}

// atLeast refuses a long config below lo (Kafka's validator), before
// partlog's zero could read it as the default.
func atLeast(lo int64, c topicConfig, field func(o *partlog.Options) *int64) topicConfig {
	set := c.set
	c.set = func(o *partlog.Options, v string) error {
		if err := set(o, v); err != nil {
			return err
		}
		if *field(o) < lo {
			return fmt.Errorf("config %s: %s is below %d", c.name, v, lo)
		}
		return nil
	}
	return c
}

// javaDouble formats v as Java's Double.toString does for the values a
// ratio takes ("0.5", "0.0", "1.0").
func javaDouble(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
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
	return o, o.Validate()
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
			eff := o.Effective()
			for _, c := range topicConfigs {
				if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, c.name) {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name = c.name
				v := c.get(eff)
				rc.Value = &v
				rc.ConfigType = c.typ
				if _, ok := set[c.name]; ok {
					rc.Source = kmsg.ConfigSourceDynamicTopicConfig
				} else {
					rc.Source, rc.IsDefault = kmsg.ConfigSourceDefaultConfig, true
				}
				r.Configs = append(r.Configs, rc)
			}
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}
