package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/spf13/cobra"
)

// dumpOptions are the flags of `partlog dump`, named as kafka-dump-log's.
type dumpOptions struct {
	deepIteration      bool
	printDataLog       bool
	skipRecordMetadata bool
	maxBytes           int64
	maxMessageSize     int
	mirrorFormat       bool
	referenceFormat    bool // deprecated: Apache Kafka's format is the default
	verifyIndexOnly    bool
	indexSanityCheck   bool
	strictSanity       bool
	offsets            offsetRange
	json               bool

	// kafka-dump-log's input and decoder flags.
	files             []string
	offsetsDecoder    bool
	txnLogDecoder     bool
	shareStateDecoder bool
	clusterMetadata   bool
	keyDecoderClass   string
	valueDecoderClass string
	decoder           recordDecoder // set by prepare
	customDecoder     bool          // a decoder flag was given

	trailer dumpTrailer // reports printed on stderr after all files
}

func (o *dumpOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.deepIteration, "deep-iteration", false, "print every record, not only batch headers")
	f.BoolVar(&o.printDataLog, "print-data-log", false, "print keys and values (implies --deep-iteration)")
	f.BoolVar(&o.skipRecordMetadata, "skip-record-metadata", false, "omit record metadata when printing data")
	f.Int64Var(&o.maxBytes, "max-bytes", -1, "read at most this many bytes of each .log file")
	f.IntVar(&o.maxMessageSize, "max-message-size", 5242880, "largest decompressed batch to decode")
	f.BoolVar(&o.mirrorFormat, "mirror-format", false, "print type-7 control records (MIRROR_PID_RESET barriers) as the dump tool of Kafka's mirroring fork (KIP-1279) does: MirrorPidReset {json}, instead of Apache Kafka 4.4's controlType: UNKNOWN(7)")
	f.BoolVar(&o.referenceFormat, "reference-format", false, "Apache Kafka's format, the default")
	_ = f.MarkHidden("reference-format")
	f.BoolVar(&o.verifyIndexOnly, "verify-index-only", false, "check .index and .timeindex entries against the .log without printing them")
	f.BoolVar(&o.indexSanityCheck, "index-sanity-check", false, "only run the sanity check of .index and .timeindex files")
	f.BoolVar(&o.strictSanity, "strict-sanity-check", false, "with --index-sanity-check: apply partlog's stricter check (the one recovery applies: no trailing zero entries, entries in order and inside the .log) instead of Kafka's, and report a failure on stderr without stopping")
	f.Var(&o.offsets, "offsets", "only print batches and index entries overlapping this inclusive offset range (either bound may be empty); .snapshot files are not filtered")
	f.BoolVar(&o.json, "json", false, "print one JSON object per file instead of kafka-dump-log's text (schemaVersion 1)")
	f.StringSliceVar(&o.files, "files", nil, "comma-separated files to dump (as kafka-dump-log's --files; FILE arguments may be given as well)")
	f.BoolVar(&o.offsetsDecoder, "offsets-decoder", false, "decode keys and values as __consumer_offsets records (implies --print-data-log)")
	f.BoolVar(&o.txnLogDecoder, "transaction-log-decoder", false, "decode keys and values as __transaction_state records (implies --print-data-log)")
	f.BoolVar(&o.shareStateDecoder, "share-group-state-decoder", false, "decode keys and values as __share_group_state records (implies --print-data-log)")
	f.BoolVar(&o.clusterMetadata, "cluster-metadata-decoder", false, "decode values as KRaft metadata records, printed as JSON (implies --print-data-log)")
	f.StringVar(&o.keyDecoderClass, "key-decoder-class", "org.apache.kafka.tools.api.StringDecoder", "Kafka Decoder class for keys: StringDecoder, DefaultDecoder (raw bytes), IntegerDecoder, LongDecoder of org.apache.kafka.tools.api (implies --print-data-log)")
	f.StringVar(&o.valueDecoderClass, "value-decoder-class", "org.apache.kafka.tools.api.StringDecoder", "Kafka Decoder class for values, as --key-decoder-class (implies --print-data-log)")
}

// prepare checks the flags after parsing and picks the record decoder.
// Like kafka-dump-log, any decoder flag implies --print-data-log, and the
// topic decoders take precedence over the classes (offsets, then
// transaction log, then cluster metadata, then share group state).
func (o *dumpOptions) prepare(cmd *cobra.Command) error {
	f := cmd.Flags()
	for _, name := range []string{"offsets-decoder", "transaction-log-decoder", "cluster-metadata-decoder", "share-group-state-decoder", "key-decoder-class", "value-decoder-class"} {
		if f.Changed(name) {
			o.printDataLog = true
			o.customDecoder = true
		}
	}
	switch {
	case o.offsetsDecoder:
		o.decoder = offsetsDecoder
	case o.txnLogDecoder:
		o.decoder = txnLogDecoder
	case o.clusterMetadata:
		o.decoder = metadataDecoder{}
	case o.shareStateDecoder:
		o.decoder = shareStateDecoder
	default:
		kd, err := lookupDecoderClass(o.keyDecoderClass)
		if err != nil {
			return err
		}
		vd, err := lookupDecoderClass(o.valueDecoderClass)
		if err != nil {
			return err
		}
		o.decoder = classDecoder{key: kd, value: vd}
	}
	return nil
}

func newDumpCommand(stdout, stderr io.Writer) *cobra.Command {
	var o dumpOptions
	cmd := &cobra.Command{
		Use:   "dump [flags] FILE...",
		Short: "Print the contents of .log files as kafka-dump-log does",
		Long:  dumpLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			files := append(append([]string(nil), o.files...), args...)
			if len(files) == 0 {
				return &exitError{code: exitUsage, err: errors.New("dump: no file given (FILE arguments or --files a,b,...)")}
			}
			if err := o.prepare(cmd); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if o.referenceFormat {
				fmt.Fprintln(stderr, "partlog: --reference-format is the default now (Apache Kafka's format); --mirror-format prints the mirroring fork's")
			}
			return o.run(files, stdout, stderr)
		},
	}
	o.addFlags(cmd)
	return cmd
}

func (o *dumpOptions) run(files []string, stdout, stderr io.Writer) error {
	if o.json {
		return o.runJSON(files, stdout, stderr)
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	o.trailer = dumpTrailer{}
	code := exitOK
	for _, path := range files {
		fmt.Fprintf(w, "Dumping %s\n", path)
		var problems bool
		var err error
		switch filepath.Ext(path) {
		case ".log":
			problems, err = o.dumpLog(w, stderr, path)
		case ".index":
			problems, err = o.dumpOffsetIndex(w, stderr, path)
		case ".timeindex":
			problems, err = o.dumpTimeIndex(w, stderr, path)
		case ".txnindex":
			problems, err = o.dumpTxnIndex(w, stderr, path)
		case ".snapshot":
			problems, err = o.dumpSnapshot(w, stderr, path)
		case ".checkpoint":
			problems, err = o.dumpKRaftSnapshot(w, stderr, path)
		default:
			w.Flush()
			fmt.Fprintf(stderr, "Ignoring unknown file %s\n", path)
		}
		var ke *kafkaException
		if errors.As(err, &ke) {
			// Kafka's tool dies here: no further file, no trailer.
			w.Flush()
			fmt.Fprintln(stderr, ke.line())
			if ke.code == 0 {
				return &exitError{code: code | exitProblems}
			}
			return &exitError{code: code | ke.code}
		}
		if err != nil {
			w.Flush()
			fmt.Fprintln(stderr, errLine(path, err))
			code |= exitOperational
		} else if problems {
			code |= exitProblems
		}
	}
	w.Flush()
	o.trailer.print(stderr)
	if code != exitOK {
		return &exitError{code: code}
	}
	return nil
}

// dumpLog prints one .log file in kafka-dump-log's format (formats.md
// §7.2) and reports whether it found invalid bytes.
func (o *dumpOptions) dumpLog(w *bufio.Writer, stderr io.Writer, path string) (bool, error) {
	data, err := readLogPrefix(path, o.maxBytes)
	if err != nil {
		return false, err
	}
	base, _ := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64)
	fmt.Fprintf(w, "Log starting offset: %d\n", base)
	return o.dumpBatches(w, stderr, path, data)
}

// dumpKRaftSnapshot prints a KRaft snapshot (<end offset>-<epoch>.checkpoint
// or bootstrap.checkpoint): record batches like a .log, after a line
// naming the snapshot, as kafka-dump-log does. A name that is neither is
// reported (exit 4) and the batches are still printed.
func (o *dumpOptions) dumpKRaftSnapshot(w *bufio.Writer, stderr io.Writer, path string) (bool, error) {
	data, err := readLogPrefix(path, o.maxBytes)
	if err != nil {
		return false, err
	}
	id, ok := parseKRaftSnapshotName(filepath.Base(path))
	badName := false
	switch {
	case ok && id.bootstrap:
		fmt.Fprintln(w, "KRaft bootstrap snapshot")
	case ok:
		fmt.Fprintf(w, "Snapshot end offset: %d, epoch: %d\n", id.endOffset, id.epoch)
	default:
		w.Flush()
		fmt.Fprintf(stderr, "partlog: %s: not a KRaft snapshot name (<20-digit end offset>-<10-digit epoch>.checkpoint or bootstrap.checkpoint)\n", path)
		badName = true
	}
	problems, err := o.dumpBatches(w, stderr, path, data)
	return problems || badName, err
}

// kraftSnapshotID is what a KRaft snapshot's file name says.
type kraftSnapshotID struct {
	bootstrap bool
	endOffset int64
	epoch     int32
}

// parseKRaftSnapshotName parses "bootstrap.checkpoint" or
// "<20 digits>-<10 digits>.checkpoint" (Kafka's Snapshots naming).
func parseKRaftSnapshotName(name string) (kraftSnapshotID, bool) {
	if name == "bootstrap.checkpoint" {
		return kraftSnapshotID{bootstrap: true}, true
	}
	stem, ok := strings.CutSuffix(name, ".checkpoint")
	if !ok || len(stem) != 31 || stem[20] != '-' {
		return kraftSnapshotID{}, false
	}
	for i := 0; i < len(stem); i++ {
		if i != 20 && (stem[i] < '0' || stem[i] > '9') {
			return kraftSnapshotID{}, false
		}
	}
	off, err1 := strconv.ParseInt(stem[:20], 10, 64)
	ep, err2 := strconv.ParseInt(stem[21:], 10, 32)
	if err1 != nil || err2 != nil {
		return kraftSnapshotID{}, false
	}
	return kraftSnapshotID{endOffset: off, epoch: int32(ep)}, true
}

// dumpBatches prints the entries of a .log or .checkpoint file's bytes.
func (o *dumpOptions) dumpBatches(w *bufio.Writer, stderr io.Writer, path string, data []byte) (bool, error) {
	deep := o.deepIteration || o.printDataLog
	var scratch []byte
	var nonConsecutive [][2]int64
	// Kafka's tool starts the offset run at -1; with --offsets (partlog's)
	// the run starts at the first record printed.
	lastOffset := int64(-1)
	if o.offsets.set {
		lastOffset = noOffsetYet
	}
	pos := 0
	problems := false
	for pos < len(data) {
		size, err := batch.Frame(data[pos:])
		if err != nil {
			break
		}
		entry := data[pos : pos+size]
		if int8(entry[batch.OffMagic]) < batch.MagicV2 {
			m, err := batch.ParseLegacy(entry)
			if err != nil {
				fmt.Fprintf(stderr, "partlog: %s: position %d: %v\n", path, pos, err)
				problems = true
				break
			}
			if !o.legacyOverlaps(m) {
				pos += size
				continue
			}
			ok, err := o.printLegacy(w, m, pos, deep, &lastOffset, &nonConsecutive)
			if err != nil {
				return true, err
			}
			if !ok || !m.Valid() {
				problems = true
			}
			pos += size
			continue
		}
		v := batch.View(entry)
		if len(v) < batch.HeaderSize || v.Magic() != batch.MagicV2 {
			fmt.Fprintf(stderr, "partlog: %s: position %d: not a valid batch\n", path, pos)
			problems = true
			break
		}
		if !o.offsets.overlaps(v.BaseOffset(), v.LastOffset()) {
			pos += size
			continue
		}
		valid := v.CRC() == v.ComputeCRC()
		printBatchLine(w, v, pos, valid)
		if deep {
			var ok bool
			var err error
			scratch, ok, err = o.printRecords(w, stderr, path, v, pos, scratch, &lastOffset, &nonConsecutive)
			if err != nil {
				return true, err
			}
			// Records that cannot be decoded (a batch over the
			// decompression cap, a bad record) are problems, as in --json.
			problems = problems || !ok
		}
		if !valid {
			problems = true
		}
		pos += size
	}
	if pos < len(data) && o.maxBytes < 0 {
		fmt.Fprintf(w, "Found %d invalid bytes at the end of %s\n", len(data)-pos, filepath.Base(path))
		if batch.IsZero(data[pos:]) {
			// Kafka's line, as kafka-dump-log prints it, but not a problem:
			// the unwritten, preallocated tail of an active segment (a
			// running broker's, or one that crashed before writing there).
			fmt.Fprintf(stderr, "partlog: %s: the %d bytes after position %d are zeros: the unwritten tail of an active segment, not damage\n",
				path, len(data)-pos, pos)
		} else {
			problems = true
		}
	}
	o.trailer.nonConsecutive.add(absPath(path), nonConsecutive...)
	return problems, nil
}

func printBatchLine(w *bufio.Writer, v batch.View, pos int, valid bool) {
	horizon := "OptionalLong.empty"
	if h, ok := v.DeleteHorizon(); ok {
		horizon = "OptionalLong[" + strconv.FormatInt(h, 10) + "]"
	}
	fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		v.BaseOffset(), v.LastOffset(), v.RecordsCount(), v.BaseSequence(), v.LastSequence(),
		v.ProducerID(), v.ProducerEpoch(), v.PartitionLeaderEpoch(), v.IsTransactional(), v.IsControl(),
		horizon, pos, v.TimestampType(), v.MaxTimestamp(), v.Size(), v.Magic(), v.Compression(), v.CRC(), valid)
}

// printRecords prints the records of v; ok is false when they could not
// all be decoded (the error is printed to stderr). A *kafkaException
// ends the dump where Kafka's tool dies: the record's line is printed up
// to that point, without its line break.
func (o *dumpOptions) printRecords(w *bufio.Writer, stderr io.Writer, path string, v batch.View, pos int, scratch []byte, lastOffset *int64, nonConsecutive *[][2]int64) (_ []byte, ok bool, _ error) {
	data, err := v.RecordData(scratch, o.maxMessageSize)
	if err != nil {
		w.Flush()
		fmt.Fprintf(stderr, "partlog: %s: batch at position %d: %v\n", path, pos, err)
		return scratch, false, nil
	}
	if v.Compression() != batch.CompressionNone {
		scratch = data
	}
	it := batch.NewRecordIterator(v, data)
	var r batch.Record
	for it.Next(&r) {
		noteOffset(r.Offset, lastOffset, nonConsecutive)
		var line strings.Builder
		if !o.skipRecordMetadata {
			fmt.Fprintf(&line, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [",
				r.Offset, v.TimestampType(), r.Timestamp, r.KeySize(), r.ValueSize(), r.Sequence)
			hi := r.Headers()
			var h batch.Header
			for first := true; hi.Next(&h); first = false {
				if !first {
					line.WriteByte(',')
				}
				line.Write(h.Key)
			}
			line.WriteByte(']')
			if v.IsControl() {
				line.WriteString(o.controlSuffix(&r))
			}
		}
		if o.printDataLog && !v.IsControl() {
			if err := o.writeKeyValue(&line, r.Offset, r.Key, r.Value); err != nil {
				w.WriteString(line.String())
				return scratch, false, err
			}
		}
		w.WriteString(line.String())
		w.WriteByte('\n')
	}
	if err := it.Err(); err != nil {
		w.Flush()
		fmt.Fprintf(stderr, "partlog: %s: batch at position %d: %v\n", path, pos, err)
		return scratch, false, nil
	}
	return scratch, true, nil
}

// controlSuffix renders a control record as Apache Kafka 4.4's dump tool
// does, which knows types 0-6 and prints any other as
// "controlType: UNKNOWN(<type>)": a mirroring barrier (type 7) too,
// unless --mirror-format asks for the mirroring fork's spelling.
func (o *dumpOptions) controlSuffix(r *batch.Record) string {
	_, t, err := batch.ParseControlKey(r.Key)
	if err != nil {
		return " controlType: INVALID"
	}
	val, err := batch.DecodeControlValue(t, r.Value)
	if err != nil {
		return fmt.Sprintf(" controlType: %s(%d) (invalid value: %v)", t, t, err)
	}
	switch m := val.(type) {
	case batch.EndTxnMarker:
		return fmt.Sprintf(" endTxnMarker: %s coordinatorEpoch: %d", t, m.CoordinatorEpoch)
	case batch.MirrorPidReset:
		if !o.mirrorFormat {
			return " controlType: UNKNOWN(7)"
		}
		return " MirrorPidReset " + m.JSON()
	case batch.LeaderChange:
		return " LeaderChange: " + batch.ControlValueJSON(m)
	case batch.SnapshotHeader:
		return " SnapshotHeader " + batch.ControlValueJSON(m)
	case batch.SnapshotFooter:
		return " SnapshotFooter " + batch.ControlValueJSON(m)
	case batch.KRaftVersion:
		return " KRaftVersion " + batch.ControlValueJSON(m)
	case batch.KRaftVoters:
		return " KRaftVoters " + batch.ControlValueJSON(m)
	}
	return fmt.Sprintf(" controlType: UNKNOWN(%d)", int16(t))
}

// printLegacy prints a magic 0/1 entry; ok is false when a compressed
// wrapper could not be decoded (over the decompression cap, damaged). A
// *kafkaException ends the dump as in printRecords.
func (o *dumpOptions) printLegacy(w *bufio.Writer, m batch.LegacyMessage, pos int, deep bool, lastOffset *int64, nonConsecutive *[][2]int64) (ok bool, _ error) {
	fmt.Fprintf(w, "offset: %d position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		m.Offset(), pos, m.TimestampType(), m.Timestamp(), m.Size(), m.Magic(), m.Compression(), m.CRC(), m.Valid())
	if !deep {
		return true, nil
	}
	if m.Compression() == batch.CompressionNone {
		return true, o.printLegacyRecord(w, m, m.Offset(), m.TimestampType(), m.Timestamp(), lastOffset, nonConsecutive)
	}
	inner, err := m.AppendInner(nil, o.maxMessageSize)
	if err != nil {
		fmt.Fprintf(w, "| invalid wrapper: %v\n", err)
		return false, nil
	}
	for _, in := range inner {
		if err := o.printLegacyRecord(w, in.Message, in.Offset, m.TimestampType(), in.Timestamp, lastOffset, nonConsecutive); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (o *dumpOptions) printLegacyRecord(w *bufio.Writer, m batch.LegacyMessage, offset int64, tt batch.TimestampType, ts int64, lastOffset *int64, nonConsecutive *[][2]int64) error {
	noteOffset(offset, lastOffset, nonConsecutive)
	if !o.skipRecordMetadata {
		fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d isValid: %t crc: %d}",
			offset, tt, ts, m.KeySize(), m.ValueSize(), m.Valid(), m.CRC())
	}
	if o.printDataLog {
		var line strings.Builder
		err := o.writeKeyValue(&line, offset, m.Key(), m.Value())
		w.WriteString(line.String())
		if err != nil {
			return err
		}
	}
	w.WriteByte('\n')
	return nil
}

// writeKeyValue appends " key: K payload: V" as kafka-dump-log prints a
// record's data (after "| " instead of the metadata when
// --skip-record-metadata is set), through the chosen decoder.
func (o *dumpOptions) writeKeyValue(line *strings.Builder, offset int64, key, value []byte) error {
	dec := o.decoder
	if dec == nil {
		dec = stringDecoders
	}
	k, v, err := dec.decode(offset, key, value)
	if err != nil {
		return err
	}
	prefix := " "
	if o.skipRecordMetadata {
		prefix = "| "
	}
	if k != nil {
		line.WriteString(prefix)
		line.WriteString("key: ")
		line.WriteString(*k)
		prefix = " "
	}
	if v != nil {
		line.WriteString(prefix)
		line.WriteString("payload: ")
		line.WriteString(*v)
	}
	return nil
}

// noOffsetYet is a run of offsets that has no previous offset.
const noOffsetYet = math.MinInt64

// noteOffset records a record offset that does not follow the previous
// one of the file. As in Kafka's tool, the previous offset starts at -1:
// a file whose first record is not offset 0 reports "-1 is followed by"
// it.
// kafkaException is a failure on which Kafka's dump tool dies: an
// exception its main lets escape, which the JVM prints as
// `Exception in thread "main" <class>: <message>` and a stack trace.
// partlog prints that first line, dumps no further file and prints no
// end-of-run report, as Kafka's tool does, and exits 4 (8 for a file
// that could not be read).
type kafkaException struct {
	class   string // the Java exception's class name
	message string // its message; empty for none
	code    int    // partlog's exit code for it; 0 means exitProblems
}

func (e *kafkaException) Error() string {
	if e.message == "" {
		return e.class
	}
	return e.class + ": " + e.message
}

// line is what the JVM prints first for the exception.
func (e *kafkaException) line() string { return `Exception in thread "main" ` + e.Error() }

func noteOffset(offset int64, last *int64, nonConsecutive *[][2]int64) {
	if *last != noOffsetYet && offset != *last+1 {
		*nonConsecutive = append(*nonConsecutive, [2]int64{*last, offset})
	}
	*last = offset
}

const dumpLong = `dump prints the files it is given as Apache Kafka 4.4's kafka-dump-log
(DumpLogSegments) does, or as JSON with --json. Files come from FILE
arguments and from --files a,b,c (kafka-dump-log's form); they are dumped
in that order.

Reads: .log segments; .index and .timeindex (checked against the .log
beside them); .txnindex; producer .snapshot files; KRaft snapshots
(<end offset>-<epoch>.checkpoint and bootstrap.checkpoint, printed as
record batches). Any other file is reported as "Ignoring unknown file".
Nothing is written.

Keys and values (--print-data-log) are printed as UTF-8, each invalid
byte sequence replaced by U+FFFD as Kafka's StringDecoder does, unless a
decoder is chosen: --offsets-decoder (__consumer_offsets),
--transaction-log-decoder (__transaction_state),
--share-group-state-decoder (__share_group_state),
--cluster-metadata-decoder (__cluster_metadata and KRaft snapshots), or
--key-decoder-class/--value-decoder-class with Kafka's class names
(org.apache.kafka.tools.api.StringDecoder, DefaultDecoder, IntegerDecoder,
LongDecoder; the kafka.serializer names of older Kafka are accepted too).
Every decoder flag implies --print-data-log.

Where Kafka's tool dies on an exception (a corrupt index under
--index-sanity-check, a record its decoder cannot read), dump prints the
exception's first line as the JVM does and stops there, as Kafka's tool
does: no further file, no end-of-run report.

Exit status: 0 every file dumped and valid, 4 a file holds invalid data
(a bad CRC, invalid bytes, an index entry that does not match its log, a
corrupt snapshot, an exception of Kafka's tool), 8 a file could not be
read, 16 usage error; several files OR their codes.`
