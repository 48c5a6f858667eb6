package wirediff

import (
	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchScripts are ListOffsets (every special timestamp at every version,
// both isolation levels) and Fetch (isolation, max bytes, aborted
// transactions, leader epochs, versions).
func FetchScripts() []*Script {
	const t = "lo"
	var lo []Step
	for v := int16(1); v <= 11; v++ {
		for _, ts := range []int64{-1, -2, -3, -4, -5, -6, -7} {
			for iso := int8(0); iso <= 1; iso++ {
				if v < 2 && iso == 1 {
					continue
				}
				lo = append(lo, list("v"+itoa(int(v))+" ts "+itoa(int(ts))+" iso "+itoa(int(iso)), v, iso, t, 0, ts))
			}
		}
	}
	byTime := func(name string, ts int64, iso int8) Step {
		return Step{Name: name, Req: func(e *Env) (r kmsg.Request) {
			return ListOffsets{Version: listV, Isolation: iso, Parts: []LP{{Topic: t, Partition: 0, Timestamp: e.T0 + ts}}}.Req(e)
		}}
	}
	return []*Script{
		{Name: "listoffsets", Steps: seq(
			create(t, 1, nil),
			list("empty: latest", listV, 0, t, 0, -1),
			list("empty: earliest", listV, 0, t, 0, -2),
			list("empty: max timestamp", listV, 0, t, 0, -3),
			produce("three records", t, 0, Batch{N: 3, TsDelta: 100}),
			produce("older records", t, 0, Batch{N: 2, TsDelta: 0}),
			initPID("init", Str("lo-a"), "a"),
			addParts("begin", "lo-a", "a", t, 0),
			// The largest record timestamps, but below the COMMIT marker's
			// (written at each broker's clock, after the pause below).
			txnProduce("open transaction", "lo-a", t, 0, Batch{Producer: "a", Txn: true, N: 2, TsDelta: 150}),
			byTime("ts of record 1", 101, 0),
			byTime("ts before everything", -5000, 0),
			byTime("ts after everything", 100000, 0),
			byTime("ts inside the open transaction, read_committed", 151, 1),
			byTime("ts inside the open transaction, read_uncommitted", 151, 0),
			lo,
			Step{Name: "duplicate partition", Req: ListOffsets{Version: listV, Parts: []LP{{Topic: t, Partition: 0, Timestamp: -1}, {Topic: t, Partition: 0, Timestamp: -2}}}.Req},
			Step{Name: "unknown partition", Req: ListOffsets{Version: listV, Parts: []LP{{Topic: t, Partition: 4, Timestamp: -1}}}.Req},
			Step{Name: "unknown topic", Req: ListOffsets{Version: listV, Parts: []LP{{Topic: "lo-none", Partition: 0, Timestamp: -1}}}.Req},
			Step{Name: "current leader epoch 0", Req: ListOffsets{Version: listV, Parts: []LP{{Topic: t, Partition: 0, Timestamp: -1, LeaderEpoch: Int32(0)}}}.Req},
			Step{Name: "current leader epoch 5", Req: ListOffsets{Version: listV, Parts: []LP{{Topic: t, Partition: 0, Timestamp: -1, LeaderEpoch: Int32(5)}}}.Req},
			Step{Name: "commit", Sleep: 300e6, Req: EndTxn{Version: endV, TxnID: "lo-a", Producer: "a", Commit: true}.Req},
			settle(t, 0),
			list("latest committed", listV, 1, t, 0, -1),
			// The largest timestamp is the COMMIT marker's, which each
			// broker stamps with its own clock.
			Step{Name: "max timestamp committed", Req: ListOffsets{Version: listV, Isolation: 1, Parts: []LP{{Topic: t, Partition: 0, Timestamp: -3}}}.Req,
				Ignore: []string{"Topics.[].Partitions.[].Timestamp"}},
		)},
		{Name: "fetch", Steps: seq(
			create("fe", 3, nil),
			produce("p0 batch 1", "fe", 0, Batch{N: 3}),
			produce("p0 batch 2", "fe", 0, Batch{N: 2, Compression: batch.CompressionSnappy}),
			produce("p0 batch 3", "fe", 0, Batch{Records: []batch.RecordSpec{{Value: make([]byte, 400)}}}),
			produce("p1 batch", "fe", 1, Batch{N: 5}),
			initPID("init", Str("fe-a"), "a"),
			addParts("begin", "fe-a", "a", "fe", 2),
			txnProduce("p2 transactional", "fe-a", "fe", 2, Batch{Producer: "a", Txn: true, N: 2}),
			endTxn("abort", "fe-a", "a", false),
			settle("fe", 2),
			produce("p2 after", "fe", 2, Batch{N: 1}),
			addParts("begin again", "fe-a", "a", "fe", 2),
			txnProduce("p2 open", "fe-a", "fe", 2, Batch{Producer: "a", Txn: true, N: 1, Seq: 2}),
			Step{Name: "all, read_uncommitted", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "fe", Partition: 0}, {Topic: "fe", Partition: 1}, {Topic: "fe", Partition: 2}}}.Req},
			Step{Name: "all, read_committed", Req: Fetch{Version: fetchV, Isolation: 1, Parts: []FP{{Topic: "fe", Partition: 0}, {Topic: "fe", Partition: 1}, {Topic: "fe", Partition: 2}}}.Req},
			Step{Name: "max bytes 1", Req: Fetch{Version: fetchV, MaxBytes: 1, Parts: []FP{{Topic: "fe", Partition: 0}, {Topic: "fe", Partition: 1}}}.Req},
			Step{Name: "max bytes 150", Req: Fetch{Version: fetchV, MaxBytes: 150, Parts: []FP{{Topic: "fe", Partition: 0}, {Topic: "fe", Partition: 1}}}.Req},
			Step{Name: "partition max bytes 100", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "fe", Partition: 0, MaxBytes: 100}, {Topic: "fe", Partition: 1, MaxBytes: 100}}}.Req},
			Step{Name: "partition max bytes 200 from 3", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "fe", Partition: 0, MaxBytes: 200, Offset: 3}}}.Req},
			Step{Name: "offset inside a batch", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "fe", Partition: 0, Offset: 1}}}.Req},
			Step{Name: "current leader epoch 0", Req: Fetch{Version: fetchV, EpochSet: true, Parts: []FP{{Topic: "fe", Partition: 0, LeaderEpoch: 0}}}.Req},
			Step{Name: "current leader epoch 3", Req: Fetch{Version: fetchV, EpochSet: true, Parts: []FP{{Topic: "fe", Partition: 0, LeaderEpoch: 3}}}.Req},
			Step{Name: "current leader epoch -1 past the end", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "fe", Partition: 1, Offset: 9}}}.Req},
			Step{Name: "negative offset", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "fe", Partition: 1, Offset: -1}}}.Req},
			Step{Name: "v4", Req: Fetch{Version: 4, Parts: []FP{{Topic: "fe", Partition: 0}}}.Req},
			Step{Name: "v7", Req: Fetch{Version: 7, Parts: []FP{{Topic: "fe", Partition: 0}}}.Req},
			Step{Name: "v11 read_committed", Req: Fetch{Version: 11, Isolation: 1, Parts: []FP{{Topic: "fe", Partition: 2}}}.Req},
			Step{Name: "min bytes, short wait", Req: Fetch{Version: fetchV, MinBytes: 1 << 20, MaxWait: 300, Parts: []FP{{Topic: "fe", Partition: 1}}}.Req},
			Step{Name: "unknown topic", Req: Fetch{Version: fetchV, Parts: []FP{{Topic: "fe-none", Partition: 0}}}.Req},
			endTxn("commit", "fe-a", "a", true),
			settle("fe", 2),
			Step{Name: "p2 read_committed after commit", Req: Fetch{Version: fetchV, Isolation: 1, Parts: []FP{{Topic: "fe", Partition: 2}}}.Req},
			Step{Name: "p2 read_committed from 3", Req: Fetch{Version: fetchV, Isolation: 1, Parts: []FP{{Topic: "fe", Partition: 2, Offset: 3}}}.Req},
		)},
	}
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
