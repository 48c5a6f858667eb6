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
// implements: how a value is checked (Kafka's type and validator, the
// value trimmed as Kafka's ConfigDef trims it), how it sets a log's
// Options, and how the options a log runs with (defaults filled in) read
// back as Kafka would print the value. CreateTopics, AlterConfigs, the
// partitions' options at Open and DescribeConfigs all go through this
// one table.
type topicConfig struct {
	name string
	typ  kmsg.ConfigType
	// check returns the value as Kafka parses it (trimmed), or why it
	// is invalid; set takes that.
	check func(v string) (string, error)
	// set applies a checked value.
	set func(o *partlog.Options, v string)
	get func(o partlog.Options) string
}

// parseLong parses a LONG or INT config value as Kafka does (trimmed,
// decimal, within the type and at least min).
func parseLong(name, v string, bits int, min int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
	if err != nil {
		return 0, fmt.Errorf("invalid value %s for configuration %s: not a number of type %s", v, name, map[int]string{32: "int", 64: "long"}[bits])
	}
	if n < min {
		return 0, fmt.Errorf("invalid value %d for configuration %s: value must be at least %d", n, name, min)
	}
	return n, nil
}

// numberConfig is a LONG (bits 64) or INT (bits 32) config with Kafka's
// lower bound, kept in one int64 field. Kafka's 0 is partlog.Zero where
// the field's zero means the default (zeroIsZero); show maps the field to
// Kafka's value for the fields whose "unbounded" partlog spells
// differently (nil prints the field).
func numberConfig(name string, bits int, min int64, field func(o *partlog.Options) *int64, zeroIsZero bool, show func(v int64) int64) topicConfig {
	typ := kmsg.ConfigTypeLong
	if bits == 32 {
		typ = kmsg.ConfigTypeInt
	}
	return topicConfig{name: name, typ: typ,
		check: func(v string) (string, error) {
			n, err := parseLong(name, v, bits, min)
			return strconv.FormatInt(n, 10), err
		},
		set: func(o *partlog.Options, v string) {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n == 0 && zeroIsZero {
				n = partlog.Zero
			}
			*field(o) = n
		},
		get: func(o partlog.Options) string {
			n := *field(&o)
			if n == partlog.Zero {
				n = 0
			} else if show != nil {
				n = show(n)
			}
			return strconv.FormatInt(n, 10)
		}}
}

// enumConfig is a STRING config whose value is one of values (as Kafka's
// ValidString, case-sensitive); set is nil when the value changes
// nothing of the log's options.
func enumConfig(name string, def string, values []string, set func(o *partlog.Options, v string), get func(o partlog.Options) string) topicConfig {
	if get == nil {
		get = func(partlog.Options) string { return def }
	}
	if set == nil {
		set = func(*partlog.Options, string) {}
	}
	return topicConfig{name: name, typ: kmsg.ConfigTypeString, set: set, get: get,
		check: func(v string) (string, error) {
			v = strings.TrimSpace(v)
			if !slices.Contains(values, v) {
				return "", fmt.Errorf("invalid value %s for configuration %s: string must be one of: %s", v, name, strings.Join(values, ", "))
			}
			return v, nil
		}}
}

// boolConfig is a BOOLEAN config that changes nothing of a single
// node's logs (its value is kept and described).
func boolConfig(name string, def bool) topicConfig {
	return topicConfig{name: name, typ: kmsg.ConfigTypeBoolean,
		check: func(v string) (string, error) {
			switch t := strings.ToLower(strings.TrimSpace(v)); t {
			case "true", "false":
				return t, nil
			}
			return "", fmt.Errorf("invalid value %s for configuration %s: expected value to be either true or false", v, name)
		},
		set: func(*partlog.Options, string) {},
		get: func(partlog.Options) string { return strconv.FormatBool(def) }}
}

// kafkaTimestampAfterMaxMs is Kafka 4.4's default
// message.timestamp.after.max.ms: a record may be at most an hour ahead
// of the broker's clock.
const kafkaTimestampAfterMaxMs = 3_600_000

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

// topicConfigs are the topic configs partlog serve implements, with
// Kafka 4.4's types, bounds and defaults (LogConfig). Every other config
// name is refused (INVALID_CONFIG) and not listed.
var topicConfigs = []topicConfig{
	{name: "cleanup.policy", typ: kmsg.ConfigTypeList,
		check: func(v string) (string, error) {
			p, err := partlog.ParseCleanupPolicy(strings.TrimSpace(v))
			if err != nil {
				return "", fmt.Errorf("invalid value %s for configuration cleanup.policy: String must be one of: compact, delete", v)
			}
			return p.String(), nil
		},
		set: func(o *partlog.Options, v string) { o.CleanupPolicy, _ = partlog.ParseCleanupPolicy(v) },
		get: func(o partlog.Options) string { return o.CleanupPolicy.String() }},
	// Kafka's BrokerCompressionType names, in its order: a leader
	// recompresses client batches to any but producer.
	enumConfig("compression.type", "producer", []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
		func(o *partlog.Options, v string) { o.CompressionType, _ = partlog.ParseCompressionType(v) },
		func(o partlog.Options) string { return o.CompressionType.String() }),
	// Kafka's 0 is partlog's negative (0 is the default here).
	numberConfig("delete.retention.ms", 64, 0, func(o *partlog.Options) *int64 { return &o.DeleteRetentionMs }, false, nil).zeroAsNegative(func(o *partlog.Options) *int64 { return &o.DeleteRetentionMs }),
	numberConfig("file.delete.delay.ms", 64, 0, func(o *partlog.Options) *int64 { return &o.FileDeleteDelayMs }, true, func(v int64) int64 { return max(v, 0) }),
	// Effective options hold Kafka's value (0: every append) here.
	numberConfig("index.interval.bytes", 32, 0, func(o *partlog.Options) *int64 { return &o.IndexIntervalBytes }, false, nil),
	numberConfig("max.compaction.lag.ms", 64, 1, func(o *partlog.Options) *int64 { return &o.MaxCompactionLagMs }, false, unboundedAsMax),
	numberConfig("max.message.bytes", 32, 0, func(o *partlog.Options) *int64 { return &o.MaxBatchBytes }, true, nil),
	numberConfig("message.timestamp.after.max.ms", 64, 0, func(o *partlog.Options) *int64 { return &o.MessageTimestampAfterMaxMs }, true, unboundedAsMax),
	numberConfig("message.timestamp.before.max.ms", 64, 0, func(o *partlog.Options) *int64 { return &o.MessageTimestampBeforeMaxMs }, true, unboundedAsMax),
	enumConfig("message.timestamp.type", "CreateTime", []string{"CreateTime", "LogAppendTime"},
		func(o *partlog.Options, v string) {
			o.MessageTimestampType = partlog.CreateTime
			if v == "LogAppendTime" {
				o.MessageTimestampType = partlog.LogAppendTime
			}
		},
		func(o partlog.Options) string {
			if o.MessageTimestampType == partlog.LogAppendTime {
				return "LogAppendTime"
			}
			return "CreateTime"
		}),
	{name: "min.cleanable.dirty.ratio", typ: kmsg.ConfigTypeDouble,
		check: func(v string) (string, error) {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f < 0 || f > 1 {
				return "", fmt.Errorf("invalid value %s for configuration min.cleanable.dirty.ratio: value must be between 0 and 1", v)
			}
			return javaDouble(f), nil
		},
		set: func(o *partlog.Options, v string) {
			f, _ := strconv.ParseFloat(v, 64)
			o.MinCleanableDirtyRatio = f
			if f == 0 {
				o.MinCleanableDirtyRatio = partlog.CleanAnyDirt
			}
		},
		get: func(o partlog.Options) string { return javaDouble(max(o.MinCleanableDirtyRatio, 0)) }},
	numberConfig("min.compaction.lag.ms", 64, 0, func(o *partlog.Options) *int64 { return &o.MinCompactionLagMs }, false, nil),
	// One replica: Kafka takes min(min.insync.replicas, the replication
	// factor), so the value is kept and described but refuses nothing.
	numberConfig("min.insync.replicas", 32, 1, func(o *partlog.Options) *int64 { return new(int64) }, false, func(int64) int64 { return 1 }),
	boolConfig("preallocate", false),
	numberConfig("retention.bytes", 64, math.MinInt64, func(o *partlog.Options) *int64 { return &o.RetentionBytes }, true, noLimit),
	numberConfig("retention.ms", 64, -1, func(o *partlog.Options) *int64 { return &o.RetentionMs }, true, func(v int64) int64 { return cond(v < 0, -1, v) }),
	numberConfig("segment.bytes", 32, 1<<20, func(o *partlog.Options) *int64 { return &o.SegmentBytes }, false, nil),
	numberConfig("segment.index.bytes", 32, 4, func(o *partlog.Options) *int64 { return &o.MaxIndexBytes }, false, nil),
	numberConfig("segment.jitter.ms", 64, 0, func(o *partlog.Options) *int64 { return &o.SegmentJitterMs }, false, nil),
	numberConfig("segment.ms", 64, 1, func(o *partlog.Options) *int64 { return &o.SegmentMs }, false, unboundedAsMax),
	boolConfig("unclean.leader.election.enable", false),
}

// zeroAsNegative stores Kafka's 0 as -1, for a field whose partlog
// spells Kafka's 0 negative (its zero is the default), and shows a
// negative value as 0.
func (c topicConfig) zeroAsNegative(field func(o *partlog.Options) *int64) topicConfig {
	set, get := c.set, c.get
	c.set = func(o *partlog.Options, v string) {
		set(o, v)
		if *field(o) == 0 {
			*field(o) = -1
		}
	}
	c.get = func(o partlog.Options) string {
		if *field(&o) < 0 {
			return "0"
		}
		return get(o)
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

// brokerSynonym is, per topic config, the broker config Kafka names as
// its default in DescribeConfigs' synonyms (none for the configs whose
// broker default Kafka does not list as a synonym).
var brokerSynonym = map[string]string{
	"cleanup.policy":                  "log.cleanup.policy",
	"compression.type":                "compression.type",
	"delete.retention.ms":             "log.cleaner.delete.retention.ms",
	"file.delete.delay.ms":            "log.segment.delete.delay.ms",
	"index.interval.bytes":            "log.index.interval.bytes",
	"max.compaction.lag.ms":           "log.cleaner.max.compaction.lag.ms",
	"max.message.bytes":               "message.max.bytes",
	"message.timestamp.after.max.ms":  "log.message.timestamp.after.max.ms",
	"message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
	"message.timestamp.type":          "log.message.timestamp.type",
	"min.cleanable.dirty.ratio":       "log.cleaner.min.cleanable.ratio",
	"min.compaction.lag.ms":           "log.cleaner.min.compaction.lag.ms",
	"min.insync.replicas":             "min.insync.replicas",
	"preallocate":                     "log.preallocate",
	"retention.bytes":                 "log.retention.bytes",
	"segment.bytes":                   "log.segment.bytes",
	"segment.index.bytes":             "log.index.size.max.bytes",
	"unclean.leader.election.enable":  "unclean.leader.election.enable",
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

// checkConfigs checks a topic's configs (Kafka's names) and returns
// them as Kafka keeps them (as given: the value is trimmed only to be
// parsed), or the first invalid one's error (configs in name order, so
// the same request gets the same error).
func checkConfigs(configs map[string]string) (map[string]string, error) {
	names := make([]string, 0, len(configs))
	for k := range configs {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(map[string]string, len(configs))
	for _, k := range names {
		c, ok := lookupTopicConfig(k)
		if !ok {
			return nil, fmt.Errorf("unknown topic config name: %s (or one partlog serve does not implement)", k)
		}
		if _, err := c.check(configs[k]); err != nil {
			return nil, err
		}
		out[k] = configs[k] // kept as given, as Kafka keeps and shows it
	}
	return out, nil
}

// topicOptions applies a topic's configs (Kafka's names) to the
// template. Only the configs in topicConfigs with valid values are
// accepted.
func topicOptions(tmpl partlog.Options, configs map[string]string) (partlog.Options, error) {
	o := tmpl
	checked, err := checkConfigs(configs)
	if err != nil {
		return o, err
	}
	for k, v := range checked {
		c, _ := lookupTopicConfig(k)
		norm, _ := c.check(v)
		c.set(&o, norm)
	}
	return o, o.Validate()
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
// set config with its value (DYNAMIC_TOPIC_CONFIG), any other with the
// value its logs run with (DEFAULT_CONFIG: the server's defaults). A set
// value is shown as given (CreateTopics echoes it) or, parsed, as Kafka
// prints its type (DescribeConfigs: " 100" is 100, a ratio 0 is 0.0).
func configEntries(o partlog.Options, set map[string]string, parsed bool) []configEntry {
	eff := o.Effective()
	out := make([]configEntry, 0, len(topicConfigs))
	for _, c := range topicConfigs {
		e := configEntry{name: c.name, typ: c.typ, value: c.get(eff), source: kmsg.ConfigSourceDefaultConfig}
		if v, ok := set[c.name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceDynamicTopicConfig
			if p, err := c.check(v); err == nil && parsed {
				e.value = p
			}
		}
		out = append(out, e)
	}
	return out
}

// configSynonyms are a config's synonyms as Kafka lists them: the
// topic's own value, then the broker default it falls back to.
func configSynonyms(e configEntry, tmpl partlog.Options) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	if e.source == kmsg.ConfigSourceDynamicTopicConfig {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		v := e.value
		syn.Name, syn.Value, syn.Source = e.name, &v, kmsg.ConfigSourceDynamicTopicConfig
		out = append(out, syn)
	}
	if broker, ok := brokerSynonym[e.name]; ok {
		c, _ := lookupTopicConfig(e.name)
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		v := c.get(tmpl.Effective())
		syn.Name, syn.Value, syn.Source = broker, &v, kmsg.ConfigSourceDefaultConfig
		out = append(out, syn)
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
			for _, e := range configEntries(o, set, true) {
				if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.name) {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name = e.name
				v := e.value
				rc.Value = &v
				rc.ConfigType = e.typ
				rc.Source, rc.IsDefault = e.source, e.source == kmsg.ConfigSourceDefaultConfig
				if req.IncludeSynonyms {
					rc.ConfigSynonyms = configSynonyms(e, tmpl)
				}
				r.Configs = append(r.Configs, rc)
			}
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}
