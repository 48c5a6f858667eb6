package main

import (
	"bufio"
	"fmt"
	"io"
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
	referenceTool      bool
	verifyIndexOnly    bool
	indexSanityCheck   bool
	offsets            offsetRange
	json               bool

	trailer dumpTrailer // reports printed on stderr after all files
}

func (o *dumpOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.deepIteration, "deep-iteration", false, "print every record, not only batch headers")
	f.BoolVar(&o.printDataLog, "print-data-log", false, "print keys and values (implies --deep-iteration)")
	f.BoolVar(&o.skipRecordMetadata, "skip-record-metadata", false, "omit record metadata when printing data")
	f.Int64Var(&o.maxBytes, "max-bytes", -1, "read at most this many bytes of each .log file")
	f.IntVar(&o.maxMessageSize, "max-message-size", 5242880, "largest decompressed batch to decode")
	f.BoolVar(&o.referenceTool, "reference-format", false, "print type-7 control records as Apache Kafka (October 2024) does: controlType: UNKNOWN(7)")
	f.BoolVar(&o.verifyIndexOnly, "verify-index-only", false, "check .index and .timeindex entries against the .log without printing them")
	f.BoolVar(&o.indexSanityCheck, "index-sanity-check", false, "only run the sanity check of .index and .timeindex files")
	f.Var(&o.offsets, "offsets", "only print batches and index entries overlapping this inclusive offset range (either bound may be empty); .snapshot files are not filtered")
	f.BoolVar(&o.json, "json", false, "print one JSON object per file instead of kafka-dump-log's text (schemaVersion 1)")
}

func newDumpCommand(stdout, stderr io.Writer) *cobra.Command {
	var o dumpOptions
	cmd := &cobra.Command{
		Use:   "dump [flags] FILE...",
		Short: "Print the contents of .log files as kafka-dump-log does",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(args, stdout, stderr)
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
		default:
			w.Flush()
			fmt.Fprintf(stderr, "Ignoring unknown file %s\n", path)
		}
		if err != nil {
			w.Flush()
			fmt.Fprintf(stderr, "partlog: %s: %v\n", path, err)
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
	deep := o.deepIteration || o.printDataLog
	var scratch []byte
	var nonConsecutive [][2]int64
	lastOffset := int64(-1)
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
			if !o.printLegacy(w, m, pos, deep, &lastOffset, &nonConsecutive) || !m.Valid() {
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
			scratch, ok = o.printRecords(w, stderr, path, v, pos, scratch, &lastOffset, &nonConsecutive)
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
		problems = true
	}
	if len(nonConsecutive) > 0 {
		// Kafka prepends to a list: most recent pair first.
		pairs := make([][2]int64, len(nonConsecutive))
		for i, p := range nonConsecutive {
			pairs[len(pairs)-1-i] = p
		}
		o.trailer.nonConsecutive = append(o.trailer.nonConsecutive, fileOffsetPairs{absPath(path), pairs})
	}
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
// all be decoded (the error is printed to stderr).
func (o *dumpOptions) printRecords(w *bufio.Writer, stderr io.Writer, path string, v batch.View, pos int, scratch []byte, lastOffset *int64, nonConsecutive *[][2]int64) (_ []byte, ok bool) {
	data, err := v.RecordData(scratch, o.maxMessageSize)
	if err != nil {
		w.Flush()
		fmt.Fprintf(stderr, "partlog: %s: batch at position %d: %v\n", path, pos, err)
		return scratch, false
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
			if o.skipRecordMetadata && r.Key != nil {
				line.WriteString("| ")
			}
			if r.Key != nil {
				if !o.skipRecordMetadata {
					line.WriteByte(' ')
				}
				line.WriteString("key: ")
				line.Write(r.Key)
			}
			if r.Value != nil {
				line.WriteString(" payload: ")
				line.Write(r.Value)
			}
		}
		w.WriteString(line.String())
		w.WriteByte('\n')
	}
	if err := it.Err(); err != nil {
		w.Flush()
		fmt.Fprintf(stderr, "partlog: %s: batch at position %d: %v\n", path, pos, err)
		return scratch, false
	}
	return scratch, true
}

// controlSuffix renders a control record as the dump tool does (the
// mirroring fork's tool unless --reference-format is given).
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
		if o.referenceTool {
			return " controlType: UNKNOWN(7)"
		}
		return " MirrorPidReset " + m.JSON()
	case batch.LeaderChange:
		if o.referenceTool {
			return " controlType: LEADER_CHANGE(2)"
		}
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
// wrapper could not be decoded (over the decompression cap, damaged).
func (o *dumpOptions) printLegacy(w *bufio.Writer, m batch.LegacyMessage, pos int, deep bool, lastOffset *int64, nonConsecutive *[][2]int64) (ok bool) {
	fmt.Fprintf(w, "offset: %d position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		m.Offset(), pos, m.TimestampType(), m.Timestamp(), m.Size(), m.Magic(), m.Compression(), m.CRC(), m.Valid())
	if !deep {
		return true
	}
	if m.Compression() == batch.CompressionNone {
		o.printLegacyRecord(w, m, m.Offset(), m.TimestampType(), m.Timestamp(), lastOffset, nonConsecutive)
		return true
	}
	inner, err := m.AppendInner(nil, o.maxMessageSize)
	if err != nil {
		fmt.Fprintf(w, "| invalid wrapper: %v\n", err)
		return false
	}
	for _, in := range inner {
		o.printLegacyRecord(w, in.Message, in.Offset, m.TimestampType(), in.Timestamp, lastOffset, nonConsecutive)
	}
	return true
}

func (o *dumpOptions) printLegacyRecord(w *bufio.Writer, m batch.LegacyMessage, offset int64, tt batch.TimestampType, ts int64, lastOffset *int64, nonConsecutive *[][2]int64) {
	noteOffset(offset, lastOffset, nonConsecutive)
	if !o.skipRecordMetadata {
		fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d isValid: %t crc: %d}",
			offset, tt, ts, m.KeySize(), m.ValueSize(), m.Valid(), m.CRC())
	}
	if o.printDataLog {
		if k := m.Key(); k != nil {
			if o.skipRecordMetadata {
				w.WriteString("| ")
			} else {
				w.WriteByte(' ')
			}
			w.WriteString("key: ")
			w.Write(k)
		}
		if v := m.Value(); v != nil {
			w.WriteString(" payload: ")
			w.Write(v)
		}
	}
	w.WriteByte('\n')
}

func noteOffset(offset int64, last *int64, nonConsecutive *[][2]int64) {
	if *last >= 0 && offset != *last+1 {
		*nonConsecutive = append(*nonConsecutive, [2]int64{*last, offset})
	}
	*last = offset
}
