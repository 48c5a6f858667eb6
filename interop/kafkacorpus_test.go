package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/partlog/partlog/interop/kafka"
)

// The corpus Kafka wrote (interop/kafka WriteCorpus) is made once per
// test binary and shared, read-only, by the tests that compare partlog
// with Kafka on it; tests that damage it work on copies.
// PARTLOG_KAFKA_CORPUS=dir reuses (or, when dir is missing, writes and
// keeps) a corpus there, to iterate on a test without waiting for a
// broker.
var shared struct {
	once   sync.Once
	corpus *kafka.Corpus
	err    error
	tmp    string
}

// afterAll are run by TestMain once every test is done.
var afterAll []func()

func sharedCorpus(t *testing.T) *kafka.Corpus {
	t.Helper()
	in := kafka.Need(t)
	shared.once.Do(func() {
		if dir := os.Getenv("PARTLOG_KAFKA_CORPUS"); dir != "" {
			if c, err := kafka.OpenCorpus(dir); err == nil {
				shared.corpus = c
				return
			}
			shared.corpus = in.WriteCorpus(t, dir)
			return
		}
		tmp, err := os.MkdirTemp("", "partlog-kafka-corpus-")
		if err != nil {
			shared.err = err
			return
		}
		afterAll = append(afterAll, func() { os.RemoveAll(tmp) })
		shared.corpus = in.WriteCorpus(t, tmp)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	if shared.corpus == nil {
		t.Fatal("the corpus could not be written (see the first test that asked for it)")
	}
	if err := shared.corpus.Check(); err != nil {
		t.Fatal(err)
	}
	return shared.corpus
}

// runPartlogSplit runs partlog with args and returns its stdout, stderr
// and exit code.
func runPartlogSplit(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(partlogBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), errb.String(), ee.ExitCode()
		}
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// firstDiff describes where two outputs first differ, with the line of
// each.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g || i >= len(wl) || i >= len(gl) {
			return fmt.Sprintf("line %d:\n  kafka:   %q\n  partlog: %q", i+1, w, g)
		}
	}
	return "identical"
}

// ownLines drops partlog's own diagnostic lines ("partlog: ...") from a
// stderr: what is left must be what Kafka prints there.
func ownLines(stderr string) string {
	var keep []string
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(l, "partlog: ") && l != "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// withoutStackTrace drops the stack trace of an uncaught exception from a
// JVM's stderr ("\tat ..." frames, "\t... n more", "Caused by: ..."),
// keeping its first line, which partlog prints too.
func withoutStackTrace(stderr string) string {
	var keep []string
	inTrace := false
	for _, l := range strings.SplitAfter(stderr, "\n") {
		switch {
		case strings.HasPrefix(l, `Exception in thread "main" `):
			inTrace = true
			keep = append(keep, l)
		case inTrace && (strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "Caused by: ")):
		default:
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// dumpCase is one DumpLogSegments invocation to compare.
type dumpCase struct {
	files []string
	flags []string
}

func (c dumpCase) String() string {
	names := make([]string, len(c.files))
	for i, f := range c.files {
		names[i] = filepath.Base(filepath.Dir(f)) + "/" + filepath.Base(f)
	}
	return strings.Join(names, ",") + " " + strings.Join(c.flags, " ")
}

// compareDump runs DumpLogSegments and partlog dump on the same files
// with the same flags and reports any difference in stdout, or in
// stderr once partlog's own lines are dropped.
func compareDump(t *testing.T, tl *kafka.Tools, c dumpCase) {
	t.Helper()
	args := append([]string{"--files", strings.Join(c.files, ",")}, c.flags...)
	kres, err := tl.Run(0, kafka.DumpLogSegments, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runPartlogSplit(t, append([]string{"dump"}, args...)...)
	// 4: invalid data; 8 (a file could not be read) only where Kafka's
	// tool failed too.
	if code&^(4|8) != 0 || (code&8 != 0 && kres.Code == 0) {
		t.Errorf("%s: partlog dump exited %d (Kafka's tool %d):\n%s", c, code, kres.Code, errOut)
		return
	}
	if kres.Stdout != out {
		t.Errorf("%s: stdout differs at %s", c, firstDiff(kres.Stdout, out))
	}
	if kerr, perr := withoutStackTrace(kres.Stderr), ownLines(errOut); kerr != perr {
		t.Errorf("%s: stderr differs at %s", c, firstDiff(kerr, perr))
	}
}

// TestKafkaCorpusDump compares `partlog dump` with Kafka's
// DumpLogSegments, byte for byte, on every file of the corpus Kafka
// wrote, with every flag that applies to the file's kind.
func TestKafkaCorpusDump(t *testing.T) {
	c := sharedCorpus(t)
	in := kafka.Need(t)
	tl := in.StartTools(t)
	var cases []dumpCase
	logFlags := [][]string{
		nil,
		{"--deep-iteration"},
		{"--print-data-log"},
		{"--deep-iteration", "--skip-record-metadata"},
		{"--print-data-log", "--skip-record-metadata"},
		{"--max-bytes", "1000"},
		{"--max-bytes", "1000", "--print-data-log"},
		{"--key-decoder-class", "org.apache.kafka.tools.api.StringDecoder", "--value-decoder-class", "org.apache.kafka.tools.api.StringDecoder"},
	}
	decoderOf := map[string][]string{
		kafka.CorpusOffsets:  {"--offsets-decoder"},
		kafka.CorpusTxnState: {"--transaction-log-decoder"},
	}
	indexFlags := [][]string{nil, {"--verify-index-only"}, {"--index-sanity-check"}}
	add := func(dir string, extra [][]string) {
		files, err := kafka.Files(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			var sets [][]string
			switch filepath.Ext(f) {
			case ".log", ".checkpoint":
				if filepath.Base(f) == "leader-epoch-checkpoint" {
					continue
				}
				sets = append(append(sets, logFlags...), extra...)
			case ".index", ".timeindex":
				sets = indexFlags
			case ".snapshot", ".txnindex":
				sets = [][]string{nil}
			default:
				continue
			}
			for _, fl := range sets {
				cases = append(cases, dumpCase{files: []string{f}, flags: fl})
			}
		}
	}
	for _, tp := range c.Topics {
		for p := int32(0); p < tp.Partitions; p++ {
			var extra [][]string
			if d, ok := decoderOf[tp.Name]; ok {
				extra = append(extra, d, append([]string{"--skip-record-metadata"}, d...))
			}
			add(c.PartitionDir(tp.Name, p), extra)
		}
	}
	add(c.MetadataDir(), [][]string{{"--cluster-metadata-decoder"}, {"--cluster-metadata-decoder", "--skip-record-metadata"}})
	// Several files in one call: the reports Kafka prints after the last
	// file (index mismatches, non-consecutive offsets) come in its order.
	for _, tp := range c.Topics {
		files, err := kafka.Files(c.PartitionDir(tp.Name, 0), ".log", ".index", ".timeindex", ".txnindex", ".snapshot")
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, dumpCase{files: files, flags: []string{"--deep-iteration"}})
	}
	t.Logf("%d DumpLogSegments calls compared", len(cases))
	for _, dc := range cases {
		compareDump(t, tl, dc)
	}
}

// TestKafkaCorpusVerify: `partlog verify` finds no problem (exit 0) in
// any partition Kafka wrote, in the metadata log, or in the log
// directory as a whole (--full: every segment read).
func TestKafkaCorpusVerify(t *testing.T) {
	c := sharedCorpus(t)
	dirs := append(c.PartitionDirs(), c.MetadataDir())
	for _, d := range dirs {
		if out, code := runPartlog(t, "verify", d); code != 0 {
			t.Errorf("partlog verify %s: exit %d\n%s", filepath.Base(d), code, out)
		}
	}
	if out, code := runPartlog(t, "verify", "--full", c.LogDir); code != 0 {
		t.Errorf("partlog verify --full %s: exit %d\n%s", c.LogDir, code, out)
	}
}

// producerEntry is one producer's state as a Kafka snapshot holds it.
type producerEntry struct {
	ProducerID            int64
	ProducerEpoch         int16
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64 // -1: none
	LastTimestamp         int64
	// The last batch (Kafka keeps one in a snapshot); LastSequence -1
	// and the rest 0 or -1 when the producer has none.
	LastSequence int32
	LastOffset   int64
	OffsetDelta  int32
}

// parseSnapshotDump reads DumpLogSegments' lines of one .snapshot file.
func parseSnapshotDump(out string) ([]producerEntry, error) {
	es := []producerEntry{}
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "producerId: ") {
			continue
		}
		f := strings.Fields(l)
		kv := map[string]string{}
		for i := 0; i+1 < len(f); i += 2 {
			kv[strings.TrimSuffix(f[i], ":")] = f[i+1]
		}
		var e producerEntry
		e.CurrentTxnFirstOffset, e.LastSequence, e.LastOffset = -1, -1, -1
		var err error
		num := func(k string, bits int) int64 {
			v, perr := strconv.ParseInt(kv[k], 10, bits)
			if perr != nil && err == nil {
				err = fmt.Errorf("%q: %s: %v", l, k, perr)
			}
			return v
		}
		e.ProducerID = num("producerId", 64)
		e.ProducerEpoch = int16(num("producerEpoch", 16))
		e.CoordinatorEpoch = int32(num("coordinatorEpoch", 32))
		e.LastTimestamp = num("lastTimestamp", 64)
		if v, ok := strings.CutPrefix(kv["currentTxnFirstOffset"], "OptionalLong["); ok {
			kv["txn"] = strings.TrimSuffix(v, "]")
			e.CurrentTxnFirstOffset = num("txn", 64)
		}
		if _, ok := kv["lastSequence"]; ok {
			e.LastSequence = int32(num("lastSequence", 32))
			e.LastOffset = num("lastOffset", 64)
			e.OffsetDelta = int32(num("offsetDelta", 32))
		}
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].ProducerID < es[j].ProducerID })
	return es, nil
}

// partlogProducers is `partlog producers --json dir` as entries.
func partlogProducers(t *testing.T, dir string) []producerEntry {
	t.Helper()
	es, err := producersOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// producersOf runs `partlog producers --json dir` (safe to call from any
// goroutine).
func producersOf(dir string) ([]producerEntry, error) {
	cmd := exec.Command(partlogBin, "producers", "--json", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("partlog producers %s: %v: %s", dir, err, stderr.String())
	}
	out := stdout.String()
	var st struct {
		Producers []struct {
			ProducerID            int64  `json:"producerId"`
			ProducerEpoch         int16  `json:"producerEpoch"`
			LastSequence          int32  `json:"lastSequence"`
			LastOffset            int64  `json:"lastOffset"`
			OffsetDelta           int32  `json:"offsetDelta"`
			CoordinatorEpoch      int32  `json:"coordinatorEpoch"`
			CurrentTxnFirstOffset *int64 `json:"currentTxnFirstOffset"`
			LastTimestamp         int64  `json:"lastTimestamp"`
		} `json:"producers"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return nil, fmt.Errorf("partlog producers --json %s: %v\n%s", dir, err, out)
	}
	es := []producerEntry{}
	for _, p := range st.Producers {
		e := producerEntry{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, CoordinatorEpoch: p.CoordinatorEpoch,
			CurrentTxnFirstOffset: -1, LastTimestamp: p.LastTimestamp, LastSequence: p.LastSequence, LastOffset: p.LastOffset, OffsetDelta: p.OffsetDelta}
		if p.CurrentTxnFirstOffset != nil {
			e.CurrentTxnFirstOffset = *p.CurrentTxnFirstOffset
		}
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].ProducerID < es[j].ProducerID })
	return es, nil
}

// latestSnapshot is the .snapshot of dir with the highest offset: the one
// Kafka wrote at the log end when it stopped cleanly.
func latestSnapshot(t *testing.T, dir string) string {
	t.Helper()
	snaps, err := kafka.Files(dir, ".snapshot")
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no producer snapshot in %s (%v)", dir, err)
	}
	return snaps[len(snaps)-1]
}

// TestKafkaCorpusProducers: the producer state `partlog producers` prints
// for every partition equals the snapshot Kafka wrote at its clean stop
// (DumpLogSegments on it), both when partlog loads that snapshot and when
// it rebuilds the state from the batches alone (every snapshot removed
// from a copy).
func TestKafkaCorpusProducers(t *testing.T) {
	c := sharedCorpus(t)
	tl := kafka.Need(t).StartTools(t)
	replay := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(replay, os.DirFS(c.LogDir)); err != nil {
		t.Fatal(err)
	}
	for _, dir := range c.PartitionDirs() {
		name := filepath.Base(dir)
		out, err := tl.Dump([]string{latestSnapshot(t, dir)})
		if err != nil {
			t.Fatal(err)
		}
		want, err := parseSnapshotDump(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := partlogProducers(t, dir); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: partlog producers (Kafka's snapshot loaded):\n%+v\nKafka's snapshot:\n%+v", name, got, want)
		}
		copyDir := filepath.Join(replay, name)
		snaps, _ := kafka.Files(copyDir, ".snapshot")
		for _, s := range snaps {
			if err := os.Remove(s); err != nil {
				t.Fatal(err)
			}
		}
		if got := partlogProducers(t, copyDir); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: partlog producers (rebuilt from the batches):\n%+v\nKafka's snapshot:\n%+v", name, got, want)
		}
	}
}

// TestRealKafkaFilesDump compares `partlog dump` with DumpLogSegments on
// the files of cmd/partlog/testdata/realkafka: log directories written by
// Kafka 2.x and 3.x brokers and committed to public repositories (some
// without their .log files, which both tools must report alike).
func TestRealKafkaFilesDump(t *testing.T) {
	tl := kafka.Need(t).StartTools(t)
	root, err := filepath.Abs("../cmd/partlog/testdata/realkafka")
	if err != nil {
		t.Fatal(err)
	}
	var cases []dumpCase
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		name, dir := d.Name(), filepath.Base(filepath.Dir(path))
		var sets [][]string
		switch filepath.Ext(name) {
		case ".log", ".checkpoint":
			if name == "leader-epoch-checkpoint" || strings.HasSuffix(name, "offset-checkpoint") {
				return nil
			}
			sets = [][]string{nil, {"--deep-iteration", "--print-data-log"}}
			switch {
			case strings.HasPrefix(dir, "__consumer_offsets-"):
				sets = append(sets, []string{"--offsets-decoder"})
			case strings.HasPrefix(dir, "__transaction_state-"):
				sets = append(sets, []string{"--transaction-log-decoder"})
			case strings.HasPrefix(dir, "__cluster_metadata-") || filepath.Ext(name) == ".checkpoint":
				sets = append(sets, []string{"--cluster-metadata-decoder"})
			}
		case ".index", ".timeindex":
			sets = [][]string{nil, {"--index-sanity-check"}, {"--verify-index-only"}}
		case ".snapshot", ".txnindex":
			sets = [][]string{nil}
		}
		for _, fl := range sets {
			cases = append(cases, dumpCase{files: []string{path}, flags: fl})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 500 {
		t.Fatalf("found %d cases in %s, want the whole corpus", len(cases), root)
	}
	t.Logf("%d DumpLogSegments calls compared", len(cases))
	for _, dc := range cases {
		compareDump(t, tl, dc)
	}
}
