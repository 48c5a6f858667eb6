package dump

import (
	"encoding/json"

	"github.com/partlog/partlog/batch"
)

// SchemaVersion is the value of File.SchemaVersion ("schemaVersion" in
// JSON); it changes only when a field changes meaning or disappears.
const SchemaVersion = 1

// File is what was read of one file: the model both renderers print
// (Text as kafka-dump-log's lines, JSON as one object per file, its fields
// named by their tags). Fields tagged json:"-" are what only the text needs.
type File struct {
	// SchemaVersion is always SchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// File is the path as given on the command line.
	File string `json:"file"`
	// Kind is log, index, timeindex, txnindex, snapshot (a producer
	// snapshot) or kraftSnapshot.
	Kind string `json:"kind"`
	// Bootstrap is true for bootstrap.checkpoint (kind kraftSnapshot).
	Bootstrap bool `json:"bootstrap,omitempty"`
	// SnapshotEndOffset and SnapshotEpoch are the end offset and epoch in
	// a KRaft snapshot's name (kind kraftSnapshot, not bootstrap).
	SnapshotEndOffset *int64 `json:"snapshotEndOffset,omitempty"`
	SnapshotEpoch     *int32 `json:"snapshotEpoch,omitempty"`
	// BaseOffset is the offset in the file name (the segment's base offset,
	// or a snapshot's offset); absent if the name holds none.
	BaseOffset *int64 `json:"baseOffset,omitempty"`
	// Batches are the entries of a .log file in file order (kind log only).
	Batches []Batch `json:"batches,omitzero"`
	// InvalidBytes describes the bytes after the last complete entry of a
	// .log file; absent when there are none or --max-bytes was given.
	InvalidBytes *InvalidBytes `json:"invalidBytes,omitempty"`
	// SanityCheck is the result of --index-sanity-check (index, timeindex).
	SanityCheck *Sanity `json:"sanityCheck,omitempty"`
	// Entries are the index entries: []OffsetEntry (index),
	// []TimeEntry (timeindex) or []TxnEntry (txnindex). Absent with
	// --index-sanity-check and --verify-index-only.
	Entries any `json:"entries,omitempty"`
	// Producers are the entries of a .snapshot file in file order.
	Producers []Producer `json:"producers,omitzero"`
	// Problems lists everything wrong found in the file; [] when none.
	Problems []Problem `json:"problems"`

	// Empty: an offset index without a whole entry ("<path> is empty.").
	Empty bool `json:"-"`
	// SanityErr is why --index-sanity-check failed.
	SanityErr error `json:"-"`
	// Exception is where Kafka's tool dies on this file (Kafka's index
	// sanity check failing, a record its decoder cannot read): the text
	// stops there and returns it.
	Exception *Exception `json:"-"`
	// Pairs are the reports kafka-dump-log prints in its trailer.
	Pairs Pairs `json:"-"`
	// SnapshotError is a corrupt producer snapshot's failure as Kafka
	// words it.
	SnapshotError string `json:"-"`
}

// Problem is one finding about a file: {"position", "kind", "detail"}.
// The kinds are listed in the package documentation.
type Problem struct {
	// Position is the byte position in the file of the batch or entry
	// concerned, or -1 for the file as a whole.
	Position int64 `json:"position"`
	// Kind classifies the problem.
	Kind string `json:"kind"`
	// Detail describes it in words.
	Detail string `json:"detail"`
}

// Pairs are the (a, b) pairs kafka-dump-log reports in its trailer, each
// list in the order it prints them.
type Pairs struct {
	IndexMismatch  [][2]int64 // offset index: (index offset, log offset)
	TimeMismatch   [][2]int64 // time index: (index timestamp, log timestamp)
	TimeOrder      [][2]int64 // time index: (index timestamp, previous timestamp)
	TimeNotFound   [][2]int64 // time index: (indexed offset, found log offset or -1)
	NonConsecutive [][2]int64 // .log: (offset, the next record's offset)
}

// InvalidBytes locates the invalid tail of a .log file.
type InvalidBytes struct {
	Position int64 `json:"position"`
	Count    int64 `json:"count"`
	// Zero: every one of them is zero, the unwritten (preallocated)
	// tail of an active segment; not a problem then.
	Zero bool `json:"zero,omitempty"`
}

// Sanity is the outcome of --index-sanity-check; a failure is also
// listed in problems.
type Sanity struct {
	Passed bool `json:"passed"`
}

// Batch is one entry of a .log file: a v2 batch (V2Header fields
// present) or a legacy magic 0/1 message (LegacyHeader fields present).
type Batch struct {
	// Position is the byte position of the entry in the file.
	Position int64 `json:"position"`
	// Size is the entry's size in bytes (12 + length field).
	Size  int  `json:"size"`
	Magic int8 `json:"magic"`
	// BaseOffset and LastOffset are the batch's first and last offsets; for
	// a compressed legacy wrapper, the first and last inner offsets.
	BaseOffset int64 `json:"baseOffset"`
	LastOffset int64 `json:"lastOffset"`
	// CRC is the stored checksum; CRCValid says whether it matches.
	CRC      uint32 `json:"crc"`
	CRCValid bool   `json:"crcValid"`
	// Attributes is the raw attributes field (int16 for v2, int8 legacy).
	Attributes    int16  `json:"attributes"`
	Compression   string `json:"compression"`
	TimestampType string `json:"timestampType"`
	*V2Header
	*LegacyHeader
	// Records are present with --deep-iteration (or --print-data-log).
	Records []Record `json:"records,omitzero"`
}

// V2Header holds the v2 batch header fields not in Batch
// (formats.md §1.1).
type V2Header struct {
	BatchLength          int32 `json:"batchLength"`
	PartitionLeaderEpoch int32 `json:"partitionLeaderEpoch"`
	IsTransactional      bool  `json:"isTransactional"`
	IsControl            bool  `json:"isControl"`
	// DeleteHorizonMs is the base timestamp when attribute bit 6 is set,
	// else null.
	DeleteHorizonMs *int64 `json:"deleteHorizonMs"`
	LastOffsetDelta int32  `json:"lastOffsetDelta"`
	BaseTimestamp   int64  `json:"baseTimestamp"`
	MaxTimestamp    int64  `json:"maxTimestamp"`
	ProducerID      int64  `json:"producerId"`
	ProducerEpoch   int16  `json:"producerEpoch"`
	BaseSequence    int32  `json:"baseSequence"`
	LastSequence    int32  `json:"lastSequence"`
	RecordsCount    int32  `json:"recordsCount"`
}

// LegacyHeader holds the fields of a legacy (magic 0/1) outer message.
type LegacyHeader struct {
	// Timestamp is the outer message's timestamp, -1 for magic 0.
	Timestamp int64 `json:"timestamp"`
	KeySize   int32 `json:"keySize"`
	ValueSize int32 `json:"valueSize"`
}

// Record is one record of a batch (or one legacy message).
type Record struct {
	Offset    int64 `json:"offset"`
	Timestamp int64 `json:"timestamp"`
	KeySize   int   `json:"keySize"`
	ValueSize int   `json:"valueSize"`
	// Sequence and HeaderKeys are present for v2 records only.
	Sequence   *int32   `json:"sequence,omitempty"`
	HeaderKeys []string `json:"headerKeys,omitzero"`
	// CRC and CRCValid are present for legacy messages only.
	CRC      *uint32 `json:"crc,omitempty"`
	CRCValid *bool   `json:"crcValid,omitempty"`
	// Key and Value are null when null; see the file comment for encodings.
	Key           *string `json:"key"`
	KeyEncoding   string  `json:"keyEncoding,omitempty"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"valueEncoding,omitempty"`
	// KeyText and ValueText are present when the encoding is base64.
	KeyText   *string `json:"keyText,omitempty"`
	ValueText *string `json:"valueText,omitempty"`
	// DecodedKey and DecodedValue are present with a decoder flag.
	DecodedKey   *string `json:"decodedKey,omitempty"`
	DecodedValue *string `json:"decodedValue,omitempty"`
	// Control is present for records of control batches.
	Control *Control `json:"control,omitempty"`
	// DecodeFailed: the decoder failed on the record (a "decoder"
	// problem), where Kafka's tool dies.
	DecodeFailed bool `json:"-"`

	// key and value are the record's bytes for the text's decoder, valid
	// only while Read's callback has the batch (they may alias a buffer
	// the next batch reuses).
	key, value []byte
}

// Control is the decoded key and value of a control record
// (formats.md §3). Exactly one of CoordinatorEpoch (ABORT, COMMIT),
// MirrorPidReset (type 7), JSON (KRaft types 2–6) or Error is present,
// or none for an unknown type.
type Control struct {
	// Type is the control type from the key, -1 if the key is invalid.
	Type int16 `json:"type"`
	// TypeName is Kafka's name of the type, UNKNOWN or INVALID.
	TypeName         string                `json:"typeName"`
	CoordinatorEpoch *int32                `json:"coordinatorEpoch,omitempty"`
	MirrorPidReset   *batch.MirrorPidReset `json:"mirrorPidReset,omitempty"`
	// JSON is the value as Kafka's generated JSON converter prints it.
	JSON  json.RawMessage `json:"json,omitempty"`
	Error string          `json:"error,omitempty"`
}

// OffsetEntry is one .index entry with its offset made absolute.
type OffsetEntry struct {
	Offset   int64 `json:"offset"`
	Position int32 `json:"position"`
}

// TimeEntry is one .timeindex entry with its offset made absolute.
type TimeEntry struct {
	Timestamp int64 `json:"timestamp"`
	Offset    int64 `json:"offset"`
}

// TxnEntry is one .txnindex entry (AbortedTxn).
type TxnEntry struct {
	Version          int16 `json:"version"`
	ProducerID       int64 `json:"producerId"`
	FirstOffset      int64 `json:"firstOffset"`
	LastOffset       int64 `json:"lastOffset"`
	LastStableOffset int64 `json:"lastStableOffset"`
}

// Producer is one producer entry of a .snapshot file, with the stored
// values (-1 where the file has -1), plus FirstSequence when the entry has
// batch metadata (lastOffset >= 0).
type Producer struct {
	ProducerID            int64  `json:"producerId"`
	ProducerEpoch         int16  `json:"producerEpoch"`
	LastSequence          int32  `json:"lastSequence"`
	LastOffset            int64  `json:"lastOffset"`
	OffsetDelta           int32  `json:"offsetDelta"`
	Timestamp             int64  `json:"timestamp"`
	CoordinatorEpoch      int32  `json:"coordinatorEpoch"`
	CurrentTxnFirstOffset int64  `json:"currentTxnFirstOffset"`
	FirstSequence         *int32 `json:"firstSequence,omitempty"`
}
