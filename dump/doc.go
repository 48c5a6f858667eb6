// Package dump reads the files of a Kafka partition directory as Apache
// Kafka's kafka-dump-log (DumpLogSegments) does and prints them, the
// library under `partlog dump`: Read builds one model of a file (File),
// and two renderers print it, Text as kafka-dump-log's lines (formats.md
// §7) and WriteJSON as one JSON object a file. Nothing is written to the
// files read.
//
// Kinds read, by extension: .log segments; .index and .timeindex
// (checked against the .log beside them); .txnindex; producer .snapshot
// files; KRaft snapshots (<end offset>-<epoch>.checkpoint and
// bootstrap.checkpoint, read as record batches).
//
// JSON: field names are lower camel case; integers are JSON numbers; byte
// strings (record keys and values) are UTF-8 text when the bytes are valid
// UTF-8 and standard base64 (RFC 4648, padded) otherwise, with
// "keyEncoding"/"valueEncoding" saying which ("utf8" or "base64"); a null
// key or value is JSON null and has no encoding field.
//
// Problem kinds (File.Problems, "problems"[].kind):
//
//	io                 the file (or a sibling it needs) could not be read
//	crc                a v2 batch or legacy message fails its CRC check
//	framing            an entry of a .log cannot be framed or parsed; the
//	                   dump stops there and "invalidBytes" follows
//	invalidBytes       bytes after the last complete entry of a .log
//	records            the records of a batch cannot be decoded
//	control            a control record's key or value is invalid
//	decoder            the chosen decoder fails on a record (Kafka's tool
//	                   dies there)
//	nonConsecutiveOffsets  a record offset is not previous+1 (deep
//	                   iteration); compaction leaves gaps, so only an
//	                   offset that goes back is damage (File.Failed)
//	indexMismatch      .index entry whose batch has another last offset
//	unreadableEntry    .index entry pointing at no readable batch
//	offsetNotFound     .timeindex entry whose offset is not a batch's last offset
//	timestampMismatch  .timeindex timestamp differs from the batch's max timestamp
//	timestampOrder     .timeindex timestamp not above the previous entry's
//	unreadableLog      the .log could not be read where a .timeindex entry points
//	partialEntry       bytes after the last whole index entry
//	sanity             --index-sanity-check failed
//	corruptEntry       a .txnindex entry is invalid (or partial)
//	corrupt            a .snapshot fails validation
//	name               a .checkpoint's name is not a KRaft snapshot's
//
// The text keeps stdout to kafka-dump-log's lines: a problem it does not
// show there (a bad CRC is its isvalid: false, the invalid tail its
// "Found N invalid bytes" line, the index mismatches and non-consecutive
// offsets its trailer) goes to stderr as a "partlog: <path>: …" line.
package dump
