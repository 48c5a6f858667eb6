package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/partlog/partlog/batch"
)

// record is one record of a test segment.
type record struct{ key, value []byte }

// writeSegment writes a .log holding one batch of the records.
func writeSegment(t *testing.T, path string, recs ...record) {
	t.Helper()
	var b batch.Builder
	spec := batch.NewBatchSpec(0)
	var rs []batch.RecordSpec
	for _, r := range recs {
		rs = append(rs, batch.RecordSpec{Timestamp: 1, Key: r.key, Value: r.value})
	}
	data, err := b.AppendBatch(nil, &spec, rs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDumpPayloadUTF8 checks that keys and values are printed as UTF-8
// with U+FFFD for invalid bytes, in the text output and in JSON (keyText,
// valueText beside the base64 bytes).
func TestDumpPayloadUTF8(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "00000000000000000000.log")
	writeSegment(t, path, record{key: []byte{'k', 0xff}, value: []byte{'v', 0xe2, 0x82, 'x'}})
	code, out, errOut := runCLI(t, "", "dump", "--print-data-log", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "key: k\uFFFD payload: v\uFFFDx") || !utf8.ValidString(out) {
		t.Errorf("text output:\n%s", out)
	}
	code, out, _ = runCLI(t, "", "dump", "--json", "--print-data-log", path)
	if code != exitOK {
		t.Fatalf("json exit %d", code)
	}
	for _, want := range []string{`"keyEncoding":"base64"`, `"keyText":"k` + "\uFFFD" + `"`, `"valueText":"v` + "\uFFFD" + `x"`} {
		if !strings.Contains(out, want) {
			t.Errorf("json output lacks %s:\n%s", want, out)
		}
	}
}

// TestDumpKRaftBootstrapCheckpoint dumps the real bootstrap.checkpoint of a
// Kafka 3.6 KRaft node as kafka-dump-log does.
func TestDumpKRaftBootstrapCheckpoint(t *testing.T) {
	path := "testdata/realkafka/Jeong-Rae+KafkaDemo/kraft-combined-logs/bootstrap.checkpoint"
	code, out, errOut := runCLI(t, "", "dump", "--cluster-metadata-decoder", "--files", path)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []string{
		"Dumping " + path,
		"KRaft bootstrap snapshot",
		"baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1699944366126 size: 83 magic: 2 compresscodec: none crc: 75126618 isvalid: true",
		`| offset: 0 CreateTime: 1699944366126 keySize: 4 valueSize: 11 sequence: -1 headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}`,
		"baseOffset: 1 lastOffset: 1 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 83 CreateTime: 1699944366193 size: 91 magic: 2 compresscodec: none crc: 1101407464 isvalid: true",
		`| offset: 1 CreateTime: 1699944366193 keySize: -1 valueSize: 23 sequence: -1 headerKeys: [] payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":14}}`,
		"baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 174 CreateTime: 1699944366201 size: 75 magic: 2 compresscodec: none crc: 3300878323 isvalid: true",
		`| offset: 2 CreateTime: 1699944366201 keySize: 4 valueSize: 3 sequence: -1 headerKeys: [] SnapshotFooter {"version":0}`,
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDumpKRaftSnapshotName checks the end offset and epoch printed from a
// snapshot's name, the JSON fields, and a .checkpoint whose name is not a
// snapshot's.
func TestDumpKRaftSnapshotName(t *testing.T) {
	data, err := os.ReadFile("testdata/realkafka/Jeong-Rae+KafkaDemo/kraft-combined-logs/bootstrap.checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	snap := filepath.Join(dir, "00000000000000000712-0000000003.checkpoint")
	odd := filepath.Join(dir, "712-3.checkpoint")
	for _, p := range []string{snap, odd} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := runCLI(t, "", "dump", snap)
	if code != exitOK || !strings.Contains(out, "\nSnapshot end offset: 712, epoch: 3\nbaseOffset: 0 ") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "dump", "--json", snap)
	if code != exitOK || !strings.Contains(out, `"kind":"kraftSnapshot","snapshotEndOffset":712,"snapshotEpoch":3,"batches":[`) {
		t.Errorf("json exit %d:\n%s", code, out)
	}
	code, out, errOut := runCLI(t, "", "dump", odd)
	if code != exitProblems || !strings.Contains(errOut, "not a KRaft snapshot name") || !strings.Contains(out, "isvalid: true") {
		t.Errorf("odd name: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestMetadataDecoderRealLog decodes every record of two real
// __cluster_metadata logs and checks records of each kind they hold.
func TestMetadataDecoderRealLog(t *testing.T) {
	path := "testdata/realkafka/nomanazeem+Kafka-java/kafka-logs/__cluster_metadata-0/00000000000000000000.log"
	code, out, errOut := runCLI(t, "", "dump", "--cluster-metadata-decoder", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "Error at") || strings.Contains(out, "UNKNOWN") {
		t.Errorf("undecoded records in a real metadata log")
	}
	for _, want := range []string{
		`payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"demo-topic","topicId":"S2kwl2mvSCasFtxUPkayPw"}}`,
		`payload: {"type":"PARTITION_RECORD","version":2,"data":{"partitionId":0,"topicId":"S2kwl2mvSCasFtxUPkayPw","replicas":[1],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":0,"partitionEpoch":0,"directories":["WvVzx-Xl3swcqvxXsPbjww"]}}`,
		`payload: {"type":"CONFIG_RECORD","version":0,"data":{"resourceType":4,"resourceName":"","name":"min.insync.replicas","value":"1"}}`,
		`payload: {"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":0,"data":{"brokerId":1,"brokerEpoch":12,"fenced":-1}}`,
		`payload: {"type":"PARTITION_CHANGE_RECORD","version":2,"data":{"partitionId":0,"topicId":"FPCMpfzhTqatNggLgXnlSg","isr":[],"leader":-1,"eligibleLeaderReplicas":[1],"lastKnownElr":[1]}}`,
		`payload: {"type":"BEGIN_TRANSACTION_RECORD","version":0,"data":{"name":"Bootstrap records"}}`,
		`payload: {"type":"END_TRANSACTION_RECORD","version":0,"data":{}}`,
		`payload: {"type":"NO_OP_RECORD","version":0,"data":{}}`,
		`"type":"REGISTER_BROKER_RECORD","version":3,"data":{"brokerId":1,"isMigratingZkBroker":false,"incarnationId":"16wlGcG8T8iH9qs3M5tUDg","brokerEpoch":12,"endPoints":[{"name":"PLAINTEXT","host":"localhost","port":9092,"securityProtocol":0}],`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	path = "testdata/realkafka/Jeong-Rae+KafkaDemo/kraft-combined-logs/__cluster_metadata-0/00000000000000000000.log"
	code, out, _ = runCLI(t, "", "dump", "--cluster-metadata-decoder", path)
	if code != exitOK || strings.Contains(out, "Error at") ||
		!strings.Contains(out, `payload: {"type":"ZK_MIGRATION_STATE_RECORD","version":0,"data":{"zkMigrationState":0}}`) {
		t.Errorf("exit %d; Kafka 3.6 metadata log not decoded", code)
	}
}

// TestDumpOffsetsDecoder: --offsets-decoder prints a real group metadata
// record as Kafka's tool does.
func TestDumpOffsetsDecoder(t *testing.T) {
	path := "testdata/realkafka/panic08+kafka-starter-windows/kafka-logs/__consumer_offsets-36/00000000000000000000.log"
	code, out, errOut := runCLI(t, "", "dump", "--offsets-decoder", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `| offset: 0 CreateTime: 1679678933489 keySize: 26 valueSize: 246 sequence: -1 headerKeys: [] key: {"type":"2","data":{"group":"console-consumer-73122"}} payload: {"version":"3","data":{"protocolType":"consumer","generation":1,"protocol":"range","leader":"console-consumer-f7c6c48f-55ba-4363-ae07-2d54283cf322","currentStateTimestamp":1679678933465,"members":[{"memberId":"console-consumer-f7c6c48f-55ba-4363-ae07-2d54283cf322","groupInstanceId":null,"clientId":"console-consumer","clientHost":"/192.168.56.1","rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":{"topics":["test"],"userData":null,"ownedPartitions":[],"generationId":-1,"rackId":null},"assignment":{"assignedPartitions":[{"topic":"test","partitions":[0]}],"userData":null}}]}}`
	if !strings.Contains(out, want+"\n") {
		t.Errorf("got:\n%s\nwant line:\n%s", out, want)
	}
}

// TestDumpDecoderClass: a decoder class implies --print-data-log, an
// unknown one is a usage error.
func TestDumpDecoderClass(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "00000000000000000000.log")
	writeSegment(t, path, record{key: binary.BigEndian.AppendUint32(nil, 7), value: []byte("v")})
	code, out, errOut := runCLI(t, "", "dump", "--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder", "--files", path)
	if code != exitOK || !strings.Contains(out, " key: 7 payload: v\n") {
		t.Errorf("a decoder class implies --print-data-log: exit %d:\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "", "dump", "--value-decoder-class", "com.example.MyDecoder", path)
	if code != exitUsage || !strings.Contains(errOut, "unknown decoder class") {
		t.Errorf("unknown class: exit %d: %s", code, errOut)
	}
}

// TestDumpFilesFlag checks kafka-dump-log's --files: a comma-separated
// list, given first, combined with FILE arguments; none at all is a usage
// error.
func TestDumpFilesFlag(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "00000000000000000000.log")
	b := filepath.Join(dir, "00000000000000000005.log")
	writeSegment(t, a, record{value: []byte("a")})
	writeSegment(t, b, record{value: []byte("b")})
	code, out, _ := runCLI(t, "", "dump", "--files", a+","+b, "--deep-iteration")
	if code != exitOK || strings.Count(out, "Dumping ") != 2 || strings.Index(out, a) > strings.Index(out, b) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "dump", "--files", a, b)
	if code != exitOK || strings.Count(out, "Dumping ") != 2 {
		t.Errorf("--files with an argument: exit %d:\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "", "dump"); code != exitUsage || !strings.Contains(errOut, "no file given") {
		t.Errorf("no file: exit %d: %s", code, errOut)
	}
}

// FuzzDumpKRaftSnapshot dumps hostile .checkpoint bytes through the whole
// text and JSON paths with the metadata decoder: never a panic, and the
// exit code is 0 or 4.
func FuzzDumpKRaftSnapshot(f *testing.F) {
	if data, err := os.ReadFile("testdata/realkafka/nomanazeem+Kafka-java/kafka-logs/bootstrap.checkpoint"); err == nil {
		f.Add(data)
		f.Add(data[:100])
	}
	f.Add([]byte{})
	dir := f.TempDir()
	path := filepath.Join(dir, "00000000000000000008-0000000001.checkpoint")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"dump", "--cluster-metadata-decoder", path},
			{"dump", "--json", "--cluster-metadata-decoder", path},
			{"dump", "--offsets-decoder", path},
		} {
			if code, _, errOut := runCLI(t, "", args...); code != exitOK && code != exitProblems {
				t.Fatalf("%v: exit %d: %s", args, code, errOut)
			}
		}
	})
}
