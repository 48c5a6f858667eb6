package interop

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/interop/kafka"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// runInfo is what the report says of the run besides the figures.
type runInfo struct {
	note   string
	matrix matrix
}

// commands are the go test commands of the matrices, as the report
// names them.
var commands = map[matrix]string{
	smokeMatrix:  "cd interop && go test -run '^$' -bench BenchmarkBrokers -benchtime 1x -brokers.report ../bench/RESULTS.md",
	windowMatrix: "cd interop && go test -run '^$' -bench BenchmarkBrokers -benchtime 1x -timeout 1h -brokers.window -brokers.report ../bench/RESULTS.md",
	fullMatrix:   "cd interop && go test -run '^$' -bench BenchmarkBrokers -benchtime 3x -timeout 4h -brokers.full -brokers.report ../bench/RESULTS.md",
}

// median returns the median of xs (the mean of the middle two for an
// even count); NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// med is the median over a broker's rounds of one figure.
func (r *cellResult) med(broker int, f func(sample) float64) float64 {
	xs := make([]float64, len(r.samples[broker]))
	for i, s := range r.samples[broker] {
		xs[i] = f(s)
	}
	return median(xs)
}

// ratio is the median over the rounds of partlog's figure divided by
// Kafka's in the same round (broker 0 over broker 1).
func (r *cellResult) ratio(f func(sample) float64) float64 {
	n := min(len(r.samples[0]), len(r.samples[1]))
	xs := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		if d := f(r.samples[1][i]); d > 0 {
			xs = append(xs, f(r.samples[0][i])/d)
		}
	}
	return median(xs)
}

func (r *cellResult) hasLatency() bool { return r.cell.kind != consumeCell }

var (
	recPerSec = sample.recPerSec
	mbPerSec  = sample.mbPerSec
	recPerCPU = sample.recPerCPU
	cpuPerGB  = sample.cpuPerGB
	p50       = func(s sample) float64 { return s.lat.p50 }
	p99       = func(s sample) float64 { return s.lat.p99 }
	p999      = func(s sample) float64 { return s.lat.p999 }
	peakMiB   = func(s sample) float64 { return float64(s.peakRSS) / (1 << 20) }
)

// report reports the cell's medians and ratios as benchmark metrics.
func (r *cellResult) report(b *testing.B) {
	for i, name := range r.brokers {
		b.ReportMetric(r.med(i, recPerSec), name+"-rec/s")
		b.ReportMetric(r.med(i, cpuPerGB), name+"-cpu-s/GB")
		b.ReportMetric(r.med(i, peakMiB), name+"-peak-RSS-MiB")
		if r.hasLatency() {
			b.ReportMetric(r.med(i, p99), name+"-p99-ms")
		}
	}
	b.ReportMetric(r.ratio(recPerSec), "rec/s-ratio")
	b.ReportMetric(r.ratio(recPerCPU), "rec/cpu-s-ratio")
	if r.hasLatency() {
		b.ReportMetric(r.ratio(p99), "p99-ratio")
	}
}

// Markers of RESULTS.md's section that the benchmark writes.
const (
	reportBegin = "<!-- BenchmarkBrokers: begin (written by the benchmark with -brokers.report; edit interop/brokers_report_test.go, not this section) -->"
	reportEnd   = "<!-- BenchmarkBrokers: end -->"
	chartName   = "brokers.svg"
)

// writeBrokersReport replaces the BenchmarkBrokers section of the
// markdown file path (appending it when missing) with the run's tables,
// and writes the chart beside path.
func writeBrokersReport(path string, rs []*cellResult, info runInfo) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	section := renderTables(rs, info)
	var out string
	if i, j := bytes.Index(old, []byte(reportBegin)), bytes.Index(old, []byte(reportEnd)); i >= 0 && j > i {
		out = string(old[:i]) + section + string(old[j+len(reportEnd):])
	} else {
		out = strings.TrimRight(string(old), "\n") + "\n\n" + section + "\n"
	}
	svg, err := renderChart(rs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), chartName), svg, 0o644); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// renderTables is the report's markdown: how it was run, then a table
// per kind of load.
func renderTables(rs []*cellResult, info runInfo) string {
	var sb strings.Builder
	sb.WriteString(reportBegin + "\n")
	sb.WriteString("## partlog serve beside Apache Kafka " + kafka.Version + "\n\n")
	rounds := 0
	if len(rs) > 0 {
		rounds = len(rs[0].samples[0])
	}
	var what string
	switch info.matrix {
	case smokeMatrix:
		what = "one small cell of each kind"
	case windowMatrix:
		what = "the quiet-window matrix (every partition count, size and acks with kgo; Kafka's tools at one partition, 100 B)"
	case fullMatrix:
		what = "the full matrix"
	}
	alternated := "the first broker alternated from round to round"
	if rounds == 1 {
		alternated = "the first broker alternated from cell to cell"
	}
	fmt.Fprintf(&sb, "Written by `BenchmarkBrokers` (interop/brokers_bench_test.go): %s, %d round(s) per cell, %s, %s.", what, rounds, alternated, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if info.note != "" {
		fmt.Fprintf(&sb, " **%s.**", info.note)
	}
	fmt.Fprintf(&sb, "\n\n- machine: %d CPUs, %s, Linux %s; %s\n", runtime.NumCPU(), cpuModel(), kernelRelease(), runtime.Version())
	sb.WriteString("- command: `" + commands[info.matrix] + "`\n")
	sb.WriteString("- P = `partlog serve` (durable: `--fsync`), K = Kafka " + kafka.Version + " (one KRaft node, 1 GiB heap, default settings; durable: topics with `flush.messages=1`). Clients: `perf` = Kafka's ProducerPerformance / ConsumerPerformance / EndToEndLatency in one JVM (1 GiB heap), warmed up before the first cell; `kgo` = franz-go in the benchmark's process.\n")
	sb.WriteString("- Figures are medians over the rounds; **×** is the median of the per-round ratios P/K (throughput: above 1 is partlog ahead; latency: below 1 is partlog ahead). CPU is the broker process's utime+stime (/proc) per GB of record values; rec/CPU-s is records per second of broker CPU. Peak RSS is the broker's high-water mark during the measurement (partlog's includes the segment pages it maps).\n")
	sb.WriteString("- ProducerPerformance and EndToEndLatency print whole milliseconds (EndToEndLatency truncates); kgo's latencies are exact.\n\n")
	for _, kind := range []cellKind{produceCell, consumeCell, e2eCell} {
		var cells []*cellResult
		for _, r := range rs {
			if r.cell.kind == kind {
				cells = append(cells, r)
			}
		}
		if len(cells) == 0 {
			continue
		}
		switch kind {
		case produceCell:
			sb.WriteString("### Produce\n\n")
		case consumeCell:
			fmt.Fprintf(&sb, "### Consume (the records of an acks=1 produce, read %d times from the start by new consumers, from the page cache)\n\n", consumePassCount)
		case e2eCell:
			fmt.Fprintf(&sb, "### End to end (kgo: %d records/s, send to receipt; perf: one record at a time, send and poll)\n\n", e2eRate)
		}
		lat := kind != consumeCell
		sb.WriteString("| load | rec/s P / K | × | MB/s P / K | rec/CPU-s P / K | × |")
		if lat {
			sb.WriteString(" p50 / p99 / p999 ms P | K | p99 × |")
		}
		sb.WriteString(" CPU-s/GB P / K | client CPU-s/GB P / K | peak RSS MiB P / K |\n")
		sb.WriteString("|---|---:|---:|---:|---:|---:|")
		if lat {
			sb.WriteString("---:|---:|---:|")
		}
		sb.WriteString("---:|---:|---:|\n")
		for _, r := range cells {
			pk := func(f func(sample) float64, format string) string {
				return fmt.Sprintf(format+" / "+format, r.med(0, f), r.med(1, f))
			}
			fmt.Fprintf(&sb, "| %s | %s | %.2f | %s | %s | %.2f |", strings.TrimPrefix(r.cell.name(), string(kind)+"/"),
				pk(recPerSec, "%.0f"), r.ratio(recPerSec), pk(mbPerSec, "%.1f"), pk(recPerCPU, "%.0f"), r.ratio(recPerCPU))
			if lat {
				for i := range 2 {
					fmt.Fprintf(&sb, " %s / %s / %s |", ms(r.med(i, p50)), ms(r.med(i, p99)), ms(r.med(i, p999)))
				}
				fmt.Fprintf(&sb, " %.2f |", r.ratio(p99))
			}
			fmt.Fprintf(&sb, " %s | %s | %s |\n", pk(cpuPerGB, "%.1f"), pk(sample.clientCPUPerGB, "%.1f"), pk(peakMiB, "%.0f"))
		}
		sb.WriteString("\n")
	}
	sb.WriteString("![partlog serve beside Kafka: throughput and latency](" + chartName + ")\n")
	sb.WriteString(reportEnd)
	return sb.String()
}

// ms formats a latency in milliseconds with the digits it has.
func ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 10 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func kernelRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

// The chart's colours: partlog, Kafka.
var brokerColors = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}

// panel is one bar chart of the figure: a value per cell and broker.
type panel struct {
	title, unit string
	labels      []string
	values      [2][]float64 // partlog, Kafka
}

func (p *panel) add(label string, r *cellResult, f func(sample) float64, scale float64) {
	p.labels = append(p.labels, label)
	for i := range 2 {
		v := r.med(i, f) * scale
		if math.IsNaN(v) || math.IsInf(v, 0) {
			v = 0
		}
		p.values[i] = append(p.values[i], v)
	}
}

// renderChart draws the figure: produce and consume throughput per
// cell, produce and end-to-end latency percentiles, partlog's bar
// beside Kafka's.
func renderChart(rs []*cellResult) ([]byte, error) {
	// A bar pair's label: partitions and size, then the acks on a
	// second line.
	short := func(r *cellResult) string {
		c := r.cell
		s := fmt.Sprintf("%dp %s", c.parts, strings.Split(c.name(), "/")[3])
		if c.kind != consumeCell {
			s += "\n" + c.mode.name
		}
		return s
	}
	panels := []*panel{
		{title: "Produce, kgo", unit: "M records/s"},
		{title: "Produce, ProducerPerformance", unit: "M records/s"},
		{title: "Consume (kgo, ConsumerPerformance)", unit: "M records/s"},
		{title: "Produce latency, kgo, 1 partition, 100 B", unit: "ms"},
		{title: "End-to-end latency, kgo and EndToEndLatency", unit: "ms"},
		{title: "Broker CPU per GB produced, kgo", unit: "CPU s/GB"},
	}
	for _, r := range rs {
		c := r.cell
		switch {
		case c.kind == produceCell && c.client == "kgo":
			panels[0].add(short(r), r, recPerSec, 1e-6)
			panels[5].add(short(r), r, cpuPerGB, 1)
			if c.parts == 1 && c.size == 100 {
				for _, q := range []struct {
					name string
					f    func(sample) float64
				}{{"p50", p50}, {"p99", p99}, {"p99.9", p999}} {
					panels[3].add(c.mode.name+"\n"+q.name, r, q.f, 1)
				}
			}
		case c.kind == produceCell:
			panels[1].add(short(r), r, recPerSec, 1e-6)
		case c.kind == consumeCell:
			panels[2].add(short(r)+"\n"+c.client, r, recPerSec, 1e-6)
		case c.kind == e2eCell:
			panels[4].add(short(r)+"\n"+c.client+" p50", r, p50, 1)
			panels[4].add(short(r)+"\n"+c.client+" p99", r, p99, 1)
		}
	}
	var plots []*plot.Plot
	for _, p := range panels {
		if len(p.labels) == 0 {
			continue
		}
		pl, err := p.plot()
		if err != nil {
			return nil, err
		}
		plots = append(plots, pl)
	}
	// One panel a row, as wide as the most bar pairs need.
	most := 0
	for _, p := range panels {
		most = max(most, len(p.labels))
	}
	w := max(16*vg.Centimeter, vg.Length(most+1)*1.6*vg.Centimeter)
	h := 9 * vg.Centimeter * vg.Length(len(plots))
	canvas := vgsvg.New(w, h)
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Centimeter / 2,
		PadTop: vg.Centimeter / 4, PadBottom: vg.Centimeter / 4, PadLeft: vg.Centimeter / 4, PadRight: vg.Centimeter / 4}
	for i, pl := range plots {
		pl.Draw(tiles.At(dc, 0, i))
	}
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// plot draws the panel: a pair of bars per label, partlog left.
func (p *panel) plot() (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.title
	pl.Y.Label.Text = p.unit
	pl.Y.Min = 0
	top := 0.0
	for _, vs := range p.values {
		for _, v := range vs {
			top = max(top, v)
		}
	}
	pl.Y.Max = top * 1.25 // room for the legend above the bars
	pl.Legend.Top = true
	pl.Legend.Left = true
	pl.Legend.XOffs = vg.Centimeter / 2
	pl.Legend.ThumbnailWidth = vg.Points(12)
	width := vg.Points(9)
	for i, name := range []string{"partlog", "Kafka"} {
		bars, err := plotter.NewBarChart(plotter.Values(p.values[i]), width)
		if err != nil {
			return nil, err
		}
		bars.Color = brokerColors[i]
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(2*i-1) / 2
		pl.Add(bars)
		pl.Legend.Add(name, bars)
	}
	pl.Add(plotter.NewGrid())
	pl.NominalX(p.labels...)
	pl.X.Tick.Label.Font.Size = vg.Points(7)
	return pl, nil
}

func TestMedianAndRatio(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is a number")
	}
	// The ratio pairs rounds: partlog's round i over Kafka's round i,
	// then the median, which is not the ratio of the medians.
	r := &cellResult{samples: [][]sample{
		{{records: 100, seconds: 1}, {records: 300, seconds: 1}, {records: 200, seconds: 1}},
		{{records: 100, seconds: 1}, {records: 100, seconds: 1}, {records: 400, seconds: 1}},
	}}
	if got := r.ratio(recPerSec); got != 1 {
		t.Errorf("ratio %v, want the median of 1, 3 and 0.5", got)
	}
	if got := r.med(0, recPerSec) / r.med(1, recPerSec); got != 2 {
		t.Errorf("ratio of medians %v", got)
	}
}

// syntheticResults is a full matrix of results where partlog is twice
// Kafka's throughput at half its latency in every round.
func syntheticResults() []*cellResult {
	var rs []*cellResult
	for i, c := range brokerCells(fullMatrix, false) {
		r := &cellResult{cell: c, brokers: []string{"partlog", "kafka"}, samples: make([][]sample, 2)}
		for round := range 3 {
			k := sample{records: int64(c.records), bytes: int64(c.records * c.size), seconds: 2 + float64(round+i%5)/10,
				brokerCPU: 3, clientCPU: 2, peakRSS: 500 << 20, lat: latencies{4, 20, 50}}
			if c.kind == consumeCell {
				k.lat = latencies{}
			}
			p := k
			p.seconds /= 2
			p.brokerCPU /= 4
			p.peakRSS /= 10
			p.lat = latencies{k.lat.p50 / 2, k.lat.p99 / 2, k.lat.p999 / 2}
			r.samples[0] = append(r.samples[0], p)
			r.samples[1] = append(r.samples[1], k)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestBrokersReport writes the report into a RESULTS.md twice: the text
// around the section stays, the section is replaced, not repeated, and
// the chart is an SVG with a bar for each broker and load.
func TestBrokersReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "RESULTS.md")
	before, after := "# Benchmark results\n\nearlier tables\n\n", "\n\nlater notes\n"
	if err := os.WriteFile(path, []byte(before+reportBegin+"\nan old run\n"+reportEnd+after), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := syntheticResults()
	for range 2 {
		if err := writeBrokersReport(path, rs, runInfo{note: "synthetic", matrix: fullMatrix}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(out)
	if !strings.HasPrefix(md, before+reportBegin) || !strings.HasSuffix(md, reportEnd+after) {
		t.Fatalf("the text around the section changed:\n%s", md)
	}
	if strings.Count(md, reportBegin) != 1 || strings.Contains(md, "an old run") {
		t.Fatalf("the old section is still there:\n%s", md)
	}
	for _, want := range []string{
		"**synthetic.**",
		"### Produce", "### Consume", "### End to end",
		// partlog at twice the records/s, four times the records per
		// CPU second, half the p99.
		"| kgo/p=1000/1KiB/durable | ",
		" | 2.00 | ",
		" | 4.00 | ",
		" 2 / 10 / 25 | 4 / 20 / 50 | 0.50 |",
		"![partlog serve beside Kafka: throughput and latency](brokers.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, chartName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(svg), []byte("<?xml")) || !bytes.Contains(svg, []byte("<svg")) {
		t.Fatalf("the chart is not an SVG: %.200s", svg)
	}
	for _, title := range []string{"Produce, kgo", "Consume", "End-to-end latency"} {
		if !bytes.Contains(svg, []byte(title)) {
			t.Errorf("the chart has no panel %q", title)
		}
	}
}

// TestWindowMatrix: the quiet-window matrix has every cell the issue
// names (produce at 1, 100 and 1 000 partitions × 100 B, 1 KiB × acks=1,
// acks=all, durable; consume at each count and size; end to end at each
// count, acknowledged and durable), Kafka's own tools among the clients,
// and no cell twice.
func TestWindowMatrix(t *testing.T) {
	have := map[string]bool{}
	clients := map[string]bool{}
	for _, c := range brokerCells(windowMatrix, false) {
		if have[c.name()] {
			t.Errorf("%s twice", c.name())
		}
		have[c.name()] = true
		clients[c.client] = true
		if c.records <= 0 {
			t.Errorf("%s has no records", c.name())
		}
	}
	for _, parts := range []int{1, 100, 1000} {
		for _, size := range []string{"100B", "1KiB"} {
			for _, m := range allModes {
				if name := fmt.Sprintf("produce/kgo/p=%d/%s/%s", parts, size, m.name); !have[name] {
					t.Errorf("no %s", name)
				}
			}
			if name := fmt.Sprintf("consume/kgo/p=%d/%s/acks=1", parts, size); !have[name] {
				t.Errorf("no %s", name)
			}
		}
		for _, m := range []ackMode{acks1, durable} {
			if name := fmt.Sprintf("e2e/kgo/p=%d/100B/%s", parts, m.name); !have[name] {
				t.Errorf("no %s", name)
			}
		}
	}
	if !clients["perf"] || !clients["kgo"] {
		t.Errorf("clients %v, want Kafka's tools and kgo", clients)
	}
}
