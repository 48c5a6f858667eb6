package dump

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file holds the record decoders of `partlog dump`, chosen by
// kafka-dump-log's flags: --offsets-decoder (__consumer_offsets),
// --transaction-log-decoder (__transaction_state),
// --share-group-state-decoder (__share_group_state),
// --cluster-metadata-decoder (__cluster_metadata and KRaft snapshots) and
// --key-decoder-class / --value-decoder-class (Kafka's Decoder classes).
// Each turns a record's key and value into the text Kafka 4.4's tool
// prints after "key:" and "payload:"; a nil result prints nothing. Bytes
// they cannot decode are described in the text, as Kafka's tool does,
// except where Kafka's tool dies (an *Exception).

// Decoder renders a record's key and value as kafka-dump-log prints them
// after "key:" and "payload:"; a nil result prints nothing. err is an
// *Exception for a record on which Kafka's tool dies.
type Decoder interface {
	Decode(offset int64, key, value []byte) (k, v *string, err error)
}

// NewDecoder returns the decoder kafka-dump-log's flags choose: the topic
// decoders take precedence over the classes (offsets, then transaction
// log, then cluster metadata, then share group state); keyClass and
// valueClass are Kafka's Decoder class names (see lookupDecoderClass).
func NewDecoder(offsets, txnLog, clusterMetadata, shareState bool, keyClass, valueClass string) (Decoder, error) {
	switch {
	case offsets:
		return offsetsDecoder, nil
	case txnLog:
		return txnLogDecoder, nil
	case clusterMetadata:
		return metadataDecoder{}, nil
	case shareState:
		return shareStateDecoder, nil
	}
	kd, err := lookupDecoderClass(keyClass)
	if err != nil {
		return nil, err
	}
	vd, err := lookupDecoderClass(valueClass)
	if err != nil {
		return nil, err
	}
	return classDecoder{key: kd, value: vd}, nil
}

func strp(s string) *string { return &s }

// classDecoder applies one Decoder class to keys and another to values
// (kafka-dump-log without a topic decoder).
type classDecoder struct{ key, value bytesDecoder }

func (d classDecoder) Decode(_ int64, key, value []byte) (k, v *string, err error) {
	if key != nil {
		s, err := d.key(key)
		if err != nil {
			return nil, nil, err
		}
		k = &s
	}
	if value != nil {
		s, err := d.value(value)
		if err != nil {
			return nil, nil, err
		}
		v = &s
	}
	return k, v, nil
}

// bytesDecoder is one of Kafka's Decoder classes; its error is the
// exception with which the class ends Kafka's tool.
type bytesDecoder func([]byte) (string, error)

// decoderClasses maps the class names kafka-dump-log accepts (the old
// Scala kafka.serializer ones, the org.apache.kafka.tools.api ones of
// Kafka 3.7+, and their short names) to their meaning.
var decoderClasses = map[string]bytesDecoder{
	"StringDecoder":  func(b []byte) (string, error) { return javaUTF8(b), nil },
	"DefaultDecoder": rawBytes,
	"IntegerDecoder": intDecoder,
	"LongDecoder":    longDecoder,
}

// stringDecoder is kafka-dump-log's decoder when none is chosen:
// StringDecoder for keys and values.
var stringDecoder Decoder = classDecoder{key: decoderClasses["StringDecoder"], value: decoderClasses["StringDecoder"]}

// lookupDecoderClass resolves a --key-decoder-class/--value-decoder-class
// argument.
func lookupDecoderClass(name string) (bytesDecoder, error) {
	short := name
	for _, p := range []string{"kafka.serializer.", "org.apache.kafka.tools.api."} {
		if s, ok := strings.CutPrefix(name, p); ok {
			short = s
			break
		}
	}
	if d, ok := decoderClasses[short]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("unknown decoder class %q (partlog knows kafka.serializer.StringDecoder, kafka.serializer.DefaultDecoder and org.apache.kafka.tools.api.{String,Default,Integer,Long}Decoder)", name)
}

// rawBytes is DefaultDecoder: the bytes as they are. Kafka's tool prints
// the JVM's identity of the byte array ("[B@1b6d3586"), which says nothing
// about the bytes and differs from run to run; partlog writes the bytes
// themselves (formats.md §7.7).
func rawBytes(b []byte) (string, error) { return string(b), nil }

// errBufferUnderflow is what Kafka's IntegerDecoder and LongDecoder throw
// for fewer bytes than they read.
var errBufferUnderflow = &Exception{Class: "java.nio.BufferUnderflowException"}

// intDecoder is IntegerDecoder: the first 4 bytes as a big-endian int32.
func intDecoder(b []byte) (string, error) {
	if len(b) < 4 {
		return "", errBufferUnderflow
	}
	return strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(b))), 10), nil
}

// longDecoder is LongDecoder: the first 8 bytes as a big-endian int64.
func longDecoder(b []byte) (string, error) {
	if len(b) < 8 {
		return "", errBufferUnderflow
	}
	return strconv.FormatInt(int64(binary.BigEndian.Uint64(b)), 10), nil
}

// readVersion reads the int16 version that prefixes coordinator keys and
// values.
func readVersion(b []byte) (int16, []byte, bool) {
	if len(b) < 2 {
		return 0, nil, false
	}
	return int16(binary.BigEndian.Uint16(b)), b[2:], true
}

// coordinatorRecordType is one record type of a coordinator's log: the
// schemas of its key and of its value (schemas.go).
type coordinatorRecordType struct{ key, value *kSchema }

// coordinatorDecoder decodes the records of a coordinator's log as Kafka
// 4.4's dump tool does (its CoordinatorRecordMessageParser): the key's
// int16 prefix is the record type, the value's its version; the key
// prints as {"type":"<type>","data":{…}}, the value as
// {"version":"<version>","data":{…}}, a tombstone as <DELETE>. A record
// the tool cannot read prints only a key that says why ("Unknown record
// type …", "Error at offset …"); a record without a key ends Kafka's tool
// (an *Exception).
type coordinatorDecoder struct {
	types map[int16]coordinatorRecordType
	// value, when set, returns a hook for a value's JSON (the group
	// coordinator decodes consumer-protocol bytes, the transaction
	// coordinator names transaction states).
	value func(s *kSchema, vals []kValue) jsonHook
}

// offsetsDecoder is --offsets-decoder (__consumer_offsets).
var offsetsDecoder = coordinatorDecoder{types: groupRecordTypes, value: groupValueHook}

// txnLogDecoder is --transaction-log-decoder (__transaction_state).
var txnLogDecoder = coordinatorDecoder{types: transactionRecordTypes, value: txnValueHook}

// shareStateDecoder is --share-group-state-decoder (__share_group_state).
var shareStateDecoder = coordinatorDecoder{types: shareRecordTypes}

func (d coordinatorDecoder) Decode(offset int64, key, value []byte) (k, v *string, err error) {
	if key == nil {
		return nil, nil, &Exception{Class: "java.lang.RuntimeException",
			Message: fmt.Sprintf("Failed to decode message at offset %d using the specified decoder (message had a missing key)", offset)}
	}
	skip := func(format string, args ...any) (*string, *string, error) {
		return strp(fmt.Sprintf("Error at offset %d, skipping. ", offset) + fmt.Sprintf(format, args...)), nil, nil
	}
	typ, kb, ok := readVersion(key)
	if !ok {
		return skip("Could not read version from key's buffer.")
	}
	rt, ok := d.types[typ]
	if !ok {
		return strp(fmt.Sprintf("Unknown record type %d at offset %d, skipping.", typ, offset)), nil, nil
	}
	// Kafka reads a key whatever its type says about versions: its
	// fields exist in version 0.
	kvals, kerr := decodeMessage(rt.key, kb, 0, false)
	if kerr != nil {
		return skip("Could not read record with version %d from key's buffer due to: %v.", typ, kerr)
	}
	var sb strings.Builder
	sb.WriteString(`{"type":"`)
	sb.WriteString(strconv.Itoa(int(typ)))
	sb.WriteString(`","data":`)
	writeJSON(&sb, rt.key.fields, kvals, 0, nil)
	sb.WriteByte('}')
	k = strp(sb.String())
	if value == nil {
		return k, strp("<DELETE>"), nil
	}
	ver, vb, ok := readVersion(value)
	if !ok {
		return skip("Could not read version from value's buffer.")
	}
	if !rt.value.valid.has(ver) {
		return skip("Found an unknown record version %d for %d type", ver, typ)
	}
	vvals, verr := decodeMessage(rt.value, vb, ver, false)
	if verr != nil {
		return skip("Could not read record with version %d from value's buffer due to: %v.", ver, verr)
	}
	var hook jsonHook
	if d.value != nil {
		hook = d.value(rt.value, vvals)
	}
	sb.Reset()
	sb.WriteString(`{"version":"`)
	sb.WriteString(strconv.Itoa(int(ver)))
	sb.WriteString(`","data":`)
	writeJSON(&sb, rt.value.fields, vvals, ver, hook)
	sb.WriteByte('}')
	return k, strp(sb.String()), nil
}

// groupValueHook decodes the subscription and assignment of the members
// of a "consumer" group's GroupMetadataValue.
func groupValueHook(s *kSchema, vals []kValue) jsonHook {
	if s == &schemaGroupMetadataValue && len(vals) > 0 && !vals[0].null && vals[0].s == "consumer" {
		return consumerProtocolHook
	}
	return nil
}

// consumerProtocolHook prints a consumer group member's subscription and
// assignment decoded (a version then the message); bytes that do not
// decode stay base64, as in Kafka's tool.
func consumerProtocolHook(sb *strings.Builder, f *kField, val kValue) bool {
	var s *kSchema
	switch f.name {
	case "subscription":
		s = &schemaConsumerProtocolSubscription
	case "assignment":
		s = &schemaConsumerProtocolAssignment
	default:
		return false
	}
	if val.null || f.typ != kBytes {
		return false
	}
	v, b, ok := readVersion(val.bytes)
	if !ok {
		return false
	}
	vals, err := decodeMessage(s, b, v, false)
	if err != nil {
		return false
	}
	writeJSON(sb, s.fields, vals, v, nil)
	return true
}

// transactionStates are Kafka's TransactionState names by id.
var transactionStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// txnValueHook prints a TransactionLogValue's transactionStatus as the
// state's name, or its number as a string for an unknown state, as
// Kafka's tool does.
func txnValueHook(s *kSchema, _ []kValue) jsonHook {
	if s != &schemaTransactionLogValue {
		return nil
	}
	return func(sb *strings.Builder, f *kField, val kValue) bool {
		if f.name != "transactionStatus" {
			return false
		}
		name := strconv.FormatInt(val.i, 10)
		if val.i >= 0 && int(val.i) < len(transactionStates) {
			name = transactionStates[val.i]
		}
		writeJSONString(sb, name)
		return true
	}
}

// metadataDecoder decodes KRaft metadata records (__cluster_metadata and
// snapshots) as kafka-dump-log's --cluster-metadata-decoder does: no key,
// value {"type":"<MetadataRecordType>","version":N,"data":{…}}, or
// "Error at <offset>, skipping. <why>".
type metadataDecoder struct{}

func (metadataDecoder) Decode(offset int64, _, value []byte) (k, v *string, err error) {
	return nil, strp(decodeMetadataRecord(offset, value)), nil
}

// decodeMetadataRecord renders one metadata record. As Kafka's reader
// (AbstractApiMessageSerde), it reads any version of a known type with
// the rules of the versions its fields name, and refuses bytes after the
// record.
func decodeMetadataRecord(offset int64, value []byte) string {
	skip := func(format string, args ...any) string {
		return fmt.Sprintf("Error at %d, skipping. ", offset) + fmt.Sprintf(format, args...)
	}
	// A record without a value reads as no bytes (Kafka's reader fails on
	// the frame version too).
	r := &msgReader{b: value}
	var head [3]uint32
	for i, what := range []string{"frame version", "type", "version"} {
		head[i] = r.uvarint()
		if r.err != nil {
			return skip("Error while reading %s", what)
		}
		if head[i] > math.MaxInt16 {
			return skip("Value for %s was too large.", what)
		}
		if i == 0 && head[0] == 0 {
			return skip("Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release of KRaft in 2.8 to newer versions are not supported.")
		}
		if i == 0 && head[0] != 1 {
			return skip("Could not deserialize metadata record due to unknown frame version %d(only frame version 1 is supported)", head[0])
		}
	}
	typ, ver := head[1], int16(head[2])
	t, ok := metadataRecordTypes[typ]
	if !ok {
		return skip("org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id %d", typ)
	}
	body := value[r.pos:]
	vals, n, err := decodeMessagePrefix(t.schema, body, ver)
	if err != nil {
		return skip("Failed to deserialize record with type %d", typ)
	}
	if left := len(body) - n; left > 0 {
		return skip("Found %d byte(s) of garbage after %d", left, typ)
	}
	var sb strings.Builder
	sb.WriteString(`{"type":"`)
	sb.WriteString(t.name)
	sb.WriteString(`","version":`)
	sb.WriteString(strconv.Itoa(int(ver)))
	sb.WriteString(`,"data":`)
	writeJSON(&sb, t.schema.fields, vals, ver, nil)
	sb.WriteByte('}')
	return sb.String()
}
