package dump

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// Test encoders for Kafka protocol primitives.

func uv(b []byte, u uint32) []byte {
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

func i16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func i32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func i64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// cstr appends a compact string; str a classic (int16-length) one.
func cstr(b []byte, s string) []byte { return append(uv(b, uint32(len(s)+1)), s...) }
func str(b []byte, s string) []byte  { return append(i16(b, int16(len(s))), s...) }

// meta starts a metadata record: frame version 1, type, version.
func meta(typ, ver uint32) []byte { return uv(uv(uv(nil, 1), typ), ver) }

func uuid(b []byte, fill byte) []byte {
	for i := 0; i < 16; i++ {
		b = append(b, fill)
	}
	return b
}

// mb builds a message field by field.
type mb []byte

func (m mb) u(v uint32) mb   { return uv(m, v) }
func (m mb) i8(v int8) mb    { return append(m, byte(v)) }
func (m mb) i32(v int32) mb  { return i32(m, v) }
func (m mb) i64(v int64) mb  { return i64(m, v) }
func (m mb) id(fill byte) mb { return uuid(m, fill) }
func (m mb) b() []byte       { return m }

// TestJavaUTF8 checks javaUTF8 against what OpenJDK 17's
// new String(bytes, UTF_8) printed for each input (hex), including the
// sequences where Java groups replacements unlike Unicode's rule.
func TestJavaUTF8(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want string
	}{
		{"", ""},
		{"706c61696e", "plain"},
		{"eda741", "\uFFFDA"},
		{"eda080", "\uFFFD"},
		{"e08080", "\uFFFD\uFFFD\uFFFD"},
		{"f4908080", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"c0af", "\uFFFD\uFFFD"},
		{"8080", "\uFFFD\uFFFD"},
		{"c3", "\uFFFD"},
		{"e282", "\uFFFD"},
		{"e28241", "\uFFFDA"},
		{"f09f98", "\uFFFD"},
		{"f09f9841", "\uFFFDA"},
		{"eda0", "\uFFFD"},
		{"edbfbf", "\uFFFD"},
		{"f0808080", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"f48fbfbf", "\U0010FFFF"},
		{"f5", "\uFFFD"},
		{"ff41", "\uFFFDA"},
		{"e0a0", "\uFFFD"},
		{"e09f80", "\uFFFD\uFFFD\uFFFD"},
		{"c2", "\uFFFD"},
		{"c241", "\uFFFDA"},
		{"efbfbf", "\uFFFF"},
		{"f8888080", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"ed9fbf", "\uD7FF"},
		{"e08041", "\uFFFD\uFFFDA"},
		{"ed8041", "\uFFFDA"},
		{"f09f41", "\uFFFDA"},
		{"f0", "\uFFFD"},
		{"f09f", "\uFFFD"},
		{"f5808080", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"f7bfbfbf", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"e0a041", "\uFFFDA"},
		{"f08f8080", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"c3a9e282ac", "\u00E9\u20AC"},
		{"f0908080", "\U00010000"},
	} {
		in, err := hex.DecodeString(tc.hex)
		if err != nil {
			t.Fatal(err)
		}
		if got := javaUTF8(in); got != tc.want {
			t.Errorf("javaUTF8(%s) = %+q, Java says %+q", tc.hex, got, tc.want)
		}
	}
}

func TestMetadataDecoder(t *testing.T) {
	tagged := func(b []byte, fields ...[]byte) []byte { // fields: tag, then body
		b = uv(b, uint32(len(fields)/2))
		for i := 0; i < len(fields); i += 2 {
			b = uv(b, uint32(fields[i][0]))
			b = uv(b, uint32(len(fields[i+1])))
			b = append(b, fields[i+1]...)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"TopicRecord", uv(uuid(cstr(meta(2, 0), "orders"), 0xfb), 0),
			`{"type":"TOPIC_RECORD","version":0,"data":{"name":"orders","topicId":"-_v7-_v7-_v7-_v7-_v7-w"}}`},
		{"PartitionRecord v0", mb(meta(3, 0)).i32(2).id(1).u(2).i32(4).u(1).u(1).u(1).i32(1).i32(5).i32(7).u(0).b(),
			`{"type":"PARTITION_RECORD","version":0,"data":{"partitionId":2,"topicId":"AQEBAQEBAQEBAQEBAQEBAQ","replicas":[4],"isr":[],"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":5,"partitionEpoch":7}}`},
		{"RegisterBrokerRecord v0", mb(meta(0, 0)).i32(1).id(0).i64(12).u(1).u(1).u(0).i8(1).u(0).b(),
			`{"type":"REGISTER_BROKER_RECORD","version":0,"data":{"brokerId":1,"incarnationId":"AAAAAAAAAAAAAAAAAAAAAA","brokerEpoch":12,"endPoints":[],"features":[],"rack":null,"fenced":true}}`},
		{"FeatureLevelRecord", uv(i16(cstr(meta(12, 0), "metadata.version"), 14), 0),
			`{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":14}}`},
		{"ProducerIdsRecord", uv(i64(i64(i32(meta(15, 0), 1), 3), 5000), 0),
			`{"type":"PRODUCER_IDS_RECORD","version":0,"data":{"brokerId":1,"brokerEpoch":3,"nextProducerId":5000}}`},
		{"ConfigRecord null value", uv(uv(cstr(cstr(append(meta(4, 0), 2), "orders"), "retention.ms"), 0), 0),
			`{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":2,"resourceName":"orders","name":"retention.ms","value":null}}`},
		{"PartitionChangeRecord defaults", uv(uuid(i32(meta(5, 0), 0), 0), 0),
			`{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}`},
		{"PartitionChangeRecord tagged", tagged(uuid(i32(meta(5, 0), 3), 0), []byte{0}, []byte{1}, []byte{1}, i32(nil, 2)),
			`{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":3,"topicId":"AAAAAAAAAAAAAAAAAAAAAA","isr":[],"leader":2}}`},
		{"BrokerRegistrationChangeRecord", tagged(i64(i32(meta(17, 0), 1), 12), []byte{0}, []byte{0xff}),
			`{"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":0,"data":{"brokerId":1,"brokerEpoch":12,"fenced":-1}}`},
		{"FenceBrokerRecord", uv(i64(i32(meta(7, 0), 2), 9), 0),
			`{"type":"FENCE_BROKER_RECORD","version":0,"data":{"id":2,"epoch":9}}`},
		{"UnfenceBrokerRecord", uv(i64(i32(meta(8, 0), 2), 9), 0),
			`{"type":"UNFENCE_BROKER_RECORD","version":0,"data":{"id":2,"epoch":9}}`},
		{"RemoveTopicRecord", uv(uuid(meta(9, 0), 0xff), 0),
			`{"type":"REMOVE_TOPIC_RECORD","version":0,"data":{"topicId":"_____________________w"}}`},
		{"NoOpRecord", uv(meta(20, 0), 0), `{"type":"NO_OP_RECORD","version":0,"data":{}}`},
		{"unknown tag skipped", tagged(meta(20, 0), []byte{9}, []byte{1, 2, 3}), `{"type":"NO_OP_RECORD","version":0,"data":{}}`},
		{"unknown type", append(meta(99, 4), 1, 2, 3), "Error at 42, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 99"},
		// A version above the schema's is read as Kafka reads it, with
		// the fields of the versions they name.
		{"later version", uv(uuid(cstr(meta(2, 7), "orders"), 0xfb), 0),
			`{"type":"TOPIC_RECORD","version":7,"data":{"name":"orders","topicId":"-_v7-_v7-_v7-_v7-_v7-w"}}`},
		{"frame version 2", uv(uv(uv(nil, 2), 2), 0), "Error at 42, skipping. Could not deserialize metadata record due to unknown frame version 2(only frame version 1 is supported)"},
		{"frame version 0", uv(uv(uv(nil, 0), 2), 0), "Error at 42, skipping. Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release of KRaft in 2.8 to newer versions are not supported."},
		{"type too large", uv(uv(uv(nil, 1), 40000), 0), "Error at 42, skipping. Value for type was too large."},
		{"garbage after", append(uv(meta(20, 0), 0), 0), "Error at 42, skipping. Found 1 byte(s) of garbage after 20"},
		{"truncated", cstr(meta(2, 0), "orders"), "Error at 42, skipping. Failed to deserialize record with type 2"},
		{"truncated header", uv(nil, 1), "Error at 42, skipping. Error while reading type"},
		{"no value", nil, "Error at 42, skipping. Error while reading frame version"},
	} {
		if got := decodeMetadataRecord(42, tc.value); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestOffsetsDecoder(t *testing.T) {
	commitKey := i32(str(str(i16(nil, 1), "g"), "t"), 3)
	for _, tc := range []struct {
		name       string
		key, value []byte
		k, v       string // "" for nil
	}{
		{"offset commit v1", commitKey, i64(i64(str(i64(i16(nil, 1), 5), "meta"), 1000), 2000),
			`{"type":"1","data":{"group":"g","topic":"t","partition":3}}`,
			`{"version":"1","data":{"offset":5,"metadata":"meta","commitTimestamp":1000,"expireTimestamp":2000}}`},
		{"offset commit v3", commitKey, i64(str(i32(i64(i16(nil, 3), 5), 7), ""), 1000),
			`{"type":"1","data":{"group":"g","topic":"t","partition":3}}`,
			`{"version":"3","data":{"offset":5,"leaderEpoch":7,"metadata":"","commitTimestamp":1000}}`},
		{"tombstone", commitKey, nil, `{"type":"1","data":{"group":"g","topic":"t","partition":3}}`, "<DELETE>"},
		{"group with other protocol keeps bytes", str(i16(nil, 2), "g"),
			append(uv(uv(nil, 2), 0), 0), // placeholder, replaced below
			"", ""},
		{"unknown record type", i16(nil, 99), []byte{1}, "Unknown record type 99 at offset 9, skipping.", ""},
		{"short key", []byte{1}, nil, "Error at offset 9, skipping. Could not read version from key's buffer.", ""},
		{"truncated key", append(i16(nil, 1), 0, 5, 'g'), nil, "Error at offset 9, skipping. Could not read record with version 1 from key's buffer due to: malformed message: byte 2: group needs 5 bytes, 1 left.", ""},
		{"short value", commitKey, []byte{0}, "Error at offset 9, skipping. Could not read version from value's buffer.", ""},
		{"bad value version", commitKey, i16(nil, 9), "Error at offset 9, skipping. Found an unknown record version 9 for 1 type", ""},
	} {
		if tc.name == "group with other protocol keeps bytes" {
			// GroupMetadataValue v0, protocol type "connect": member bytes stay base64.
			v := str(i16(nil, 0), "connect")
			v = i32(v, 1)
			v = str(v, "p")
			v = str(v, "m")
			v = i32(v, 1)
			v = str(v, "m")
			v = str(v, "c")
			v = str(v, "h")
			v = i32(v, 10)
			v = append(i32(v, 2), 0xde, 0xad)
			v = i32(v, 0)
			tc.value = v
			tc.k = `{"type":"2","data":{"group":"g"}}`
			tc.v = `{"version":"0","data":{"protocolType":"connect","generation":1,"protocol":"p","leader":"m","members":[{"memberId":"m","clientId":"c","clientHost":"h","sessionTimeout":10,"subscription":"3q0=","assignment":""}]}}`
		}
		k, v, err := offsetsDecoder.Decode(9, tc.key, tc.value)
		if err != nil || deref(k) != tc.k || deref(v) != tc.v {
			t.Errorf("%s:\n got %q %q %v\nwant %q %q", tc.name, deref(k), deref(v), err, tc.k, tc.v)
		}
	}
	// A record without a key ends Kafka's tool.
	_, _, err := offsetsDecoder.Decode(9, nil, []byte{1})
	var ke *Exception
	if !errors.As(err, &ke) || ke.Line() != `Exception in thread "main" java.lang.RuntimeException: Failed to decode message at offset 9 using the specified decoder (message had a missing key)` {
		t.Errorf("missing key: %v", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestTxnLogDecoder(t *testing.T) {
	key := str(i16(nil, 0), "txn-1")
	const keyJSON = `{"type":"0","data":{"transactionalId":"txn-1"}}`
	v0 := func(state int8, parts bool) []byte {
		v := i64(i16(nil, 0), 4000)
		v = i16(v, 2)
		v = i32(v, 60000)
		v = append(v, byte(state))
		if parts {
			v = i32(v, 2)
			v = i32(str(v, "a"), 2)
			v = i32(i32(v, 0), 1)
			v = i32(str(v, "b"), 1)
			v = i32(v, 5)
		} else {
			v = i32(v, -1)
		}
		v = i64(v, 111)
		return i64(v, 100)
	}
	for _, tc := range []struct {
		name       string
		key, value []byte
		k, v       string
	}{
		{"ongoing", key, v0(1, true), keyJSON,
			`{"version":"0","data":{"producerId":4000,"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":"Ongoing","transactionPartitions":[{"topic":"a","partitionIds":[0,1]},{"topic":"b","partitionIds":[5]}],"transactionLastUpdateTimestampMs":111,"transactionStartTimestampMs":100}}`},
		{"empty, no partitions", key, v0(0, false), keyJSON,
			`{"version":"0","data":{"producerId":4000,"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":"Empty","transactionPartitions":null,"transactionLastUpdateTimestampMs":111,"transactionStartTimestampMs":100}}`},
		{"tombstone", key, nil, keyJSON, "<DELETE>"},
		{"unknown record type", i16(nil, 3), nil, "Unknown record type 3 at offset 7, skipping.", ""},
		{"unknown state prints its number", key, v0(42, false), keyJSON,
			`{"version":"0","data":{"producerId":4000,"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":"42","transactionPartitions":null,"transactionLastUpdateTimestampMs":111,"transactionStartTimestampMs":100}}`},
		{"unknown value version", key, i16(nil, 5), "Error at offset 7, skipping. Found an unknown record version 5 for 0 type", ""},
		{"truncated", key, v0(1, true)[:20], "Error at offset 7, skipping. Could not read record with version 0 from value's buffer due to: malformed message: byte 15: int32 needs 4 bytes, 3 left.", ""},
	} {
		k, v, err := txnLogDecoder.Decode(7, tc.key, tc.value)
		if err != nil || deref(k) != tc.k || deref(v) != tc.v {
			t.Errorf("%s:\n got %q %q %v\nwant %q %q", tc.name, deref(k), deref(v), err, tc.k, tc.v)
		}
	}
	// Version 1 (flexible): compact lengths and tagged fields.
	val := i64(i16(nil, 1), 4000)
	val = i16(val, 2)
	val = i32(val, 60000)
	val = append(val, 2)               // PrepareCommit
	val = uv(val, 2)                   // 1 entry
	val = cstr(val, "a")               // topic
	val = i32(uv(val, 2), 3)           // partitions [3]
	val = uv(val, 0)                   // entry tagged fields
	val = i64(i64(val, 111), 100)      // timestamps
	val = uv(val, 1)                   // one tagged field
	val = i64(uv(uv(val, 0), 8), 3999) // PreviousProducerId
	k, got, err := txnLogDecoder.Decode(7, key, val)
	if err != nil || deref(k) != keyJSON ||
		deref(got) != `{"version":"1","data":{"producerId":4000,"previousProducerId":3999,"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":"PrepareCommit","transactionPartitions":[{"topic":"a","partitionIds":[3]}],"transactionLastUpdateTimestampMs":111,"transactionStartTimestampMs":100}}` {
		t.Errorf("v1: %q %q %v", deref(k), deref(got), err)
	}
}

func TestDecoderClasses(t *testing.T) {
	for _, tc := range []struct {
		class string
		in    []byte
		want  string
	}{
		{"kafka.serializer.StringDecoder", []byte{'a', 0xff}, "a\uFFFD"},
		{"org.apache.kafka.tools.api.StringDecoder", []byte("x"), "x"},
		{"kafka.serializer.DefaultDecoder", []byte{'a', 0xff}, "a\xff"},
		{"org.apache.kafka.tools.api.IntegerDecoder", []byte{0xff, 0xff, 0xff, 0xfe, 9}, "-2"},
		{"org.apache.kafka.tools.api.IntegerDecoder", []byte{1}, "java.nio.BufferUnderflowException"},
		{"org.apache.kafka.tools.api.LongDecoder", i64(nil, 1<<40), "1099511627776"},
		{"LongDecoder", nil, "java.nio.BufferUnderflowException"},
	} {
		d, err := lookupDecoderClass(tc.class)
		if err != nil {
			t.Fatalf("%s: %v", tc.class, err)
		}
		got, err := d(tc.in)
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s(% x) = %q, want %q", tc.class, tc.in, got, tc.want)
		}
	}
	if _, err := lookupDecoderClass("com.example.MyDecoder"); err == nil {
		t.Error("unknown class accepted")
	}
}

func FuzzMetadataRecord(f *testing.F) {
	f.Add(uv(meta(20, 0), 0))
	f.Add(uv(uuid(cstr(meta(2, 0), "orders"), 1), 0))
	f.Add(mb(meta(3, 0)).i32(2).id(1).u(2).i32(4).u(1).u(1).u(1).i32(1).i32(5).i32(7).u(0).b())
	f.Add([]byte{1, 0, 3, 0xff, 0xff, 0xff, 0xff, 0x0f})
	data, err := os.ReadFile("../cmd/partlog/testdata/realkafka/nomanazeem+Kafka-java/kafka-logs/bootstrap.checkpoint")
	if err == nil {
		f.Add(data[len(data)/2:])
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		s := decodeMetadataRecord(0, value)
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 output %q", s)
		}
	})
}

func FuzzOffsetsRecord(f *testing.F) {
	f.Add(i32(str(str(i16(nil, 1), "g"), "t"), 3), i64(i64(str(i64(i16(nil, 1), 5), "meta"), 1000), 2000))
	f.Add(str(i16(nil, 2), "g"), []byte{0, 3, 0, 8, 'c', 'o', 'n', 's', 'u', 'm', 'e', 'r'})
	f.Add([]byte{0, 2}, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		k, v, err := offsetsDecoder.Decode(0, key, value)
		if err == nil && (k == nil || !utf8.ValidString(*k) || (v != nil && !utf8.ValidString(*v))) {
			t.Fatalf("bad output %v %v", k, v)
		}
		// The consumer protocol hook on its own.
		var sb strings.Builder
		consumerProtocolHook(&sb, &kField{name: "subscription", typ: kBytes}, kValue{typ: kBytes, bytes: value})
		consumerProtocolHook(&sb, &kField{name: "assignment", typ: kBytes}, kValue{typ: kBytes, bytes: key})
	})
}

func FuzzTxnLogRecord(f *testing.F) {
	f.Add(str(i16(nil, 0), "txn"), i64(i64(i32(append(i32(i16(i64(i16(nil, 0), 1), 0), 10), 1), -1), 5), 6))
	f.Add([]byte{0, 1}, []byte{0, 1, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		for _, d := range []coordinatorDecoder{txnLogDecoder, shareStateDecoder} {
			k, v, err := d.Decode(0, key, value)
			if err == nil && (k == nil || !utf8.ValidString(*k) || (v != nil && !utf8.ValidString(*v))) {
				t.Fatalf("bad output %v %v", k, v)
			}
		}
	})
}

func FuzzDecoderClasses(f *testing.F) {
	f.Add([]byte{0xe2, 0x82, 'A', 0xff})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte("00000000000000000712-0000000003.checkpoint"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := javaUTF8(b)
		if !utf8.ValidString(s) {
			t.Fatalf("javaUTF8(% x) = %q: not UTF-8", b, s)
		}
		if utf8.Valid(b) && s != string(b) {
			t.Fatalf("valid UTF-8 changed")
		}
		_, _ = intDecoder(b)
		_, _ = longDecoder(b)
		// The KRaft snapshot name parser: whatever it accepts prints back
		// to the same name.
		if id, ok := ParseKRaftSnapshotName(string(b)); ok && !id.Bootstrap {
			if got := fmt.Sprintf("%020d-%010d.checkpoint", id.EndOffset, id.Epoch); got != string(b) {
				t.Fatalf("%q parsed as %+v", b, id)
			}
		}
	})
}

// FuzzKMessage decodes arbitrary bytes with every schema and version.
func FuzzKMessage(f *testing.F) {
	f.Add(uint8(0), int16(0), []byte{0})
	f.Add(uint8(3), int16(0), mb(nil).i32(2).id(1).u(2).i32(4).u(1).u(1).u(1).i32(1).i32(5).i32(7).u(0).b())
	var schemas []*kSchema
	for _, t := range metadataRecordTypes {
		schemas = append(schemas, t.schema)
	}
	for _, types := range []map[int16]coordinatorRecordType{groupRecordTypes, transactionRecordTypes, shareRecordTypes} {
		for _, t := range types {
			schemas = append(schemas, t.key, t.value)
		}
	}
	schemas = append(schemas, &schemaConsumerProtocolSubscription, &schemaConsumerProtocolAssignment)
	// Map order changes between runs; the fuzzer's "which" must not.
	sort.Slice(schemas, func(i, j int) bool { return schemas[i].name < schemas[j].name })
	f.Fuzz(func(t *testing.T, which uint8, version int16, data []byte) {
		s := schemas[int(which)%len(schemas)]
		vals, err := decodeMessage(s, data, version, which%2 == 0)
		if err != nil {
			return
		}
		var sb strings.Builder
		writeJSON(&sb, s.fields, vals, version, nil)
		if !utf8.ValidString(sb.String()) {
			t.Fatalf("invalid UTF-8 JSON")
		}
	})
}

// TestParseKRaftSnapshotName: Kafka's snapshot names (20 digits, '-', 10
// digits) and bootstrap.checkpoint, nothing else.
func TestParseKRaftSnapshotName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
		id   KRaftSnapshotName
	}{
		{"bootstrap.checkpoint", true, KRaftSnapshotName{Bootstrap: true}},
		{"00000000000000000000-0000000000.checkpoint", true, KRaftSnapshotName{}},
		{"09223372036854775807-2147483647.checkpoint", true, KRaftSnapshotName{EndOffset: math.MaxInt64, Epoch: math.MaxInt32}},
		{"99999999999999999999-0000000000.checkpoint", false, KRaftSnapshotName{}},
		{"00000000000000000000-9999999999.checkpoint", false, KRaftSnapshotName{}},
		{"0000000000000000000a-0000000000.checkpoint", false, KRaftSnapshotName{}},
		{"00000000000000000000_0000000000.checkpoint", false, KRaftSnapshotName{}},
		{"00000000000000000000-0000000000.checkpoint.deleted", false, KRaftSnapshotName{}},
	} {
		id, ok := ParseKRaftSnapshotName(tc.name)
		if ok != tc.ok || id != tc.id {
			t.Errorf("%s: got %+v %v", tc.name, id, ok)
		}
	}
}
