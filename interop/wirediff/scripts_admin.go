package wirediff

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeLogDirs(version int16, topic string, parts ...int32) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDescribeLogDirsRequest()
		r.Version = version
		if topic != "" {
			t := kmsg.NewDescribeLogDirsRequestTopic()
			t.Topic, t.Partitions = topic, parts
			r.Topics = append(r.Topics, t)
		}
		return r
	}
}

func deleteRecords(version int16, topic string, offsets map[int32]int64) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDeleteRecordsRequest()
		r.Version = version
		r.TimeoutMillis = 10000
		t := kmsg.NewDeleteRecordsRequestTopic()
		t.Topic = topic
		for p := int32(0); p < 16; p++ {
			if off, ok := offsets[p]; ok {
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Partition, rp.Offset = p, off
				t.Partitions = append(t.Partitions, rp)
			}
		}
		r.Topics = append(r.Topics, t)
		return r
	}
}

func describeProducers(topic string, parts ...int32) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDescribeProducersRequest()
		t := kmsg.NewDescribeProducersRequestTopic()
		t.Topic, t.Partitions = topic, parts
		r.Topics = append(r.Topics, t)
		return r
	}
}

func describeTransactions(ids ...string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDescribeTransactionsRequest()
		r.TransactionalIDs = ids
		return r
	}
}

func listTransactions(version int16, states []string, durationMs int64, pattern *string, producers ...string) func(*Env) kmsg.Request {
	return func(e *Env) kmsg.Request {
		r := kmsg.NewPtrListTransactionsRequest()
		r.Version = version
		r.StateFilters = states
		r.DurationFilterMillis = durationMs
		r.TransactionalIDPattern = pattern
		for _, p := range producers {
			r.ProducerIDFilters = append(r.ProducerIDFilters, e.Get(p+".pid"))
		}
		return r
	}
}

func describeCluster(version int16) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrDescribeClusterRequest()
		r.Version = version
		return r
	}
}

// AdminScripts are the APIs operators' tools use: DescribeLogDirs,
// DeleteRecords, DescribeProducers, DescribeTransactions,
// ListTransactions and DescribeCluster.
func AdminScripts() []*Script {
	keepTx := KeepPrefixed("TransactionStates", "TransactionalID", "ad-")
	return []*Script{
		{Name: "admin", Steps: seq(
			create("ad", 2, nil),
			produce("records to 0", "ad", 0, Batch{N: 5}),
			produce("more records to 0", "ad", 0, Batch{N: 3}),
			produce("records to 1", "ad", 1, Batch{N: 2}),
			initPID("idempotent producer", nil, "i"),
			produce("idempotent batch", "ad", 1, Batch{Producer: "i", N: 2}),
			initPID("transactional producer", Str("ad-t"), "t"),
			addParts("begin", "ad-t", "t", "ad", 0),
			txnProduce("open transaction", "ad-t", "ad", 0, Batch{Producer: "t", Txn: true, N: 1}),
			Step{Name: "describe log dirs of the topic", Req: describeLogDirs(4, "ad", 0, 1, 7)},
			Step{Name: "describe log dirs v1, unknown topic", Req: describeLogDirs(1, "ad-none", 0)},
			Step{Name: "describe producers", Req: describeProducers("ad", 0, 1, 9)},
			Step{Name: "describe producers of an unknown topic", Req: describeProducers("ad-none", 0)},
			Step{Name: "describe transactions", Req: describeTransactions("ad-t", "ad-none", "")},
			Step{Name: "list transactions v0", Req: listTransactions(0, nil, 0, nil), Post: keepTx},
			Step{Name: "list ongoing ones", Req: listTransactions(1, []string{"Ongoing", "Bogus"}, 0, nil), Post: keepTx},
			Step{Name: "list by producer id", Req: listTransactions(1, nil, 0, nil, "t"), Post: keepTx},
			Step{Name: "list those running for an hour", Req: listTransactions(1, nil, 3600000, nil), Post: keepTx},
			Step{Name: "list by pattern", Req: listTransactions(2, nil, 0, Str("ad-.*")), Post: keepTx},
			Step{Name: "delete records below 3", Req: deleteRecords(2, "ad", map[int32]int64{0: 3, 1: -1})},
			Step{Name: "delete records past the high watermark", Req: deleteRecords(2, "ad", map[int32]int64{0: 100})},
			Step{Name: "delete records below the log start", Req: deleteRecords(2, "ad", map[int32]int64{0: 1})},
			Step{Name: "delete records of an unknown partition", Req: deleteRecords(0, "ad", map[int32]int64{9: 1})},
			list("earliest after the delete", listV, 0, "ad", 0, -2),
			Step{Name: "fetch from the new log start", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "ad", Partition: 0, Offset: 3}}}.Req},
			Step{Name: "fetch below the new log start", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "ad", Partition: 0, Offset: 1}}}.Req},
			endTxn("commit", "ad-t", "t", true),
			settleFrom("ad", 0, 3),
			// Kafka completes the transaction after its markers are
			// acknowledged, in the background: a client describing it
			// at once may see PrepareCommit.
			Step{Name: "describe the committed transaction", Req: describeTransactions("ad-t"), Until: func(_ *Env, r kmsg.Response) bool {
				resp, ok := r.(*kmsg.DescribeTransactionsResponse)
				return ok && len(resp.TransactionStates) > 0 && resp.TransactionStates[0].State != "PrepareCommit"
			}},
			// The producer's last timestamp is now its COMMIT marker's,
			// which each broker stamps with its own clock.
			Step{Name: "describe producers after the commit", Req: describeProducers("ad", 0),
				Ignore: []string{"Topics.[].Partitions.[].ActiveProducers.[].LastTimestamp"}},
			Step{Name: "describe cluster v1", Req: describeCluster(1)},
		)},
	}
}
