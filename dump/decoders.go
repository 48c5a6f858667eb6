package dump

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// This file holds the record decoders of `partlog dump`, chosen by
// kafka-dump-log's flags: --offsets-decoder (__consumer_offsets),
// --transaction-log-decoder (__transaction_state), --cluster-metadata-decoder
// (__cluster_metadata and KRaft snapshots) and --key-decoder-class /
// --value-decoder-class (Kafka's Decoder classes). Each turns a record's
// key and value into the text kafka-dump-log prints after "key:" and
// "payload:"; a nil result prints nothing. They never fail: bytes they
// cannot decode are described in the text, as Kafka's tool does.

// Decoder renders a record's key and value as kafka-dump-log prints them
// after "key:" and "payload:"; a nil result prints nothing.
type Decoder interface {
	Decode(offset int64, key, value []byte) (k, v *string)
}

// NewDecoder returns the decoder kafka-dump-log's flags choose: the topic
// decoders take precedence over the classes (offsets, then transaction
// log, then cluster metadata); keyClass and valueClass are Kafka's Decoder
// class names (see lookupDecoderClass).
func NewDecoder(offsets, txnLog, clusterMetadata bool, keyClass, valueClass string) (Decoder, error) {
	switch {
	case offsets:
		return offsetsDecoder{}, nil
	case txnLog:
		return txnLogDecoder{}, nil
	case clusterMetadata:
		return metadataDecoder{}, nil
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

// stringDecoder is kafka-dump-log's decoder when none is chosen:
// StringDecoder for keys and values.
var stringDecoder Decoder = classDecoder{key: javaUTF8, value: javaUTF8}

func strp(s string) *string { return &s }

// classDecoder applies one Decoder class to keys and another to values
// (kafka-dump-log without a topic decoder).
type classDecoder struct{ key, value bytesDecoder }

func (d classDecoder) Decode(_ int64, key, value []byte) (k, v *string) {
	if key != nil {
		k = strp(d.key(key))
	}
	if value != nil {
		v = strp(d.value(value))
	}
	return k, v
}

// bytesDecoder is one of Kafka's Decoder classes.
type bytesDecoder func([]byte) string

// decoderClasses maps the class names kafka-dump-log accepts (the old
// Scala kafka.serializer ones, the org.apache.kafka.tools.api ones of
// Kafka 3.7+, and their short names) to their meaning.
var decoderClasses = map[string]bytesDecoder{
	"StringDecoder":  javaUTF8,
	"DefaultDecoder": rawBytes,
	"IntegerDecoder": intDecoder,
	"LongDecoder":    longDecoder,
}

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
// about the bytes; partlog writes the bytes themselves.
func rawBytes(b []byte) string { return string(b) }

// intDecoder is IntegerDecoder: the first 4 bytes as a big-endian int32.
func intDecoder(b []byte) string {
	if len(b) < 4 {
		return fmt.Sprintf("<%d bytes: too short for IntegerDecoder>", len(b))
	}
	return strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(b))), 10)
}

// longDecoder is LongDecoder: the first 8 bytes as a big-endian int64.
func longDecoder(b []byte) string {
	if len(b) < 8 {
		return fmt.Sprintf("<%d bytes: too short for LongDecoder>", len(b))
	}
	return strconv.FormatInt(int64(binary.BigEndian.Uint64(b)), 10)
}

// readVersion reads the int16 version that prefixes coordinator keys and
// values.
func readVersion(b []byte) (int16, []byte, bool) {
	if len(b) < 2 {
		return 0, nil, false
	}
	return int16(binary.BigEndian.Uint16(b)), b[2:], true
}

// offsetsDecoder decodes __consumer_offsets records as kafka-dump-log's
// --offsets-decoder does (Kafka 3.x/4.x): key {"type":"<key version>",
// "data":{…}}, value {"version":"<value version>","data":{…}} or
// <DELETE> for a tombstone. Key versions 0 and 1 are offset commits, 2
// group metadata; the group metadata of the "consumer" protocol has each
// member's subscription and assignment decoded. Other key versions (the
// records of KIP-848 groups) are printed as unknown record types.
type offsetsDecoder struct{}

func (offsetsDecoder) Decode(offset int64, key, value []byte) (k, v *string) {
	if key == nil {
		return strp(fmt.Sprintf("Failed to decode message at offset %d using offset topic decoder (message had a missing key)", offset)), nil
	}
	kv, kb, ok := readVersion(key)
	if !ok {
		return strp(fmt.Sprintf("Error at offset %d, skipping. Could not read the version of the key", offset)), nil
	}
	var ks, vs *kSchema
	switch kv {
	case 0, 1:
		ks, vs = &schemaOffsetCommitKey, &schemaOffsetCommitValue
	case 2:
		ks, vs = &schemaGroupMetadataKey, &schemaGroupMetadataValue
	default:
		return strp(fmt.Sprintf("Unknown record type %d at offset %d, skipping.", kv, offset)), nil
	}
	kvals, err := decodeMessage(ks, kb, kv, false)
	if err != nil {
		return strp(fmt.Sprintf("Error at offset %d, skipping. Could not read record with version %d from key: %v", offset, kv, err)), nil
	}
	var sb strings.Builder
	sb.WriteString(`{"type":"`)
	sb.WriteString(strconv.Itoa(int(kv)))
	sb.WriteString(`","data":`)
	writeJSON(&sb, ks.fields, kvals, kv, nil)
	sb.WriteByte('}')
	k = strp(sb.String())
	if value == nil {
		return k, strp("<DELETE>")
	}
	vv, vb, ok := readVersion(value)
	if !ok {
		return strp(fmt.Sprintf("Error at offset %d, skipping. Could not read the version of the value", offset)), nil
	}
	vvals, err := decodeMessage(vs, vb, vv, false)
	if err != nil {
		return strp(fmt.Sprintf("Error at offset %d, skipping. Could not read record with version %d from value: %v", offset, vv, err)), nil
	}
	var hook jsonHook
	if vs == &schemaGroupMetadataValue && len(vvals) > 0 && vvals[0].s == "consumer" && !vvals[0].null {
		hook = consumerProtocolHook
	}
	sb.Reset()
	sb.WriteString(`{"version":"`)
	sb.WriteString(strconv.Itoa(int(vv)))
	sb.WriteString(`","data":`)
	writeJSON(&sb, vs.fields, vvals, vv, hook)
	sb.WriteByte('}')
	return k, strp(sb.String())
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

// txnLogDecoder decodes __transaction_state records as kafka-dump-log's
// --transaction-log-decoder does: key
// "transaction_metadata::transactionalId=<id>", value
// "producerId:…,producerEpoch:…,state=…,partitions=[t-0,…],
// txnLastUpdateTimestamp=…,txnTimeoutMs=…" or <DELETE>. Kafka prints the
// partitions from a hash set; partlog prints them in file order.
type txnLogDecoder struct{}

func (txnLogDecoder) Decode(offset int64, key, value []byte) (k, v *string) {
	kv, kb, ok := readVersion(key)
	if !ok {
		return strp(fmt.Sprintf("Error at offset %d, skipping. Could not read the version of the key", offset)), nil
	}
	if !schemaTransactionLogKey.valid.has(kv) {
		return strp(fmt.Sprintf("unknown::version=%d", kv)), nil
	}
	kvals, err := decodeMessage(&schemaTransactionLogKey, kb, kv, false)
	if err != nil {
		return strp(fmt.Sprintf("Error at offset %d, skipping. %v", offset, err)), nil
	}
	k = strp("transaction_metadata::transactionalId=" + kvals[0].s)
	if value == nil {
		return k, strp("<DELETE>")
	}
	vv, vb, ok := readVersion(value)
	if !ok {
		return k, strp(fmt.Sprintf("Error at offset %d, skipping. Could not read the version of the value", offset))
	}
	if !schemaTransactionLogValue.valid.has(vv) {
		return k, strp(fmt.Sprintf("Error at offset %d, skipping. Unknown version %d from the transaction log message value", offset, vv))
	}
	vals, err := decodeMessage(&schemaTransactionLogValue, vb, vv, false)
	if err != nil {
		return k, strp(fmt.Sprintf("Error at offset %d, skipping. %v", offset, err))
	}
	field := func(name string) kValue {
		for i, f := range schemaTransactionLogValue.fields {
			if f.name == name {
				return vals[i]
			}
		}
		return kValue{}
	}
	stateID := field("transactionStatus").i
	if stateID < 0 || int(stateID) >= len(transactionStates) {
		return k, strp(fmt.Sprintf("Error at offset %d, skipping. Unknown transaction state id %d from the transaction status message", offset, stateID))
	}
	state := transactionStates[stateID]
	var parts []string
	if state != "Empty" {
		for _, e := range field("transactionPartitions").elems {
			if len(e.fields) < 2 {
				continue
			}
			for _, p := range e.fields[1].elems {
				parts = append(parts, e.fields[0].s+"-"+strconv.FormatInt(p.i, 10))
			}
		}
	}
	return k, strp(fmt.Sprintf("producerId:%d,producerEpoch:%d,state=%s,partitions=[%s],txnLastUpdateTimestamp=%d,txnTimeoutMs=%d",
		field("producerId").i, field("producerEpoch").i, state, strings.Join(parts, ","),
		field("transactionLastUpdateTimestampMs").i, field("transactionTimeoutMs").i))
}

// metadataDecoder decodes KRaft metadata records (__cluster_metadata and
// snapshots) as kafka-dump-log's --cluster-metadata-decoder does: no key,
// value {"type":"<MetadataRecordType>","version":N,"data":{…}}. A record
// type partlog has no schema for is printed as
// {"type":"UNKNOWN(<id>)","version":N} rather than failing.
type metadataDecoder struct{}

func (metadataDecoder) Decode(offset int64, _, value []byte) (k, v *string) {
	return nil, strp(decodeMetadataRecord(offset, value))
}

func decodeMetadataRecord(offset int64, value []byte) string {
	if value == nil {
		return fmt.Sprintf("Error at %d, skipping. The record has no value", offset)
	}
	r := &msgReader{b: value}
	frame := r.uvarint()
	typ := r.uvarint()
	ver := r.uvarint()
	if r.err != nil {
		return fmt.Sprintf("Error at %d, skipping. %v", offset, r.err)
	}
	if frame != 1 {
		return fmt.Sprintf("Error at %d, skipping. Could not deserialize metadata record due to unknown frame version %d (only frame version 1 is supported)", offset, frame)
	}
	if ver > 0x7fff {
		return fmt.Sprintf("Error at %d, skipping. Version %d does not fit in an int16", offset, ver)
	}
	t, ok := metadataRecordTypes[typ]
	if !ok {
		return fmt.Sprintf(`{"type":"UNKNOWN(%d)","version":%d}`, typ, ver)
	}
	if !t.schema.valid.has(int16(ver)) {
		return fmt.Sprintf(`{"type":"%s","version":%d}`, t.name, ver)
	}
	vals, err := decodeMessage(t.schema, value[r.pos:], int16(ver), true)
	if err != nil {
		return fmt.Sprintf("Error at %d, skipping. Failed to deserialize record with type %d: %v", offset, typ, err)
	}
	var sb strings.Builder
	sb.WriteString(`{"type":"`)
	sb.WriteString(t.name)
	sb.WriteString(`","version":`)
	sb.WriteString(strconv.Itoa(int(ver)))
	sb.WriteString(`,"data":`)
	writeJSON(&sb, t.schema.fields, vals, int16(ver), nil)
	sb.WriteByte('}')
	return sb.String()
}
