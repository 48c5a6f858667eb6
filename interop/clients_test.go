package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcat runs kcat with the given arguments and stdin, bounded in time.
func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	bin := requireTool(t, "kcat")
	ctx := testContext(t, 60*time.Second)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestKcatProduceConsume produces with kcat (librdkafka: idempotent,
// zstd), reads it back with kcat and kgo, and has kcat read a topic with
// committed and aborted kgo transactions read_committed.
func TestKcatProduceConsume(t *testing.T) {
	requireTool(t, "kcat")
	dir := t.TempDir()
	s := startServer(t, dir)
	var in strings.Builder
	const n = 200
	for i := range n {
		fmt.Fprintf(&in, "k%d:kcat-%03d\n", i%5, i)
	}
	kcat(t, in.String(), "-P", "-b", s.addr, "-t", "kc", "-K", ":", "-z", "zstd",
		"-X", "enable.idempotence=true", "-X", "acks=all")
	out := kcat(t, "", "-C", "-b", s.addr, "-t", "kc", "-o", "beginning", "-e", "-f", "%k:%s\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		t.Fatalf("kcat consumed %d records, want %d:\n%s", len(lines), n, out)
	}
	for i, l := range lines {
		if want := fmt.Sprintf("k%d:kcat-%03d", i%5, i); l != want {
			t.Fatalf("record %d: %q, want %q", i, l, want)
		}
	}
	if got := consumeAll(t, s, "kc", n); len(got) != n || string(got[n-1].Value) != fmt.Sprintf("kcat-%03d", n-1) {
		t.Fatalf("kgo read %d records of kcat's", len(got))
	}
	meta := kcat(t, "", "-L", "-b", s.addr, "-t", "kc")
	if !strings.Contains(meta, `topic "kc" with 1 partitions`) {
		t.Fatalf("kcat -L:\n%s", meta)
	}

	// Transactions by kgo, read_committed by librdkafka.
	p := s.client(t, kgo.TransactionalID("kcat-txn"), kgo.DefaultProduceTopic("kt"))
	ctx := testContext(t, 30*time.Second)
	for _, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("commit=%v-%d", commit, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	committed := kcat(t, "", "-C", "-b", s.addr, "-t", "kt", "-o", "beginning", "-e", "-f", "%s\n", "-X", "isolation.level=read_committed")
	if got := strings.Count(committed, "commit=true"); got != 10 || strings.Contains(committed, "commit=false") {
		t.Fatalf("kcat read_committed:\n%s", committed)
	}
	uncommitted := kcat(t, "", "-C", "-b", s.addr, "-t", "kt", "-o", "beginning", "-e", "-f", "%s\n", "-X", "isolation.level=read_uncommitted")
	if got := strings.Count(uncommitted, "commit="); got != 15 {
		t.Fatalf("kcat read_uncommitted read %d records:\n%s", got, uncommitted)
	}
}

// TestKcatConsumerGroup consumes with a kcat balanced consumer group.
func TestKcatConsumerGroup(t *testing.T) {
	requireTool(t, "kcat")
	s := startServer(t, t.TempDir(), "--partitions", "2")
	requireGroups(t, s)
	p := s.client(t, kgo.DefaultProduceTopic("kg"))
	for i := range 20 {
		produceSync(t, p, &kgo.Record{Value: []byte(fmt.Sprintf("g%02d", i))})
	}
	out := kcat(t, "", "-b", s.addr, "-G", "kcat-group", "-o", "beginning", "-e", "-f", "%s\n", "kg")
	if got := strings.Count(out, "g"); got != 20 {
		t.Fatalf("kcat group consumer read %d records:\n%s", got, out)
	}
}

// node runs testdata/kafkajs.js with kafkajs (resolved through NODE_PATH).
func node(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	bin := requireTool(t, "node")
	script, err := filepath.Abs("testdata/kafkajs.js")
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(bin, "-e", "require('kafkajs')").Run(); err != nil {
		if os.Getenv("PARTLOG_INTEROP_REQUIRE_CLIENTS") == "1" {
			t.Fatalf("kafkajs not found by node (NODE_PATH=%q) and PARTLOG_INTEROP_REQUIRE_CLIENTS=1", os.Getenv("NODE_PATH"))
		}
		t.Skipf("kafkajs not found by node (install it with npm and set NODE_PATH; NODE_PATH=%q)", os.Getenv("NODE_PATH"))
	}
	ctx := testContext(t, 90*time.Second)
	cmd := exec.CommandContext(ctx, bin, append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node kafkajs.js %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	var objs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var o map[string]any
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("kafkajs output %q: %v", l, err)
		}
		objs = append(objs, o)
	}
	return objs
}

// TestKafkajs creates a topic, describes its configs and lists offsets
// with kafkajs' admin,
// produces idempotently, runs a committed and an aborted transaction,
// and checks with kgo what a read_committed consumer sees.
func TestKafkajs(t *testing.T) {
	requireTool(t, "node")
	dir := t.TempDir()
	s := startServer(t, dir)
	adm := node(t, s.addr, "admin", "js-admin")
	var latest, byTime, configs string
	for _, o := range adm {
		if v, ok := o["configs"]; ok {
			b, _ := json.Marshal(v)
			configs = string(b)
		}
		if v, ok := o["latest"]; ok {
			b, _ := json.Marshal(v)
			latest = string(b)
		}
		if v, ok := o["byTime"]; ok {
			b, _ := json.Marshal(v)
			byTime = string(b)
		}
	}
	if configs != `[{"isDefault":false,"name":"retention.ms","value":"3600000"},{"isDefault":true,"name":"segment.bytes","value":"1073741824"}]` {
		t.Errorf("kafkajs describeConfigs: %s", configs)
	}
	if latest != `[{"high":"5","low":"0","partition":0},{"high":"0","low":"0","partition":1}]` {
		t.Errorf("kafkajs fetchTopicOffsets: %s", latest)
	}
	if byTime != `[{"offset":"3","partition":0},{"offset":"0","partition":1}]` {
		t.Errorf("kafkajs fetchTopicOffsetsByTimestamp: %s", byTime)
	}

	node(t, s.addr, "produce", "js-produce", "100")
	got := consumeAll(t, s, "js-produce", 100)
	for i, r := range got {
		if want := fmt.Sprintf("kafkajs-%d", i); string(r.Value) != want {
			t.Fatalf("record %d: %q, want %q", i, r.Value, want)
		}
	}

	// kafkajs' transactions need the topic to exist (it does not ask for
	// auto-creation on AddPartitionsToTxn).
	node(t, s.addr, "produce", "js-txn", "1")
	node(t, s.addr, "txn", "js-txn", "10")
	committed := consumeAll(t, s, "js-txn", 11, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for _, r := range committed {
		if strings.HasPrefix(string(r.Value), "aborted") {
			t.Fatalf("read_committed saw kafkajs' aborted record %s", r.Value)
		}
	}
	all := consumeAll(t, s, "js-txn", 21)
	if len(all) != 21 {
		t.Fatalf("read_uncommitted read %d records, want 21", len(all))
	}
	s.stop()
	if out, code := runPartlog(t, "verify", dir+"/js-txn-0", dir+"/js-produce-0", dir+"/js-admin-0", dir+"/js-admin-1"); code != 0 {
		t.Fatalf("partlog verify exited %d:\n%s", code, out)
	}
}

// TestKafkajsConsumerGroup consumes with a kafkajs consumer group.
func TestKafkajsConsumerGroup(t *testing.T) {
	requireTool(t, "node")
	s := startServer(t, t.TempDir())
	requireGroups(t, s)
	p := s.client(t, kgo.DefaultProduceTopic("js-group"))
	for i := range 10 {
		produceSync(t, p, &kgo.Record{Value: []byte(fmt.Sprintf("jg%d", i))})
	}
	if got := node(t, s.addr, "group", "js-group", "10"); len(got) != 10 {
		t.Fatalf("kafkajs group consumer printed %d records", len(got))
	}
}
