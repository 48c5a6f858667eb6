package wirediff

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceV and fetchV are the versions the scripts speak by default:
// the newest both brokers implement without topic ids.
const (
	produceV = 9
	fetchV   = 12
	listV    = 7
)

// create creates a topic and waits until the broker serves it (Kafka's
// metadata reaches its brokers moments after CreateTopics answers).
func create(name string, partitions int32, configs map[string]string) []Step {
	lp := make([]LP, partitions)
	for i := range lp {
		lp[i] = LP{Topic: name, Partition: int32(i), Timestamp: -1}
	}
	return []Step{
		{Name: "create " + name, Req: CreateTopic(7, name, partitions, configs)},
		{Name: "metadata of " + name, Req: Metadata(12, false, name), Until: topicsExist},
		// Every partition has its leader (Kafka's brokers take the
		// leadership moments after the metadata shows it).
		{Name: "partitions of " + name + " led", Req: ListOffsets{Version: listV, Parts: lp}.Req, Until: noErrors},
	}
}

// seq flattens steps and lists of steps into a script's steps.
func seq(parts ...any) []Step {
	var out []Step
	for _, p := range parts {
		switch x := p.(type) {
		case Step:
			out = append(out, x)
		case []Step:
			out = append(out, x...)
		default:
			panic("wirediff: seq takes Step and []Step")
		}
	}
	return out
}

func produce(name, topic string, p int32, bs ...Batch) Step {
	return Step{Name: name, Req: Produce{Version: produceV, Acks: -1, Parts: []PP{{Topic: topic, Partition: p, Batches: bs}}}.Req}
}

func fetchAll(name, topic string, p int32, isolation int8) Step {
	return Step{Name: name, Req: Fetch{Version: fetchV, Isolation: isolation, Parts: []FP{{Topic: topic, Partition: p}}}.Req}
}

func list(name string, version int16, isolation int8, topic string, p int32, ts int64) Step {
	return Step{Name: name, Req: ListOffsets{Version: version, Isolation: isolation, Parts: []LP{{Topic: topic, Partition: p, Timestamp: ts}}}.Req}
}

// BasicScripts are topic, produce, fetch and list-offsets basics.
func BasicScripts() []*Script {
	return []*Script{
		{Name: "metadata", Steps: seq(
			create("md-a", 3, nil),
			Step{Name: "metadata v12 of md-a", Req: Metadata(12, false, "md-a")},
			Step{Name: "metadata v1 of md-a", Req: Metadata(1, false, "md-a")},
			Step{Name: "metadata of an unknown topic, no auto-create", Req: Metadata(12, false, "md-unknown")},
			Step{Name: "metadata of an invalid name", Req: Metadata(12, false, "md bad/name")},
			// Kafka creates the topic in the background and answers
			// UNKNOWN_TOPIC_OR_PARTITION until it exists; partlog creates
			// it before answering (server/doc.go, allowed differences).
			Step{Name: "metadata auto-creates", Req: Metadata(12, true, "md-auto"), Until: topicsExist},
			Step{Name: "metadata of md-auto", Req: Metadata(12, false, "md-auto")},
			Step{Name: "create md-a again", Req: CreateTopic(7, "md-a", 1, nil)},
			Step{Name: "create with 0 partitions", Req: CreateTopic(7, "md-zero", 0, nil)},
			Step{Name: "create with a bad config", Req: CreateTopic(7, "md-badcfg", 1, map[string]string{"retention.ms": "x"})},
			Step{Name: "create with an unknown config", Req: CreateTopic(7, "md-unknowncfg", 1, map[string]string{"no.such.config": "1"})},
		)},
		{Name: "produce-fetch", Steps: seq(
			create("pf", 1, nil),
			produce("plain batch of 3", "pf", 0, Batch{N: 3}),
			produce("plain batch of 1", "pf", 0, Batch{N: 1}),
			fetchAll("fetch from 0", "pf", 0, 0),
			Step{Name: "fetch from 3", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "pf", Partition: 0, Offset: 3}}}.Req},
			Step{Name: "fetch past the end", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "pf", Partition: 0, Offset: 5}}}.Req},
			Step{Name: "fetch at the end", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "pf", Partition: 0, Offset: 4}}}.Req},
			Step{Name: "fetch an unknown partition", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "pf", Partition: 7}}}.Req},
			list("earliest", listV, 0, "pf", 0, -2),
			list("latest", listV, 0, "pf", 0, -1),
			list("max timestamp", listV, 0, "pf", 0, -3),
			Step{Name: "produce to an unknown partition", Req: Produce{Version: produceV, Acks: -1, Parts: []PP{{Topic: "pf", Partition: 9, Batches: []Batch{{N: 1}}}}}.Req},
			Step{Name: "produce acks=1", Req: Produce{Version: produceV, Acks: 1, Parts: []PP{{Topic: "pf", Partition: 0, Batches: []Batch{{N: 2}}}}}.Req},
			Step{Name: "produce acks=0", Req: Produce{Version: produceV, Acks: 0, Parts: []PP{{Topic: "pf", Partition: 0, Batches: []Batch{{N: 2}}}}}.Req},
			Step{Name: "produce acks=2 (invalid)", Req: Produce{Version: produceV, Acks: 2, Parts: []PP{{Topic: "pf", Partition: 0, Batches: []Batch{{N: 2}}}}}.Req},
			list("latest after acks=0", listV, 0, "pf", 0, -1),
		)},
	}
}

// noErrors holds when an answer carries no error code.
func noErrors(_ *Env, r kmsg.Response) bool {
	codes := ErrorCodes(r)
	delete(codes, 0)
	return len(codes) == 0
}

// topicsExist holds when a metadata answer names every topic without
// an error.
func topicsExist(_ *Env, r kmsg.Response) bool {
	for _, t := range r.(*kmsg.MetadataResponse).Topics {
		if t.ErrorCode != 0 {
			return false
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// Warmup makes a broker ready for every script: Kafka creates its
// internal topics (__transaction_state, __consumer_offsets) when a
// coordinator is first looked up, and answers NOT_COORDINATOR until they
// are loaded. Its answers are not compared.
func Warmup() *Script {
	find := func(typ int8) func(*Env) kmsg.Request {
		return func(*Env) kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.Version = 4
			r.CoordinatorType = typ
			r.CoordinatorKeys = []string{"warmup"}
			return r
		}
	}
	return &Script{Name: "warmup", Steps: []Step{
		{Name: "transaction coordinator", Req: find(1), Until: noErrors, RetryFor: 60e9, NoCompare: true},
		{Name: "group coordinator", Req: find(0), Until: noErrors, RetryFor: 60e9, NoCompare: true},
		{Name: "transactions work", Req: InitPID{Version: initV, TxnID: Str("warmup")}.Req, Until: noErrors, RetryFor: 60e9, NoCompare: true},
	}}
}
