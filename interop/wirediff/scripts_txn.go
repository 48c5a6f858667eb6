package wirediff

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	initV = 4 // InitProducerId
	addV  = 3 // AddPartitionsToTxn (the client's form)
	endV  = 4 // EndTxn before transaction version 2
)

func initPID(name string, txn *string, producer string) Step {
	return Step{Name: name, Req: InitPID{Version: initV, TxnID: txn, Producer: producer}.Req, Save: SavePID(producer), Retry: []int16{51}}
}

func addParts(name, txn, producer, topic string, parts ...int32) Step {
	return Step{Name: name, Req: AddParts{Version: addV, TxnID: txn, Producer: producer, Topic: topic, Parts: parts}.Req, Retry: []int16{51}}
}

func endTxn(name, txn, producer string, commit bool) Step {
	return Step{Name: name, Req: EndTxn{Version: endV, TxnID: txn, Producer: producer, Commit: commit}.Req}
}

// settle waits until a partition's transactions are completed (Kafka
// writes the markers after EndTxn answers): its last stable offset is
// its high watermark.
func settle(topic string, p int32) Step { return settleFrom(topic, p, 0) }

// settleFrom is settle for a partition whose log starts at offset.
func settleFrom(topic string, p int32, offset int64) Step {
	return Step{Name: "settled " + topic, Req: Fetch{Version: fetchV, Isolation: 1, Parts: []FP{{Topic: topic, Partition: p, Offset: offset}}}.Req,
		Until: func(_ *Env, r kmsg.Response) bool {
			for _, t := range r.(*kmsg.FetchResponse).Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 || p.LastStableOffset != p.HighWatermark {
						return false
					}
				}
			}
			return true
		}}
}

func txnProduce(name, txn, topic string, p int32, b Batch) Step {
	return Step{Name: name, Req: Produce{Version: produceV, Acks: -1, TxnID: Str(txn), Parts: []PP{{Topic: topic, Partition: p, Batches: []Batch{b}}}}.Req}
}

// TxnScripts are InitProducerId, AddPartitionsToTxn and EndTxn in every
// state, verification of transactional produces, timeouts and fencing.
func TxnScripts() []*Script {
	const t = "tx"
	return []*Script{
		{Name: "txn-init", Steps: seq(
			create("ti", 1, nil),
			initPID("idempotent", nil, "i1"),
			initPID("idempotent again", nil, "i2"),
			Step{Name: "empty transactional id", Req: InitPID{Version: initV, TxnID: Str("")}.Req},
			Step{Name: "timeout 0", Req: InitPID{Version: initV, TxnID: Str("ti-a"), Timeout: -1}.Req},
			Step{Name: "timeout above the maximum", Req: InitPID{Version: initV, TxnID: Str("ti-a"), Timeout: 900001}.Req},
			initPID("new transactional id", Str("ti-a"), "a"),
			initPID("again (Empty)", Str("ti-a"), "a"),
			Step{Name: "KIP-360 with the current id and epoch", Req: InitPID{Version: initV, TxnID: Str("ti-a"), Producer: "a", KIP360: true}.Req, Save: SavePID("a2")},
			Step{Name: "KIP-360 retried with the previous epoch", Req: InitPID{Version: initV, TxnID: Str("ti-a"), Producer: "a", KIP360: true}.Req},
			Step{Name: "KIP-360 with another producer id", Req: InitPID{Version: initV, TxnID: Str("ti-a"), PID: Int64(123456), Epoch: Int16(0)}.Req},
			Step{Name: "KIP-360 with a stale epoch", Req: InitPID{Version: initV, TxnID: Str("ti-a"), Producer: "a2", KIP360: true, Epoch: Int16(0)}.Req},
			initPID("InitProducerId v0", Str("ti-b"), "b"),
			Step{Name: "InitProducerId v2", Req: InitPID{Version: 2, TxnID: Str("ti-b")}.Req, Save: SavePID("b")},
			Step{Name: "InitProducerId v5", Req: InitPID{Version: 5, TxnID: Str("ti-b")}.Req, Save: SavePID("b")},
			addParts("begin (Ongoing)", "ti-b", "b", "ti", 0),
			txnProduce("produce in the transaction", "ti-b", "ti", 0, Batch{Producer: "b", Txn: true, N: 2}),
			Step{Name: "InitProducerId while Ongoing", Req: InitPID{Version: initV, TxnID: Str("ti-b")}.Req},
			Step{Name: "InitProducerId while Ongoing, retried", Req: InitPID{Version: initV, TxnID: Str("ti-b")}.Req, Save: SavePID("b2"), Retry: []int16{51}},
			settle("ti", 0),
			fetchAll("the transaction was aborted at the fenced epoch", "ti", 0, 1),
			txnProduce("the old producer is fenced", "ti-b", "ti", 0, Batch{Producer: "b", Txn: true, Seq: 2, N: 1}),
			Step{Name: "AddPartitions with the old epoch", Req: AddParts{Version: addV, TxnID: "ti-b", Producer: "b", Topic: "ti", Parts: []int32{0}}.Req},
			Step{Name: "AddPartitions v1 with the old epoch", Req: AddParts{Version: 1, TxnID: "ti-b", Producer: "b", Topic: "ti", Parts: []int32{0}}.Req},
			addParts("the new producer begins", "ti-b", "b2", "ti", 0),
			txnProduce("the new producer writes", "ti-b", "ti", 0, Batch{Producer: "b2", Txn: true, N: 1}),
			endTxn("the new producer commits", "ti-b", "b2", true),
			initPID("InitProducerId after a commit", Str("ti-b"), "b3"),
			settle("ti", 0),
			fetchAll("read_committed", "ti", 0, 1),
			fetchAll("read_uncommitted", "ti", 0, 0),
		)},
		{Name: "txn-endtxn", Steps: seq(
			create(t, 2, nil),
			Step{Name: "EndTxn of an unknown transactional id", Req: EndTxn{Version: endV, TxnID: "tx-none", Commit: true}.Req},
			Step{Name: "EndTxn with an empty transactional id", Req: EndTxn{Version: endV, TxnID: "", Commit: true}.Req},
			initPID("init", Str("tx-a"), "a"),
			endTxn("commit while Empty", "tx-a", "a", true),
			endTxn("abort while Empty", "tx-a", "a", false),
			Step{Name: "commit with another producer id", Req: EndTxn{Version: endV, TxnID: "tx-a", Commit: true}.Req},
			Step{Name: "commit with a wrong epoch", Req: EndTxn{Version: endV, TxnID: "tx-a", Producer: "a", Epoch: Int16(7), Commit: true}.Req},
			Step{Name: "commit v1 with a wrong epoch", Req: EndTxn{Version: 1, TxnID: "tx-a", Producer: "a", Epoch: Int16(7), Commit: true}.Req},
			addParts("add a partition", "tx-a", "a", t, 0),
			addParts("add it again", "tx-a", "a", t, 0),
			Step{Name: "add an unknown partition", Req: AddParts{Version: addV, TxnID: "tx-a", Producer: "a", Topic: t, Parts: []int32{0, 9}}.Req},
			Step{Name: "add a partition of an unknown topic", Req: AddParts{Version: addV, TxnID: "tx-a", Producer: "a", Topic: "tx-unknown", Parts: []int32{0}}.Req},
			Step{Name: "add with an unknown transactional id", Req: AddParts{Version: addV, TxnID: "tx-none", Producer: "a", Topic: t, Parts: []int32{0}}.Req},
			txnProduce("produce", "tx-a", t, 0, Batch{Producer: "a", Txn: true, N: 3}),
			endTxn("commit while Ongoing", "tx-a", "a", true),
			Step{Name: "commit again", Req: EndTxn{Version: endV, TxnID: "tx-a", Producer: "a", Commit: true}.Req, Retry: []int16{51}},
			endTxn("abort after the commit", "tx-a", "a", false),
			settle(t, 0),
			addParts("second transaction", "tx-a", "a", t, 1),
			txnProduce("produce to 1", "tx-a", t, 1, Batch{Producer: "a", Txn: true, N: 2}),
			endTxn("abort while Ongoing", "tx-a", "a", false),
			Step{Name: "abort again", Req: EndTxn{Version: endV, TxnID: "tx-a", Producer: "a", Commit: false}.Req, Retry: []int16{51}},
			endTxn("commit after the abort", "tx-a", "a", true),
			settle(t, 1),
			fetchAll("partition 0 read_committed", t, 0, 1),
			fetchAll("partition 1 read_committed", t, 1, 1),
			fetchAll("partition 1 read_uncommitted", t, 1, 0),
			Step{Name: "EndTxn v0", Req: EndTxn{Version: 0, TxnID: "tx-a", Producer: "a", Commit: true}.Req},
			Step{Name: "EndTxn v3", Req: EndTxn{Version: 3, TxnID: "tx-a", Producer: "a", Commit: true}.Req},
		)},
		{Name: "txn-verify-tv1", Steps: seq(
			create("tv", 2, nil),
			initPID("init", Str("tv-a"), "a"),
			txnProduce("produce before AddPartitions", "tv-a", "tv", 0, Batch{Producer: "a", Txn: true, N: 1}),
			Step{Name: "produce v11 before AddPartitions", Req: Produce{Version: 11, Acks: -1, TxnID: Str("tv-a"), Parts: []PP{{Topic: "tv", Partition: 0, Batches: []Batch{{Producer: "a", Txn: true, N: 1}}}}}.Req},
			addParts("add partition 0", "tv-a", "a", "tv", 0),
			txnProduce("produce to 0", "tv-a", "tv", 0, Batch{Producer: "a", Txn: true, N: 1}),
			txnProduce("produce to 1, not added", "tv-a", "tv", 1, Batch{Producer: "a", Txn: true, N: 1}),
			Step{Name: "transactional batch without a transactional id", Req: Produce{Version: produceV, Acks: -1, Parts: []PP{{Topic: "tv", Partition: 0, Batches: []Batch{{Producer: "a", Txn: true, Seq: 1, N: 1}}}}}.Req},
			Step{Name: "transactional batch of another transactional id", Req: Produce{Version: produceV, Acks: -1, TxnID: Str("tv-other"), Parts: []PP{{Topic: "tv", Partition: 0, Batches: []Batch{{Producer: "a", Txn: true, Seq: 1, N: 1}}}}}.Req},
			txnProduce("a transactional batch with an unknown producer id", "tv-a", "tv", 0, Batch{PID: Int64(99999), Epoch: Int16(0), Txn: true, N: 1}),
			txnProduce("a transactional batch at a wrong epoch", "tv-a", "tv", 0, Batch{Producer: "a", Epoch: Int16(9), Txn: true, Seq: 1, N: 1}),
			endTxn("commit", "tv-a", "a", true),
			settle("tv", 0),
			settle("tv", 1),
			fetchAll("partition 0", "tv", 0, 1),
			fetchAll("partition 1", "tv", 1, 1),
			list("partition 1 last stable", listV, 1, "tv", 1, -1),
		)},
		{Name: "txn-tv2", Steps: seq(
			create("t2", 2, nil),
			Step{Name: "init v5", Req: InitPID{Version: 5, TxnID: Str("t2-a")}.Req, Save: SavePID("a")},
			Step{Name: "produce v12 without AddPartitions", Req: Produce{Version: 12, Acks: -1, TxnID: Str("t2-a"), Parts: []PP{{Topic: "t2", Partition: 0, Batches: []Batch{{Producer: "a", Txn: true, N: 2}}}}}.Req},
			Step{Name: "produce v12 to partition 1", Req: Produce{Version: 12, Acks: -1, TxnID: Str("t2-a"), Parts: []PP{{Topic: "t2", Partition: 1, Batches: []Batch{{Producer: "a", Txn: true, N: 1}}}}}.Req},
			Step{Name: "commit v5", Req: EndTxn{Version: 5, TxnID: "t2-a", Producer: "a", Commit: true}.Req, Save: SavePID("a+")},
			Step{Name: "commit v5 retried", Req: EndTxn{Version: 5, TxnID: "t2-a", Producer: "a", Commit: true}.Req, Retry: []int16{51}},
			settle("t2", 0),
			settle("t2", 1),
			fetchAll("partition 0", "t2", 0, 1),
			Step{Name: "the old epoch is fenced", Req: Produce{Version: 12, Acks: -1, TxnID: Str("t2-a"), Parts: []PP{{Topic: "t2", Partition: 0, Batches: []Batch{{Producer: "a", Txn: true, Seq: 2, N: 1}}}}}.Req},
			Step{Name: "next transaction at the bumped epoch", Req: Produce{Version: 12, Acks: -1, TxnID: Str("t2-a"), Parts: []PP{{Topic: "t2", Partition: 0, Batches: []Batch{{Producer: "a+", Txn: true, N: 1}}}}}.Req},
			Step{Name: "abort v5", Req: EndTxn{Version: 5, TxnID: "t2-a", Producer: "a+", Commit: false}.Req, Save: SavePID("a++")},
			settle("t2", 0),
			fetchAll("partition 0 after the abort", "t2", 0, 1),
			Step{Name: "commit v5 after the abort (CompleteAbort)", Req: EndTxn{Version: 5, TxnID: "t2-a", Producer: "a++", Commit: true}.Req},
			Step{Name: "produce v12 without a transactional id", Req: Produce{Version: 12, Acks: -1, Parts: []PP{{Topic: "t2", Partition: 1, Batches: []Batch{{Producer: "a++", Txn: true, N: 1}}}}}.Req},
		)},
		{Name: "txn-timeout", Steps: seq(
			create("tt", 1, nil),
			Step{Name: "init with a 1 s timeout", Req: InitPID{Version: initV, TxnID: Str("tt-a"), Timeout: 1000}.Req, Save: SavePID("a")},
			addParts("begin", "tt-a", "a", "tt", 0),
			txnProduce("produce", "tt-a", "tt", 0, Batch{Producer: "a", Txn: true, N: 2}),
			Step{Name: "commit after the timeout", Sleep: 3500 * 1e6, Req: EndTxn{Version: endV, TxnID: "tt-a", Producer: "a", Commit: true}.Req},
			settle("tt", 0),
			fetchAll("aborted at the fenced epoch", "tt", 0, 1),
			fetchAll("aborted, read_uncommitted", "tt", 0, 0),
			txnProduce("the old producer is fenced", "tt-a", "tt", 0, Batch{Producer: "a", Txn: true, Seq: 2, N: 1}),
			Step{Name: "KIP-360 recovery with the old epoch", Req: InitPID{Version: initV, TxnID: Str("tt-a"), Producer: "a", KIP360: true, Timeout: 1000}.Req, Retry: []int16{51}},
		)},
	}
}
