package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/interop/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partlog writes, Kafka reads: partitions written by `partlog serve`
// (every codec, transactions committed and aborted, LogAppendTime,
// segments rolled by size; one serve stopped cleanly, one SIGKILLed) and
// by the library (a mirroring barrier between plain batches) move into a
// Kafka 4.4 broker by the steps README.md's "Moving to Apache Kafka"
// gives, and Kafka's broker serves what partlog served: the same log
// ends, and Kafka's ConsoleConsumer prints the same records, read
// committed and read uncommitted, from either broker. DumpLogSegments
// reads every file partlog wrote and prints what `partlog dump` prints.

// loadTopic is one topic of the workload and what a consumer reads of it.
type loadTopic struct {
	name    string
	configs map[string]string
	// committed and all are the records a read_committed and a
	// read_uncommitted consumer read.
	committed, all int
}

// isolationLevels are the levels a topic is read at: both for a topic
// with transactions, read_uncommitted alone for the others (a
// read_committed consumer reads the same there, and each tool run costs
// seconds of CI).
func (tp loadTopic) isolationLevels() []string {
	if tp.committed != tp.all {
		return []string{"read_committed", "read_uncommitted"}
	}
	return []string{"read_uncommitted"}
}

// servePartitions writes the workload's topics through a `partlog serve`
// on dir, prints their records with ConsoleConsumer from serve, and stops
// serve (SIGKILL when kill). It returns the topics, their log ends and
// the consumer's outputs by topic and isolation level.
func servePartitions(t *testing.T, tl *kafka.Tools, dir, prefix string, kill bool) ([]loadTopic, map[string]int64, map[string]string) {
	t.Helper()
	s := startServer(t, dir)
	admin := s.client(t)
	topics := []loadTopic{
		{name: prefix + "codecs"},
		{name: prefix + "txn"},
		{name: prefix + "lat", configs: map[string]string{"message.timestamp.type": "LogAppendTime"}},
		{name: prefix + "roll", configs: map[string]string{"segment.bytes": "1048576"}},
	}
	for _, tp := range topics {
		createTopicOn(t, admin, tp.name, 1, tp.configs)
	}
	ctx := testContext(t, 2*time.Minute)
	produce := func(topic string, n int, size int, opts ...kgo.Opt) {
		cl := s.client(t, append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, opts...)...)
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("%s-%d-%s", topic, i, strings.Repeat("x", size))
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 5)), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		cl.Close()
	}
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		produce(topics[0].name, 8, 40, kgo.ProducerBatchCompression(codec))
	}
	// Records deleted below offset 5: the log start moves (partlog keeps
	// it in log-start-offset-checkpoint, which the move carries over).
	deleteRecordsBelow(t, admin, topics[0].name, 5)
	topics[0].committed, topics[0].all = 35, 35
	produce(topics[1].name, 4, 10)
	txn := s.client(t, kgo.DefaultProduceTopic(topics[1].name), kgo.TransactionalID(prefix+"load-txn"))
	for i, commit := range []bool{true, false, true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 3; j++ {
			txn.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("txn %d/%d commit=%v", i, j, commit))}, nil)
		}
		if err := txn.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn.Close()
	topics[1].committed, topics[1].all = 4+9, 4+15
	produce(topics[2].name, 10, 10)
	topics[2].committed, topics[2].all = 10, 10
	// 300 records of 5 KiB: two segments of at most 1 MiB each and a third.
	produce(topics[3].name, 300, 5<<10, kgo.ProducerLinger(0))
	topics[3].committed, topics[3].all = 300, 300

	if kill {
		// What partlog serves after a crash is what its own recovery
		// makes of the directory: a copy of it recovered by a restarted
		// serve is the reference, the directory itself goes to Kafka.
		admin.Close()
		s.kill()
		cp := dir + "-restarted"
		for _, tp := range topics {
			copyDir(t, filepath.Join(dir, tp.name+"-0"), filepath.Join(cp, tp.name+"-0"))
		}
		for _, f := range []string{kafka.RecoveryPointCheckpoint, kafka.LogStartCheckpoint, kafka.HighWatermarkCheckpoint} {
			if data, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				mustWrite(t, filepath.Join(cp, f), data)
			}
		}
		s = startServer(t, cp)
		admin = s.client(t)
	}
	ends := map[string]int64{}
	outs := map[string]string{}
	for _, tp := range topics {
		ends[tp.name] = listEnd(t, admin, tp.name, false)
		for _, iso := range tp.isolationLevels() {
			outs[tp.name+" "+iso] = consoleConsume(t, tl, s.addr, tp, iso)
		}
	}
	admin.Close()
	s.stop()
	return topics, ends, outs
}

// deleteRecordsBelow raises partition 0's log start to offset.
func deleteRecordsBelow(t *testing.T, cl *kgo.Client, topic string, offset int64) {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t, 30*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != offset {
		t.Fatalf("DeleteRecords %s below %d: error %d, low watermark %d", topic, offset, p.ErrorCode, p.LowWatermark)
	}
}

// consoleConsume prints partition 0 of the topic from its start with
// Kafka's ConsoleConsumer at the isolation level: offsets, timestamps,
// keys and values.
func consoleConsume(t *testing.T, tl *kafka.Tools, addr string, tp loadTopic, iso string) string {
	t.Helper()
	n := tp.all
	if iso == "read_committed" {
		n = tp.committed
	}
	res, err := tl.Run(2*time.Minute, kafka.ConsoleConsumer, "--bootstrap-server", addr, "--topic", tp.name,
		"--partition", "0", "--offset", "earliest", "--max-messages", strconv.Itoa(n), "--timeout-ms", "30000",
		"--isolation-level", iso,
		"--formatter-property", "print.offset=true", "--formatter-property", "print.timestamp=true",
		"--formatter-property", "print.key=true")
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 0 || strings.Count(res.Stdout, "\n") != n {
		t.Fatalf("ConsoleConsumer %s %s on %s: exit %d, want %d records:\n%s%s", tp.name, iso, addr, res.Code, n, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// compareDumpZeroTail is compareDump, except where Kafka's tool dies on
// the zeros after the data of a SIGKILLed serve's active segment (the
// unwritten part of its preallocated file): there partlog prints the
// same lines and goes on, reporting the zeros as no damage (formats.md
// §7.1, a deliberate deviation).
func compareDumpZeroTail(t *testing.T, tl *kafka.Tools, c dumpCase) {
	t.Helper()
	args := append([]string{"--files", strings.Join(c.files, ",")}, c.flags...)
	kres, err := tl.Run(0, kafka.DumpLogSegments, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(kres.Stderr, "CorruptRecordException: Found record size 0 smaller than minimum record overhead (14)") {
		compareDump(t, tl, c)
		return
	}
	out, errOut, code := runPartlogSplit(t, append([]string{"dump"}, args...)...)
	if code != 0 || !strings.HasPrefix(out, kres.Stdout) {
		t.Errorf("%s: partlog dump exited %d; Kafka's tool died on the zero tail after printing:\n%s\npartlog printed:\n%s%s", c, code, kres.Stdout, out, errOut)
	}
	if filepath.Ext(c.files[0]) == ".log" && !strings.Contains(errOut, "are zeros: the unwritten tail of an active segment, not damage") {
		t.Errorf("%s: partlog dump does not say the tail is zeros:\n%s", c, errOut)
	}
}

// writeBarrierPartition writes, with the library, a partition holding
// plain batches, an idempotent producer's batch, the mirroring barrier
// (MIRROR_PID_RESET, control type 7) and plain batches after it.
func writeBarrierPartition(t *testing.T, dir string) int64 {
	t.Helper()
	l, err := partlog.Open(dir, &partlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now().UnixMilli()
	var b batch.Builder
	build := func(spec batch.BatchSpec, vals ...string) []byte {
		var recs []batch.RecordSpec
		for i, v := range vals {
			recs = append(recs, batch.RecordSpec{Timestamp: ts + int64(i), Key: []byte("k"), Value: []byte(v)})
		}
		out, err := b.AppendBatch(nil, &spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	idem := batch.NewBatchSpec(0)
	idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence = 4000, 0, 0
	for _, step := range []struct {
		coordinator bool
		records     []byte
	}{
		{false, build(batch.NewBatchSpec(0), "before-1", "before-2")},
		{false, build(idem, "idempotent-1")},
		{true, batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: 0, Timestamp: ts + 5}, "AAAAAAAAAAAAAAAAAAAAAQ")},
		{false, build(batch.NewBatchSpec(0), "after-1", "after-2", "after-3")},
	} {
		if step.coordinator {
			_, err = l.AppendAsCoordinator(step.records, 0)
		} else {
			_, err = l.AppendAsLeader(step.records, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	end := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return end
}

// TestKafkaLoadsPartlog moves partitions partlog wrote into Kafka's
// broker and reads them back with Kafka's tools.
func TestKafkaLoadsPartlog(t *testing.T) {
	in := kafka.Need(t)
	tl := in.StartTools(t)
	work := t.TempDir()

	cleanDir, killedDir := filepath.Join(work, "serve-clean"), filepath.Join(work, "serve-killed")
	var topics []loadTopic
	ends := map[string]int64{}
	outs := map[string]string{}
	srcDirs := map[string]string{} // topic -> partition directory partlog wrote
	for _, v := range []struct {
		dir, prefix string
		kill        bool
	}{{cleanDir, "c-", false}, {killedDir, "k-", true}} {
		tps, e, o := servePartitions(t, tl, v.dir, v.prefix, v.kill)
		topics = append(topics, tps...)
		for k, x := range e {
			ends[k] = x
		}
		for k, x := range o {
			outs[k] = x
		}
		for _, tp := range tps {
			srcDirs[tp.name] = filepath.Join(v.dir, tp.name+"-0")
		}
	}
	barrierDir := filepath.Join(work, "lib", "barrier-0")
	ends["barrier"] = writeBarrierPartition(t, barrierDir)
	srcDirs["barrier"] = barrierDir

	// DumpLogSegments reads every file partlog wrote, as partlog dump
	// prints it.
	calls := 0
	for _, dir := range srcDirs {
		files, err := kafka.Files(dir, ".log", ".index", ".timeindex", ".txnindex", ".snapshot")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			var flags []string
			if filepath.Ext(f) == ".log" {
				flags = []string{"--deep-iteration", "--print-data-log"}
			}
			compareDumpZeroTail(t, tl, dumpCase{files: []string{f}, flags: flags})
			calls++
		}
	}
	t.Logf("%d DumpLogSegments calls compared", calls)
	// Kafka's tool prints the barrier as a control record of a type it
	// does not know.
	barrierLog := filepath.Join(barrierDir, "00000000000000000000.log")
	out, err := tl.Dump([]string{barrierLog}, "--deep-iteration")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "isControl: true") || !strings.Contains(out, "controlType: UNKNOWN(7)") {
		t.Errorf("DumpLogSegments on the barrier:\n%s", out)
	}

	// The move, step by step as README.md gives it. The partitions of the
	// cleanly stopped serve and the library's go into one log directory
	// of the broker, which keeps its clean-shutdown marker: Kafka trusts
	// them and loads partlog's producer snapshots. The SIGKILLed serve's
	// go into another, without the marker: Kafka recovers them.
	// (Step 1, stopping partlog, is servePartitions'.)
	// 2. Create each topic on Kafka with partlog's partition count and
	//    configs (Kafka gives it a topic id of its own).
	b := in.StartBroker(t, kafka.BrokerConfig{LogDirs: 2})
	// The barrier's partition twice: trusted, and recovered by Kafka
	// ("k-barrier", in the log directory without the marker).
	barrierTopic := loadTopic{name: "barrier", committed: 6, all: 6}
	recoveredBarrier := loadTopic{name: "k-barrier", committed: 6, all: 6}
	topics = append(topics, barrierTopic, recoveredBarrier)
	srcDirs[recoveredBarrier.name], ends[recoveredBarrier.name] = barrierDir, ends["barrier"]
	for _, tp := range topics {
		if err := b.CreateTopic(tp.name, 1, tp.configs); err != nil {
			t.Fatal(err)
		}
	}
	// 3. Stop the broker cleanly.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	recoveryPoints := map[kafka.TopicPartition]int64{{Topic: "barrier"}: ends["barrier"]}
	logStarts := map[kafka.TopicPartition]int64{}
	for _, dir := range []string{cleanDir, killedDir} {
		for file, m := range map[string]map[kafka.TopicPartition]int64{kafka.RecoveryPointCheckpoint: recoveryPoints, kafka.LogStartCheckpoint: logStarts} {
			entries, err := kafka.ReadCheckpoint(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			for tp, v := range entries {
				m[tp] = v
			}
		}
	}
	for _, tp := range topics {
		logDir := b.LogDirs[0]
		if strings.HasPrefix(tp.name, "k-") {
			logDir = b.LogDirs[1]
		}
		if err := b.MovePartition(tp.name, 0, logDir); err != nil {
			t.Fatal(err)
		}
		// 4. Replace the files of each partition directory Kafka made
		//    with partlog's, keeping Kafka's partition.metadata.
		if err := b.PlacePartition(tp.name, 0, srcDirs[tp.name]); err != nil {
			t.Fatal(err)
		}
		// 5. Give the partition partlog's recovery point and log start
		//    (partlog's recovery-point-offset-checkpoint and
		//    log-start-offset-checkpoint) in Kafka's checkpoint files.
		key := kafka.TopicPartition{Topic: tp.name}
		for file, m := range map[string]map[kafka.TopicPartition]int64{kafka.RecoveryPointCheckpoint: recoveryPoints, kafka.LogStartCheckpoint: logStarts} {
			v, ok := m[key]
			if err := b.SetCheckpoint(file, tp.name, 0, v, ok); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 5. The log directory of a crashed partlog's partitions loses its
	//    clean-shutdown marker: Kafka then recovers them.
	if err := b.SetCleanShutdownIn(b.LogDirs[1], false); err != nil {
		t.Fatal(err)
	}
	// 6. Start the broker.
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		if _, err := b.WaitLeaders(tp.name, 1, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		start, end, err := b.ListOffsets(tp.name, []int32{0})
		if err != nil {
			t.Fatal(err)
		}
		if tp.name == "c-codecs" && start[0] != 5 {
			t.Errorf("%s: Kafka's log start %d, partlog's 5", tp.name, start[0])
		}
		if end[0] != ends[tp.name] {
			t.Errorf("%s: Kafka's log end %d, partlog's %d", tp.name, end[0], ends[tp.name])
		}
		if tp.name == barrierTopic.name || tp.name == recoveredBarrier.name {
			continue
		}
		for _, iso := range tp.isolationLevels() {
			got := consoleConsume(t, tl, b.Addr, tp, iso)
			if want := outs[tp.name+" "+iso]; got != want {
				t.Errorf("%s %s: Kafka's ConsoleConsumer differs at %s", tp.name, iso, firstDiff(want, got))
			}
		}
	}
	// Kafka loads the barrier's partition and its consumers skip the
	// barrier as a control record: the records around it, at their
	// offsets (the barrier is offset 3).
	for _, iso := range []string{"read_committed", "read_uncommitted"} {
		got := consoleConsume(t, tl, b.Addr, barrierTopic, iso)
		var offsets []string
		for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
			f := strings.Fields(l)
			offsets = append(offsets, f[1])
		}
		if strings.Join(offsets, " ") != "Offset:0 Offset:1 Offset:2 Offset:4 Offset:5 Offset:6" {
			t.Errorf("barrier %s: offsets %v\n%s", iso, offsets, got)
		}
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	// Kafka's producer state, in the snapshot its clean stop wrote at the
	// log end, is partlog's: in particular the barrier's partition has no
	// producer of before the barrier (Kafka took partlog's snapshot, which
	// holds the reset, and replayed nothing below it).
	for _, tp := range topics {
		k := snapshotProducers(t, tl, b.PartitionDir(tp.name, 0), ends[tp.name])
		if k == nil {
			k = []producerEntry{}
		}
		if tp.name == recoveredBarrier.name {
			// Recovering, Kafka rebuilt producer state from the batches
			// and skipped the barrier it does not know: the producer of
			// before it is back (README.md says to avoid this).
			if len(k) != 1 || k[0].ProducerID != 4000 {
				t.Errorf("%s: Kafka's producers %+v, want producer 4000 back", tp.name, k)
			}
			continue
		}
		if p := partlogProducers(t, srcDirs[tp.name]); !reflect.DeepEqual(k, p) {
			t.Errorf("%s: producers:\n  Kafka   %+v\n  partlog %+v", tp.name, k, p)
		}
	}
	_ = os.RemoveAll(work)
}
