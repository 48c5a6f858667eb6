package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/interop/kafka"
	"github.com/partlog/partlog/interop/wirediff"
	pserver "github.com/partlog/partlog/server"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// toolTarget is one broker the tools run against.
type toolTarget struct {
	name string
	addr string
	cl   *kgo.Client
}

// toolOutput normalises a tool's output for comparison: broker
// addresses, topic and cluster ids, member ids, timestamps and the
// durations a tool computes from them are what the two brokers cannot
// share.
func toolOutput(out string, addrs ...string) string {
	for _, a := range addrs {
		out = strings.ReplaceAll(out, a, "<broker>")
		if host, port, ok := strings.Cut(a, ":"); ok {
			out = strings.ReplaceAll(out, host+":"+port, "<broker>")
		}
	}
	for _, r := range toolRewrites {
		out = r.re.ReplaceAllString(out, r.with)
	}
	return out
}

var toolRewrites = []struct {
	re   *regexp.Regexp
	with string
}{
	// The console consumer's group is console-consumer-<random below
	// 100 000>: 20 to 22 characters, so first, or the id rule below takes
	// only the 22-character ones.
	{regexp.MustCompile(`\bconsole-consumer-[0-9]+\b`), "<console-group>"},
	{regexp.MustCompile(`\b[A-Za-z0-9_-]{22}\b`), "<id>"},                           // topic and cluster ids (base64 UUIDs)
	{regexp.MustCompile(`[A-Za-z0-9._-]*-[0-9a-f]{8}-[0-9a-f-]{27}`), "<member>"},   // member ids: client id, a dash, a UUID
	{regexp.MustCompile(`\b1[0-9]{12}\b`), "<ts>"},                                  // millisecond timestamps
	{regexp.MustCompile(`(?m)^(\s*)[0-9]+(\s+records sent)`), "${1}<n>${2}"},        // perf-test progress lines
	{regexp.MustCompile(`[0-9.]+ records/sec \([0-9.]+ MB/sec\)`), "<rate>"},        // perf-test rates
	{regexp.MustCompile(`[0-9.]+ ms avg latency, [0-9.]+ ms max latency`), "<lat>"}, // perf-test latencies
	{regexp.MustCompile(`(<ts>\s+)[0-9]+`), "${1}<duration>"},                       // a duration beside its start time
	// Kafka 4.4 sets min.insync.replicas=1 as a cluster-wide dynamic
	// default when it formats a cluster (partlog keeps no broker configs:
	// server/doc.go, config sources).
	{regexp.MustCompile(`DYNAMIC_DEFAULT_BROKER_CONFIG:min\.insync\.replicas=1, `), ""},
	{regexp.MustCompile(`min\.insync\.replicas=1,?`), ""},
	{regexp.MustCompile(`[ \t]+`), " "}, // column padding follows the widest value
}

// runTool runs a tool against both targets (the bootstrap flag and its
// value come first) and returns the two normalised outputs and codes.
func runTool(t *testing.T, tl *kafka.Tools, k, p toolTarget, class, bootFlag string, args ...string) [2]string {
	t.Helper()
	var outs [2]string
	for i, tg := range []toolTarget{k, p} {
		argv := args
		if bootFlag != "" {
			argv = append([]string{bootFlag, tg.addr}, args...)
		}
		res, err := tl.Run(2*time.Minute, class, argv...)
		if err != nil {
			t.Fatalf("%s %s on %s: %v", class, strings.Join(argv, " "), tg.name, err)
		}
		outs[i] = fmt.Sprintf("exit %d\n%s", res.Code, toolOutput(res.Stdout, k.addr, p.addr))
		if res.Code != 0 {
			outs[i] += "\nstderr: " + toolOutput(firstLine(res.Stderr), k.addr, p.addr)
		}
	}
	return outs
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "WARN") {
			return l
		}
	}
	return ""
}

// sameTool runs a tool on both brokers and fails when the outputs
// differ (after toolOutput, and sort when the tool lists in no order).
func sameTool(t *testing.T, tl *kafka.Tools, k, p toolTarget, sortLines bool, class, bootFlag string, args ...string) string {
	t.Helper()
	outs := runTool(t, tl, k, p, class, bootFlag, args...)
	if sortLines {
		for i := range outs {
			outs[i] = sortedLines(outs[i])
		}
	}
	if outs[0] != outs[1] {
		t.Errorf("%s %s:\n--- kafka\n%s\n--- partlog\n%s", class, strings.Join(args, " "), outs[0], outs[1])
	}
	return outs[1]
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 1 {
		head, rest := lines[0], lines[1:]
		sortStrings(rest)
		lines = append([]string{head}, rest...)
	}
	return strings.Join(lines, "\n")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TestKafkaToolsAgainstBoth runs Kafka's own command-line tools against
// Kafka 4.4 and against partlog serve, each with the same arguments over
// the same data, and compares their outputs: kafka-topics,
// kafka-configs, kafka-consumer-groups, kafka-transactions, kafka-log-dirs,
// kafka-get-offsets, kafka-delete-records, kafka-producer-perf-test and
// kafka-console-consumer.
func TestKafkaToolsAgainstBoth(t *testing.T) {
	in := kafka.Need(t)
	b := in.StartBroker(t, kafka.BrokerConfig{Props: wireBrokerProps})
	s := startServer(t, t.TempDir(), "--partitions", "1", "--node-id", "1")
	tl := in.StartTools(t)
	k := toolTarget{"kafka", b.Addr, b.Client(t)}
	p := toolTarget{"partlog", s.addr, s.client(t)}
	const bs = "--bootstrap-server"

	t.Run("kafka-topics", func(t *testing.T) {
		sameTool(t, tl, k, p, false, kafka.TopicCommand, bs, "--create", "--topic", "tt", "--partitions", "2", "--config", "retention.ms=3600000")
		waitTopic(t, k.cl, "tt", 2)
		sameTool(t, tl, k, p, true, kafka.TopicCommand, bs, "--list", "--exclude-internal")
		sameTool(t, tl, k, p, false, kafka.TopicCommand, bs, "--describe", "--topic", "tt")
		sameTool(t, tl, k, p, false, kafka.TopicCommand, bs, "--alter", "--topic", "tt", "--partitions", "3")
		waitTopic(t, k.cl, "tt", 3)
		sameTool(t, tl, k, p, false, kafka.TopicCommand, bs, "--describe", "--topic", "tt")
		sameTool(t, tl, k, p, false, kafka.TopicCommand, bs, "--create", "--topic", "tt", "--partitions", "1")
		sameTool(t, tl, k, p, false, kafka.TopicCommand, bs, "--create", "--topic", "tt-bad", "--config", "segment.ms=0")
		sameTool(t, tl, k, p, false, kafka.TopicCommand, bs, "--delete", "--topic", "tt")
		waitNoTopic(t, k.cl, "tt")
		sameTool(t, tl, k, p, true, kafka.TopicCommand, bs, "--list", "--exclude-internal")
	})
	t.Run("kafka-configs", func(t *testing.T) {
		createBoth(t, tl, k, p, "tc", 1)
		sameTool(t, tl, k, p, false, kafka.ConfigCommand, bs, "--describe", "--entity-type", "topics", "--entity-name", "tc")
		sameTool(t, tl, k, p, false, kafka.ConfigCommand, bs, "--alter", "--entity-type", "topics", "--entity-name", "tc", "--add-config", "retention.ms=1000,max.message.bytes=5000")
		waitConfig(t, tl, k, "tc", "max.message.bytes=5000")
		sameTool(t, tl, k, p, false, kafka.ConfigCommand, bs, "--describe", "--entity-type", "topics", "--entity-name", "tc")
		sameTool(t, tl, k, p, false, kafka.ConfigCommand, bs, "--alter", "--entity-type", "topics", "--entity-name", "tc", "--delete-config", "retention.ms")
		waitConfigGone(t, tl, k, "tc", "retention.ms=1000")
		// --all lists every config: compared on those partlog implements
		// (server/doc.go, topic configs).
		outs := runTool(t, tl, k, p, kafka.ConfigCommand, bs, "--describe", "--all", "--entity-type", "topics", "--entity-name", "tc")
		implemented := map[string]bool{}
		for _, n := range pserver.TopicConfigNames() {
			implemented[n] = true
		}
		for i := range outs {
			var keep []string
			for _, l := range strings.Split(strings.TrimSpace(outs[i]), "\n") {
				if name, _, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.Contains(l, "sensitive=") && !implemented[name] {
					continue
				}
				keep = append(keep, l)
			}
			outs[i] = strings.Join(keep, "\n")
		}
		if outs[0] != outs[1] {
			t.Errorf("kafka-configs --describe --all:\n--- kafka\n%s\n--- partlog\n%s", outs[0], outs[1])
		}
		sameTool(t, tl, k, p, false, kafka.ConfigCommand, bs, "--alter", "--entity-type", "topics", "--entity-name", "tc", "--add-config", "segment.ms=0")
	})
	t.Run("kafka-get-offsets and kafka-delete-records", func(t *testing.T) {
		createBoth(t, tl, k, p, "to", 2)
		for _, tg := range []toolTarget{k, p} {
			produceN(t, tg.cl, "to", 0, 10)
			produceN(t, tg.cl, "to", 1, 4)
		}
		for _, ts := range []string{"-1", "-2", "-3"} {
			sameTool(t, tl, k, p, true, kafka.GetOffsetShell, bs, "--topic", "to", "--time", ts)
		}
		f := filepath.Join(t.TempDir(), "offsets.json")
		if err := os.WriteFile(f, []byte(`{"version":1,"partitions":[{"topic":"to","partition":0,"offset":4},{"topic":"to","partition":1,"offset":-1}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		sameTool(t, tl, k, p, true, kafka.DeleteRecords, bs, "--offset-json-file", f)
		sameTool(t, tl, k, p, true, kafka.GetOffsetShell, bs, "--topic", "to", "--time", "-2")
	})
	t.Run("kafka-log-dirs", func(t *testing.T) {
		createBoth(t, tl, k, p, "tl", 1)
		for _, tg := range []toolTarget{k, p} {
			produceN(t, tg.cl, "tl", 0, 3)
		}
		outs := runTool(t, tl, k, p, kafka.LogDirsCommand, bs, "--describe", "--topic-list", "tl")
		// The log directory's path differs: compared as present.
		for i := range outs {
			outs[i] = regexp.MustCompile(`"logDir":"[^"]*"`).ReplaceAllString(outs[i], `"logDir":"<dir>"`)
		}
		if outs[0] != outs[1] {
			t.Errorf("kafka-log-dirs:\n--- kafka\n%s\n--- partlog\n%s", outs[0], outs[1])
		}
	})
	t.Run("kafka-producer-perf-test and kafka-console-consumer", func(t *testing.T) {
		createBoth(t, tl, k, p, "tp", 1)
		for _, tg := range []toolTarget{k, p} {
			res, err := tl.Run(2*time.Minute, kafka.ProducerPerformance, "--topic", "tp", "--num-records", "500", "--record-size", "100",
				"--throughput", "-1", "--producer-props", "bootstrap.servers="+tg.addr, "acks=all")
			if err != nil || res.Code != 0 || !strings.Contains(res.Stdout, "500 records sent") {
				t.Fatalf("perf test on %s: %v exit %d\n%s%s", tg.name, err, res.Code, res.Stdout, res.Stderr)
			}
		}
		sameTool(t, tl, k, p, false, kafka.ConsoleConsumer, bs, "--topic", "tp", "--from-beginning", "--max-messages", "3",
			"--formatter-property", "print.offset=true", "--formatter-property", "print.partition=true", "--timeout-ms", "20000")
	})
	t.Run("kafka-consumer-groups", func(t *testing.T) {
		createBoth(t, tl, k, p, "tg", 2)
		for _, tg := range []toolTarget{k, p} {
			produceN(t, tg.cl, "tg", 0, 6)
			produceN(t, tg.cl, "tg", 1, 2)
			commitGroup(t, tg, "tg-group", "tg", map[int32]int64{0: 4, 1: 1})
		}
		sameTool(t, tl, k, p, true, kafka.ConsumerGroups, bs, "--list")
		sameTool(t, tl, k, p, true, kafka.ConsumerGroups, bs, "--describe", "--group", "tg-group")
		sameTool(t, tl, k, p, true, kafka.ConsumerGroups, bs, "--describe", "--group", "tg-group", "--state")
		sameTool(t, tl, k, p, true, kafka.ConsumerGroups, bs, "--reset-offsets", "--group", "tg-group", "--topic", "tg", "--to-earliest", "--execute")
		sameTool(t, tl, k, p, true, kafka.ConsumerGroups, bs, "--describe", "--group", "tg-group", "--offsets")
		sameTool(t, tl, k, p, true, kafka.ConsumerGroups, bs, "--delete-offsets", "--group", "tg-group", "--topic", "tg:1")
		sameTool(t, tl, k, p, true, kafka.ConsumerGroups, bs, "--delete", "--group", "tg-group")
		sameTool(t, tl, k, p, true, kafka.ConsumerGroups, bs, "--describe", "--group", "tg-group")
	})
	t.Run("kafka-transactions", func(t *testing.T) {
		createBoth(t, tl, k, p, "tx", 1)
		for _, tg := range []toolTarget{k, p} {
			openTransaction(t, tg, "tx-open", "tx")
		}
		sameTool(t, tl, k, p, true, kafka.TransactionsCommand, bs, "list")
		sameTool(t, tl, k, p, false, kafka.TransactionsCommand, bs, "describe", "--transactional-id", "tx-open")
		sameTool(t, tl, k, p, false, kafka.TransactionsCommand, bs, "describe-producers", "--topic", "tx", "--partition", "0")
		sameTool(t, tl, k, p, false, kafka.TransactionsCommand, bs, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "1")
		sameTool(t, tl, k, p, false, kafka.TransactionsCommand, bs, "abort", "--topic", "tx", "--partition", "0", "--start-offset", "0")
		sameTool(t, tl, k, p, false, kafka.TransactionsCommand, bs, "describe-producers", "--topic", "tx", "--partition", "0")
	})
}

func testCtx(t *testing.T) context.Context { return testContext(t, 60*time.Second) }

// createBoth creates a topic on both brokers with kafka-topics and waits
// until Kafka serves it.
func createBoth(t *testing.T, tl *kafka.Tools, k, p toolTarget, topic string, parts int) {
	t.Helper()
	sameTool(t, tl, k, p, false, kafka.TopicCommand, "--bootstrap-server", "--create", "--topic", topic, "--partitions", fmt.Sprint(parts))
	waitTopic(t, k.cl, topic, parts)
}

// waitTopic waits until a broker's metadata shows the topic's partitions
// led (Kafka's brokers learn a new topic moments after it is created).
func waitTopic(t *testing.T, cl *kgo.Client, topic string, parts int) {
	t.Helper()
	ctx := testCtx(t)
	for {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) == parts {
			ok := true
			for _, p := range resp.Topics[0].Partitions {
				ok = ok && p.ErrorCode == 0 && p.Leader >= 0
			}
			if ok {
				time.Sleep(200 * time.Millisecond) // the leader takes the partition moments later
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("topic %s not served with %d partitions", topic, parts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitNoTopic waits until a broker no longer serves a topic.
func waitNoTopic(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	ctx := testCtx(t)
	for {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode != 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("topic %s still served", topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitConfig waits until kafka-configs --describe shows want (Kafka's
// brokers learn a config change moments after it is answered).
func waitConfig(t *testing.T, tl *kafka.Tools, k toolTarget, topic, want string) {
	t.Helper()
	waitDescribe(t, tl, k, topic, func(out string) bool { return strings.Contains(out, want) })
}

func waitConfigGone(t *testing.T, tl *kafka.Tools, k toolTarget, topic, gone string) {
	t.Helper()
	waitDescribe(t, tl, k, topic, func(out string) bool { return !strings.Contains(out, gone) })
}

func waitDescribe(t *testing.T, tl *kafka.Tools, k toolTarget, topic string, done func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := tl.Run(time.Minute, kafka.ConfigCommand, "--bootstrap-server", k.addr, "--describe", "--entity-type", "topics", "--entity-name", topic)
		if err == nil && done(res.Stdout) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the config change of %s did not reach Kafka's describe: %s", topic, res.Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// toolT0 is the timestamp base of the records the tool tests produce,
// the same on both brokers.
var toolT0 = time.Now().Add(-time.Minute).Truncate(time.Second)

// produceN produces n records to a partition, one batch each, with
// timestamps toolT0 + i seconds (record n-2 the largest).
func produceN(t *testing.T, cl *kgo.Client, topic string, part int32, n int) {
	t.Helper()
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		ts := toolT0.Add(time.Duration(i) * time.Second)
		if i == n-2 {
			ts = ts.Add(time.Hour / 2)
		}
		rs = append(rs, &kgo.Record{Topic: topic, Partition: part, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i)), Timestamp: ts})
	}
	ctx := testCtx(t)
	for _, r := range rs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, part, err)
		}
	}
}

// commitGroup commits offsets for a group as a simple consumer
// (generation -1), so the group exists with offsets and no member.
func commitGroup(t *testing.T, tg toolTarget, group, topic string, offsets map[int32]int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < 8; p++ {
		if off, ok := offsets[p]; ok {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	req.Topics = append(req.Topics, rt)
	// At v8, by topic name (kgo would take v10, by topic id), on a
	// connection of its own: both brokers are their own coordinator.
	req.Version = 8
	c, err := wirediff.Dial(testCtx(t), tg.addr, "tools-test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.RoundTrip(testCtx(t), req)
	if err != nil {
		t.Fatalf("commit on %s: %v", tg.name, err)
	}
	resp := raw.(*kmsg.OffsetCommitResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("commit on %s: partition %d error %d", tg.name, rp.Partition, rp.ErrorCode)
			}
		}
	}
}

// openTransaction leaves a transaction of transactional id id open on
// topic's partition 0, its record ten minutes old (find-hanging looks at
// transactions older than its --max-transaction-timeout).
func openTransaction(t *testing.T, tg toolTarget, id, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.addr), kgo.TransactionalID(id), kgo.TransactionTimeout(10*time.Minute),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Partition: 0, Value: []byte("open"), Timestamp: time.Now().Add(-10 * time.Minute)}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("transactional produce on %s: %v", tg.name, err)
	}
}
