package wirediff

import (
	"fmt"
	"sort"
	"strings"
)

// Rule is one normalisation applied to every response before the two
// answers are compared: a difference the two brokers cannot avoid (they
// are different processes with their own ids and clocks) or one that
// server/doc.go lists as allowed. Each has a name the test's failure
// messages and the documentation use.
type Rule struct {
	Name, Why string
	apply     func(n *normaliser, path []string, o *Obj)
}

// Rules are the normalisations, in the order they run on each object.
var Rules = []Rule{
	{"throttle", "no quotas: throttle times are not compared", func(_ *normaliser, _ []string, o *Obj) {
		o.Delete("ThrottleMillis")
	}},
	{"error-message", "error messages are free text; the codes are compared", func(_ *normaliser, _ []string, o *Obj) {
		o.Delete("ErrorMessage")
	}},
	{"cluster-id", "each cluster has its own id", func(_ *normaliser, _ []string, o *Obj) {
		if v, ok := o.Get("ClusterID"); ok && v != nil {
			o.Set("ClusterID", "<cluster>")
		}
	}},
	{"node", "node ids, hosts and ports of the two brokers differ", func(n *normaliser, path []string, o *Obj) {
		for _, k := range []string{"NodeID", "ControllerID", "Leader", "LeaderID", "CoordinatorID", "BrokerID"} {
			if v, ok := o.Vals[k].(int64); ok && v == int64(n.env.Target.NodeID) && v >= 0 {
				o.Set(k, "<node>")
			}
		}
		for _, k := range []string{"Replicas", "ISR", "OfflineReplicas", "EligibleLeaderReplicas", "LastKnownELR"} {
			if l, ok := o.Vals[k].([]any); ok {
				for i, v := range l {
					if v == int64(n.env.Target.NodeID) {
						l[i] = "<node>"
					}
				}
			}
		}
		o.Delete("Host")
		o.Delete("Port")
	}},
	{"topic-id", "topic ids are random: compared as the topic they name", func(n *normaliser, _ []string, o *Obj) {
		if v, ok := o.Vals["TopicID"].(string); ok {
			o.Set("TopicID", n.env.topicOfID(v))
		}
	}},
	{"producer-id", "producer ids are handed out by each broker: compared as the n-th distinct id of the script", func(n *normaliser, _ []string, o *Obj) {
		if v, ok := o.Vals["ProducerID"].(int64); ok && v >= 0 {
			o.Set("ProducerID", n.env.pidName(v))
		}
	}},
	{"member-id", "group member ids hold a random UUID: compared as the n-th distinct id of the script", func(n *normaliser, _ []string, o *Obj) {
		for _, k := range []string{"MemberID", "LeaderID"} {
			if v, ok := o.Vals[k].(string); ok && v != "" {
				o.Set(k, n.env.memberName(v))
			}
		}
	}},
	{"broker-time", "timestamps the broker takes from its clock (LogAppendTime, transaction markers, transaction start times) are compared as set or not", func(n *normaliser, path []string, o *Obj) {
		stamp := func(k string) {
			if v, ok := o.Vals[k].(int64); ok && v >= 0 {
				o.Set(k, "<broker time>")
			}
		}
		if c, _ := o.Vals["Control"].(bool); c {
			stamp("BaseTimestamp")
			stamp("MaxTimestamp")
		}
		if c, _ := o.Vals["LogAppendTime"].(bool); c {
			stamp("BaseTimestamp")
			stamp("MaxTimestamp")
		}
		if len(path) == 0 || path[len(path)-1] != "Records" {
			// A produce response's LogAppendTime field (not the
			// batch attribute above, a bool).
			stamp("LogAppendTime")
		}
		stamp("StartTimestamp")
		stamp("TransactionStartTimeMs")
	}},
	{"configs", "partlog implements a subset of Kafka's topic configs (server.TopicConfigNames): config lists are compared on those", func(n *normaliser, _ []string, o *Obj) {
		l, ok := o.Vals["Configs"].([]any)
		if !ok || ImplementedConfigs == nil {
			return
		}
		keep := []any{}
		for _, c := range l {
			if co, ok := c.(*Obj); ok {
				if name, ok := co.Vals["Name"].(string); ok && !ImplementedConfigs[name] {
					continue
				}
			}
			keep = append(keep, c)
		}
		o.Set("Configs", keep)
	}},
	{"config-source", "partlog keeps no broker configs: a config not set on the topic is its default (DEFAULT_CONFIG), where Kafka names the broker layer it came from (static, dynamic broker, dynamic cluster default)", func(_ *normaliser, path []string, o *Obj) {
		if src, ok := o.Vals["Source"].(int64); ok && src >= 2 && src <= 5 {
			if _, named := o.Vals["Name"]; named {
				o.Set("Source", "<default>")
			}
		}
	}},
	{"log-dir", "the log directories are different paths on different disks: compared as present", func(_ *normaliser, _ []string, o *Obj) {
		if _, ok := o.Vals["Dir"].(string); ok {
			o.Set("Dir", "<dir>")
			for _, k := range []string{"TotalBytes", "UsableBytes"} {
				if v, ok := o.Vals[k].(int64); ok && v >= 0 {
					o.Set(k, "<bytes>")
				}
			}
		}
	}},
	{"internal-topics", "allowed (server/doc.go): partlog keeps group offsets and transaction state in files of its own, not in Kafka's internal topics (__consumer_offsets, __transaction_state), so they are not listed", func(_ *normaliser, _ []string, o *Obj) {
		l, ok := o.Vals["Topics"].([]any)
		if !ok {
			return
		}
		keep := []any{}
		for _, el := range l {
			if eo, ok := el.(*Obj); ok {
				if name, ok := eo.Vals["Topic"].(string); ok && strings.HasPrefix(name, "__") {
					continue
				}
			}
			keep = append(keep, el)
		}
		o.Set("Topics", keep)
	}},
	{"partial-batch", "allowed (server/doc.go): Kafka may end a fetched partition with the first bytes of a batch cut at the max bytes; partlog sends whole batches only", func(_ *normaliser, _ []string, o *Obj) {
		l, ok := o.Vals["RecordBatches"].([]any)
		if !ok || len(l) == 0 {
			return
		}
		if last, ok := l[len(l)-1].(*Obj); ok {
			if _, partial := last.Vals["PartialBatchBytes"]; partial {
				o.Set("RecordBatches", l[:len(l)-1])
			}
		}
	}},
	{"order", "the order of topics, partitions, groups and configs in a response is not specified: sorted", func(_ *normaliser, _ []string, o *Obj) {
		for _, k := range o.Keys {
			if l, ok := o.Vals[k].([]any); ok {
				sortByKey(l)
			}
		}
	}},
}

// sortKeys are the fields an element of a list is sorted by.
var sortKeys = []string{"Topic", "Name", "Group", "TransactionalID", "ApiKey", "Key", "ResourceName", "Partition", "MemberID"}

func sortByKey(l []any) {
	key := func(v any) (string, bool) {
		o, ok := v.(*Obj)
		if !ok {
			return "", false
		}
		var parts []string
		for _, k := range sortKeys {
			if x, ok := o.Vals[k]; ok {
				switch x := x.(type) {
				case string:
					parts = append(parts, x)
				case int64:
					parts = append(parts, fmt.Sprintf("%020d", x+1<<40))
				}
			}
		}
		return strings.Join(parts, "\x00"), len(parts) > 0
	}
	for _, v := range l {
		if _, ok := key(v); !ok {
			return
		}
	}
	sort.SliceStable(l, func(i, j int) bool {
		a, _ := key(l[i])
		b, _ := key(l[j])
		return a < b
	})
}

// ImplementedConfigs are the topic configs the "configs" rule keeps.
var ImplementedConfigs map[string]bool

type normaliser struct {
	env  *Env
	skip map[string]bool
}

// Normalise applies Rules (but those named in skip) to a tree, in place,
// and returns it.
func (e *Env) Normalise(v any, skip ...string) any {
	n := &normaliser{env: e, skip: map[string]bool{}}
	for _, s := range skip {
		n.skip[s] = true
	}
	n.walk(nil, v)
	return v
}

func (n *normaliser) walk(path []string, v any) {
	switch x := v.(type) {
	case *Obj:
		for _, r := range Rules {
			if !n.skip[r.Name] {
				r.apply(n, path, x)
			}
		}
		for _, k := range x.Keys {
			n.walk(append(path, k), x.Vals[k])
		}
	case []any:
		for _, e := range x {
			n.walk(path, e)
		}
	}
}
