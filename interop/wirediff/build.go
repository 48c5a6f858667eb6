package wirediff

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batch describes a record batch a script produces. Producer names the
// producer whose id and epoch an earlier step saved (SavePID); empty is
// a plain batch. The bytes are built per target, so that each broker
// gets its own producer id and everything else identical.
type Batch struct {
	Producer    string
	Epoch       *int16 // instead of the saved epoch
	PID         *int64 // instead of the saved id
	Seq         int32  // base sequence (ignored without a producer)
	Txn         bool
	Compression batch.Compression
	// Records are the records (values "v0".."vn-1" when only N is set).
	Records []batch.RecordSpec
	N       int
	// TsDelta is added to the script's T0 for every record's timestamp
	// (record i gets T0+TsDelta+i).
	TsDelta int64
	// Spec changes the header before the batch is built; Bytes changes
	// the built batch (Fix: the CRC is recomputed after Bytes).
	Spec  func(s *batch.BatchSpec)
	Bytes func(b []byte) []byte
	Fix   bool
	// Deltas gives the records' offset deltas (the header's last offset
	// delta stays len(records)-1).
	Deltas []int32
}

// Int16 and Int64 return pointers, for Batch.Epoch and Batch.PID.
func Int16(v int16) *int16 { return &v }
func Int64(v int64) *int64 { return &v }

// Build encodes the batch for e's target.
func (b Batch) Build(e *Env) []byte {
	spec := batch.NewBatchSpec(0)
	if b.Producer != "" {
		spec.ProducerID = e.Get(b.Producer + ".pid")
		spec.ProducerEpoch = int16(e.Get(b.Producer + ".epoch"))
		spec.BaseSequence = b.Seq
	}
	if b.PID != nil {
		spec.ProducerID = *b.PID
	}
	if b.Epoch != nil {
		spec.ProducerEpoch = *b.Epoch
	}
	spec.Transactional = b.Txn
	spec.Compression = b.Compression
	recs := b.Records
	if recs == nil {
		for i := 0; i < max(b.N, 1); i++ {
			recs = append(recs, batch.RecordSpec{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
		}
	}
	recs = append([]batch.RecordSpec(nil), recs...)
	for i := range recs {
		if recs[i].Timestamp == 0 {
			recs[i].Timestamp = e.T0 + b.TsDelta + int64(i)
		}
	}
	if b.Spec != nil {
		b.Spec(&spec)
	}
	var bld batch.Builder
	if b.Deltas != nil {
		bld.ExplicitOffsetDeltas = true
		for i := range recs {
			recs[i].OffsetDelta = b.Deltas[i]
		}
		spec.LastOffsetDelta, spec.HasLastOffsetDelta = int32(len(recs)-1), true
	}
	out, err := bld.AppendBatch(nil, &spec, recs)
	if err != nil {
		panic(fmt.Sprintf("wirediff: building a batch: %v", err))
	}
	if b.Bytes != nil {
		out = b.Bytes(out)
	}
	if b.Fix && len(out) >= batch.HeaderSize {
		binary.BigEndian.PutUint32(out[batch.OffCRC:], batch.Checksum(out[batch.OffAttributes:]))
	}
	return out
}

// Batches concatenates batches (several in one partition's records).
func Batches(e *Env, bs ...Batch) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b.Build(e)...)
	}
	return out
}

// PP is one partition's records in a produce request.
type PP struct {
	Topic     string
	Partition int32
	Batches   []Batch
	Raw       func(e *Env) []byte // instead of Batches (nil bytes: a null records field)
}

// Produce is a produce request.
type Produce struct {
	Version int16
	Acks    int16
	Timeout int32
	TxnID   *string
	Parts   []PP
}

// Req builds the request for e.
func (p Produce) Req(e *Env) kmsg.Request {
	r := kmsg.NewPtrProduceRequest()
	r.Version = p.Version
	r.Acks = p.Acks
	r.TimeoutMillis = p.Timeout
	if r.TimeoutMillis == 0 {
		r.TimeoutMillis = 10000
	}
	r.TransactionID = p.TxnID
	for _, pp := range p.Parts {
		t := topicEntry(&r.Topics, pp.Topic, func(t *kmsg.ProduceRequestTopic) string { return t.Topic },
			func(name string) kmsg.ProduceRequestTopic {
				t := kmsg.NewProduceRequestTopic()
				t.Topic = name
				t.TopicID, _ = e.topicID(name)
				return t
			})
		part := kmsg.NewProduceRequestTopicPartition()
		part.Partition = pp.Partition
		if pp.Raw != nil {
			part.Records = pp.Raw(e)
		} else {
			part.Records = Batches(e, pp.Batches...)
		}
		t.Partitions = append(t.Partitions, part)
	}
	return r
}

// topicID returns the id the target gave a topic (learnt from an
// earlier answer).
func (e *Env) topicID(name string) ([16]byte, bool) {
	var out [16]byte
	for id, n := range e.topicIDs {
		if n != name {
			continue
		}
		if b, err := hex.DecodeString(strings.TrimPrefix(id, "id:")); err == nil && len(b) == 16 {
			copy(out[:], b)
			return out, true
		}
	}
	return out, false
}

// Str returns a pointer to s.
func Str(s string) *string { return &s }

// FP is one partition of a fetch.
type FP struct {
	Topic       string
	Partition   int32
	Offset      int64
	MaxBytes    int32 // default 1 MiB
	LeaderEpoch int32 // current leader epoch; default -1
	LogStart    int64
}

// Fetch is a fetch request.
type Fetch struct {
	Version   int16
	Isolation int8
	MaxBytes  int32 // default 50 MiB
	MinBytes  int32
	MaxWait   int32
	Parts     []FP
	// EpochSet: LeaderEpoch fields are taken as given (else -1).
	EpochSet bool
}

// Req builds the request for e.
func (f Fetch) Req(e *Env) kmsg.Request {
	r := kmsg.NewPtrFetchRequest()
	r.Version = f.Version
	r.ReplicaID = -1
	r.MaxWaitMillis = f.MaxWait
	r.MinBytes = f.MinBytes
	r.MaxBytes = f.MaxBytes
	if r.MaxBytes == 0 {
		r.MaxBytes = 50 << 20
	}
	r.IsolationLevel = f.Isolation
	r.SessionEpoch = -1
	for _, fp := range f.Parts {
		t := topicEntry(&r.Topics, fp.Topic, func(t *kmsg.FetchRequestTopic) string { return t.Topic },
			func(name string) kmsg.FetchRequestTopic {
				t := kmsg.NewFetchRequestTopic()
				t.Topic = name
				t.TopicID, _ = e.topicID(name)
				return t
			})
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = fp.Partition
		p.FetchOffset = fp.Offset
		p.PartitionMaxBytes = fp.MaxBytes
		if p.PartitionMaxBytes == 0 {
			p.PartitionMaxBytes = 1 << 20
		}
		p.CurrentLeaderEpoch = -1
		if f.EpochSet {
			p.CurrentLeaderEpoch = fp.LeaderEpoch
		}
		p.LogStartOffset = -1
		t.Partitions = append(t.Partitions, p)
	}
	return r
}

// LP is one partition of a ListOffsets request.
type LP struct {
	Topic       string
	Partition   int32
	Timestamp   int64
	LeaderEpoch *int32
}

// ListOffsets is a ListOffsets request.
type ListOffsets struct {
	Version   int16
	Isolation int8
	Parts     []LP
}

// Req builds the request.
func (l ListOffsets) Req(e *Env) kmsg.Request {
	r := kmsg.NewPtrListOffsetsRequest()
	r.Version = l.Version
	r.ReplicaID = -1
	r.IsolationLevel = l.Isolation
	for _, lp := range l.Parts {
		t := topicEntry(&r.Topics, lp.Topic, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic },
			func(name string) kmsg.ListOffsetsRequestTopic {
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = name
				return t
			})
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition = lp.Partition
		p.Timestamp = lp.Timestamp
		p.CurrentLeaderEpoch = -1
		if lp.LeaderEpoch != nil {
			p.CurrentLeaderEpoch = *lp.LeaderEpoch
		}
		p.MaxNumOffsets = 1
		t.Partitions = append(t.Partitions, p)
	}
	return r
}

// topicEntry returns the entry of *topics named name, appending the one
// add makes when there is none: a request lists each topic once, with
// all its partitions.
func topicEntry[T any](topics *[]T, name string, nameOf func(*T) string, add func(name string) T) *T {
	for i := range *topics {
		if nameOf(&(*topics)[i]) == name {
			return &(*topics)[i]
		}
	}
	*topics = append(*topics, add(name))
	return &(*topics)[len(*topics)-1]
}

// Int32 returns a pointer to v.
func Int32(v int32) *int32 { return &v }

// CreateTopic is a CreateTopics request for one topic.
func CreateTopic(version int16, name string, partitions int32, configs map[string]string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.Version = version
		r.TimeoutMillis = 30000
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = name
		t.NumPartitions = partitions
		t.ReplicationFactor = -1
		for _, k := range sortedKeys(configs) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name = k
			v := configs[k]
			c.Value = &v
			t.Configs = append(t.Configs, c)
		}
		r.Topics = append(r.Topics, t)
		return r
	}
}

// Metadata is a Metadata request for topics (nil: all).
func Metadata(version int16, autoCreate bool, topics ...string) func(*Env) kmsg.Request {
	return func(*Env) kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		r.Version = version
		r.AllowAutoTopicCreation = autoCreate
		if topics != nil {
			r.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, t := range topics {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = Str(t)
			r.Topics = append(r.Topics, mt)
		}
		return r
	}
}

// InitPID is an InitProducerId request. Producer names where Save keeps
// the answer; KIP360 sends the producer's current id and epoch.
type InitPID struct {
	Version  int16
	TxnID    *string
	Timeout  int32
	Producer string
	KIP360   bool
	PID      *int64 // explicit id and epoch to send
	Epoch    *int16
}

// Req builds the request.
func (i InitPID) Req(e *Env) kmsg.Request {
	r := kmsg.NewPtrInitProducerIDRequest()
	r.Version = i.Version
	r.TransactionalID = i.TxnID
	r.TransactionTimeoutMillis = i.Timeout
	if r.TransactionTimeoutMillis == 0 {
		r.TransactionTimeoutMillis = 60000
	}
	if i.KIP360 {
		r.ProducerID = e.Get(i.Producer + ".pid")
		r.ProducerEpoch = int16(e.Get(i.Producer + ".epoch"))
	}
	if i.PID != nil {
		r.ProducerID = *i.PID
	}
	if i.Epoch != nil {
		r.ProducerEpoch = *i.Epoch
	}
	return r
}

// SavePID keeps an InitProducerId (or EndTxn v5) answer's id and epoch
// under name, when it carries no error.
func SavePID(name string) func(e *Env, r kmsg.Response) {
	return func(e *Env, r kmsg.Response) {
		switch x := r.(type) {
		case *kmsg.InitProducerIDResponse:
			if x.ErrorCode == 0 {
				e.Set(name+".pid", x.ProducerID)
				e.Set(name+".epoch", int64(x.ProducerEpoch))
			}
		case *kmsg.EndTxnResponse:
			if x.ErrorCode == 0 && x.ProducerID >= 0 {
				e.Set(name+".pid", x.ProducerID)
				e.Set(name+".epoch", int64(x.ProducerEpoch))
			}
		}
	}
}

// AddParts is an AddPartitionsToTxn request (v0-3: the client's form).
type AddParts struct {
	Version  int16
	TxnID    string
	Producer string
	Epoch    *int16
	Topic    string
	Parts    []int32
}

// Req builds the request.
func (a AddParts) Req(e *Env) kmsg.Request {
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.Version = a.Version
	r.TransactionalID = a.TxnID
	r.ProducerID = e.Get(a.Producer + ".pid")
	r.ProducerEpoch = int16(e.Get(a.Producer + ".epoch"))
	if a.Epoch != nil {
		r.ProducerEpoch = *a.Epoch
	}
	t := kmsg.NewAddPartitionsToTxnRequestTopic()
	t.Topic = a.Topic
	t.Partitions = a.Parts
	r.Topics = append(r.Topics, t)
	return r
}

// EndTxn is an EndTxn request.
type EndTxn struct {
	Version  int16
	TxnID    string
	Producer string
	Epoch    *int16
	Commit   bool
}

// Req builds the request.
func (x EndTxn) Req(e *Env) kmsg.Request {
	r := kmsg.NewPtrEndTxnRequest()
	r.Version = x.Version
	r.TransactionalID = x.TxnID
	r.ProducerID = e.Get(x.Producer + ".pid")
	r.ProducerEpoch = int16(e.Get(x.Producer + ".epoch"))
	if x.Epoch != nil {
		r.ProducerEpoch = *x.Epoch
	}
	r.Commit = x.Commit
	return r
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
