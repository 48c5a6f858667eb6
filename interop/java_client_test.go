package interop

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/interop/kafka"
)

// TestJavaClient runs Kafka's Java client (kafka-clients 4.4, the
// ClientScenarios program of interop/kafka/java) against Kafka 4.4 and
// against partlog serve and compares what it observed: idempotent and
// transactional producers (commit, abort, fencing), classic and KIP-848
// consumer groups reading read_committed and read_uncommitted, and the
// admin client. The KIP-848 consumer (group.protocol=consumer) speaks
// ConsumerGroupHeartbeat to both, with no fallback to the classic
// protocol, and the admin client describes its group as type CONSUMER
// (ConsumerGroupDescribe).
func TestJavaClient(t *testing.T) {
	in := kafka.Need(t)
	b := in.StartBroker(t, kafka.BrokerConfig{Props: wireBrokerProps})
	s := startServer(t, t.TempDir(), "--partitions", "1", "--node-id", "1")
	tl := in.StartTools(t)
	k := toolTarget{"kafka", b.Addr, b.Client(t)}
	p := toolTarget{"partlog", s.addr, s.client(t)}
	createBoth(t, tl, k, p, "jc", 2)
	scenario := func(name string, args ...string) {
		t.Helper()
		var outs [2]string
		for i, tg := range []toolTarget{k, p} {
			res, err := tl.Run(3*time.Minute, "ClientScenarios", append([]string{args[0], tg.addr}, args[1:]...)...)
			if err != nil {
				t.Fatalf("%s on %s: %v", name, tg.name, err)
			}
			outs[i] = toolOutput(res.Stdout, k.addr, p.addr)
			if res.Code != 0 {
				outs[i] += fmt.Sprintf("exit %d: %s", res.Code, lastLines(res.Stderr, 3))
			}
		}
		if outs[0] != outs[1] {
			t.Errorf("%s:\n--- kafka\n%s\n--- partlog\n%s", name, outs[0], outs[1])
		} else if testing.Verbose() {
			t.Logf("%s:\n%s", name, outs[1])
		}
	}
	scenario("idempotent producer", "idempotent", "jc", "20")
	scenario("transaction committed", "txn", "jc", "jc-commit", "6", "commit")
	scenario("transaction aborted", "txn", "jc", "jc-abort", "4", "abort")
	scenario("fencing", "fence", "jc", "jc-fence")
	scenario("classic group, read_committed", "consume", "jc", "jc-classic", "classic", "read_committed", "24")
	scenario("KIP-848 group, read_uncommitted", "consume", "jc", "jc-new", "consumer", "read_uncommitted", "32")
	scenario("admin client", "admin", "jc-admin")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
