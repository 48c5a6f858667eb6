package server

import (
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/testutil"
)

// BenchmarkDurableWritePath sends acks=all Produce requests of one 8 KiB
// batch (8 records of 1 KiB) to each of 100 partitions, as kgo does to a
// `serve --fsync` over 100 partitions, to two servers in turn: one with
// the engine's default write path (WriteAuto: pwritev while appends are
// synced, stores for a lone syncer's small appends), one writing with
// pwritev always; neither populates pages ahead (a --fsync server's
// default). It reports each one's wall time and process CPU per request
// and their ratios (default/pwrite: above 1, pwrite is cheaper).
func BenchmarkDurableWritePath(b *testing.B) {
	const parts, records, size = 100, 8, 1024
	def := startTest(b, Config{AutoCreate: true, DefaultPartitions: parts, Fsync: true})
	pw := startTest(b, Config{AutoCreate: true, DefaultPartitions: parts, Fsync: true,
		Log: &partlog.Options{WritePath: partlog.WritePwrite}})
	var wall, cpu [2]time.Duration
	var clients [2]*frameClient
	var n int
	clients[0], n = dialProduce(b, def.addr, -1, parts, records, size)
	clients[1], _ = dialProduce(b, pw.addr, -1, parts, records, size)
	b.SetBytes(int64(parts * n))
	b.ResetTimer()
	for i := range b.N {
		for k := range 2 {
			j := (i + k) % 2
			t0, c0 := time.Now(), testutil.ProcessCPU(b)
			clients[j].roundTrip(b)
			wall[j] += time.Since(t0)
			cpu[j] += testutil.ProcessCPU(b) - c0
		}
	}
	per := float64(b.N)
	b.ReportMetric(float64(wall[0])/per, "default-ns/op")
	b.ReportMetric(float64(wall[1])/per, "pwrite-ns/op")
	b.ReportMetric(float64(cpu[0])/per, "default-cpu-ns/op")
	b.ReportMetric(float64(cpu[1])/per, "pwrite-cpu-ns/op")
	b.ReportMetric(float64(wall[0])/float64(wall[1]), "default/pwrite")
	b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "default/pwrite-cpu")
}
