package interop

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog/interop/kafka"
	"github.com/partlog/partlog/interop/wirediff"
	pserver "github.com/partlog/partlog/server"
)

// wireBrokerProps are the Kafka broker's settings for the differential
// test: a transaction timeout is acted on within half a second (partlog
// serve's housekeeping tick is 1 s).
var wireBrokerProps = map[string]string{
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}

// TestWireDiff sends the same request scripts (wirediff's, written by
// hand and generated from a seed) to Apache Kafka 4.4 and to partlog
// serve and compares the answers field by field, after the
// normalisations of wirediff.Rules. Every difference fails the test,
// but for the allowed ones (wirediff.AllowedDifferences, each listed in
// server/doc.go), where partlog's answer is checked as stated.
func TestWireDiff(t *testing.T) {
	doc, err := os.ReadFile("../server/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for name := range wirediff.AllowedDifferences {
		if !strings.Contains(string(doc), "//   - "+name+":") {
			t.Errorf("allowed difference %q is not listed in server/doc.go", name)
		}
	}
	in := kafka.Need(t)
	b := in.StartBroker(t, kafka.BrokerConfig{Props: wireBrokerProps})
	s := startServer(t, t.TempDir(), "--partitions", "1", "--node-id", "1")
	wirediff.ImplementedConfigs = map[string]bool{}
	for _, n := range pserver.TopicConfigNames() {
		wirediff.ImplementedConfigs[n] = true
	}
	kt := wirediff.Target{Name: "kafka", Addr: b.Addr, NodeID: 1}
	pt := wirediff.Target{Name: "partlog", Addr: s.addr, NodeID: 1}
	var scripts []*wirediff.Script
	for _, f := range []func() []*wirediff.Script{wirediff.BasicScripts, wirediff.ProduceScripts, wirediff.TxnScripts, wirediff.FetchScripts, wirediff.GroupScripts, wirediff.ConsumerGroupScripts, wirediff.ConfigScripts, wirediff.AdminScripts} {
		scripts = append(scripts, f()...)
	}
	if only := os.Getenv("WIREDIFF_ONLY"); only != "" {
		var keep []*wirediff.Script
		for _, sc := range scripts {
			if strings.Contains(sc.Name, only) {
				keep = append(keep, sc)
			}
		}
		scripts = keep
	}
	{
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, _, _ = wirediff.Compare(ctx, kt, pt, wirediff.Warmup())
		cancel()
	}
	sem := make(chan struct{}, 4)
	var mu sync.Mutex
	t.Run("scripts", func(t *testing.T) {
		for _, sc := range scripts {
			t.Run(sc.Name, func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				ra, rb, diffs := wirediff.Compare(ctx, kt, pt, sc)
				if len(diffs) > 0 {
					mu.Lock()
					defer mu.Unlock()
					t.Errorf("%s", wirediff.Report(sc, kt, pt, ra, rb, diffs))
				}
				if testing.Verbose() {
					for i := range ra {
						fmt.Printf("== %s step %d %s\n-- kafka\n%s-- partlog\n%s", sc.Name, i, ra[i].Step, show(ra[i]), show(rb[i]))
					}
				}
			})
		}
	})
}

func show(r wirediff.Result) string {
	if r.Err != "" {
		return r.Err + "\n"
	}
	return wirediff.Render(r.Tree)
}
