package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/partlog/partlog/dump"
	"github.com/spf13/cobra"
)

// dumpOptions are the flags of `partlog dump`, named as kafka-dump-log's;
// the dump itself is package dump's.
type dumpOptions struct {
	dump.Options
	json            bool
	referenceFormat bool // deprecated: Apache Kafka's format is the default

	// kafka-dump-log's input and decoder flags.
	files             []string
	offsetsDecoder    bool
	txnLogDecoder     bool
	shareStateDecoder bool
	clusterMetadata   bool
	keyDecoderClass   string
	valueDecoderClass string
}

func (o *dumpOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.Deep, "deep-iteration", false, "print every record, not only batch headers")
	f.BoolVar(&o.PrintData, "print-data-log", false, "print keys and values (implies --deep-iteration)")
	f.BoolVar(&o.SkipRecordMetadata, "skip-record-metadata", false, "omit record metadata when printing data")
	f.Int64Var(&o.MaxBytes, "max-bytes", -1, "read at most this many bytes of each .log file")
	f.IntVar(&o.MaxMessageSize, "max-message-size", 5242880, "largest decompressed batch to decode")
	f.BoolVar(&o.MirrorFormat, "mirror-format", false, "print type-7 control records (MIRROR_PID_RESET barriers) as the dump tool of Kafka's mirroring fork (KIP-1279) does: MirrorPidReset {json}, instead of Apache Kafka 4.4's controlType: UNKNOWN(7)")
	f.BoolVar(&o.referenceFormat, "reference-format", false, "Apache Kafka's format, the default")
	_ = f.MarkHidden("reference-format")
	f.BoolVar(&o.VerifyIndexOnly, "verify-index-only", false, "check .index and .timeindex entries against the .log without printing them")
	f.BoolVar(&o.IndexSanityCheck, "index-sanity-check", false, "only run the sanity check of .index and .timeindex files")
	f.BoolVar(&o.StrictSanity, "strict-sanity-check", false, "with --index-sanity-check: apply partlog's stricter check (the one recovery applies: no trailing zero entries, entries in order and inside the .log) instead of Kafka's, and report a failure on stderr without stopping")
	f.Var(&o.Offsets, "offsets", "only print batches and index entries overlapping this inclusive offset range (either bound may be empty); .snapshot files are not filtered")
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
// Like kafka-dump-log, any decoder flag implies --print-data-log.
func (o *dumpOptions) prepare(cmd *cobra.Command) error {
	f := cmd.Flags()
	chosen := false
	for _, name := range []string{"offsets-decoder", "transaction-log-decoder", "cluster-metadata-decoder", "share-group-state-decoder", "key-decoder-class", "value-decoder-class"} {
		if f.Changed(name) {
			o.PrintData = true
			chosen = true
		}
	}
	d, err := dump.NewDecoder(o.offsetsDecoder, o.txnLogDecoder, o.clusterMetadata, o.shareStateDecoder, o.keyDecoderClass, o.valueDecoderClass)
	if err != nil {
		return err
	}
	if chosen {
		o.Decoder = d
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
	t := dump.NewText(stdout, stderr, &o.Options)
	code := exitOK
	for _, path := range files {
		failed, err := t.File(path)
		var ex *dump.Exception
		switch {
		case errors.As(err, &ex):
			// Kafka's tool dies here: no further file, no trailer.
			t.Flush()
			fmt.Fprintln(stderr, ex.Line())
			if ex.Unreadable {
				return &exitError{code: code | exitOperational}
			}
			return &exitError{code: code | exitProblems}
		case errors.Is(err, dump.ErrUnknownKind):
			t.Flush()
			fmt.Fprintf(stderr, "Ignoring unknown file %s\n", path)
		case err != nil:
			t.Flush()
			fmt.Fprintln(stderr, errLine(path, err))
			code |= exitOperational
		case failed:
			code |= exitProblems
		}
	}
	t.Finish()
	return exitWith(code)
}

// runJSON dumps every file as one JSON object a line; an unknown file is
// reported on stderr and gets no object, an unreadable one an "io" problem.
func (o *dumpOptions) runJSON(files []string, stdout, stderr io.Writer) error {
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	code := exitOK
	for _, path := range files {
		f, err := dump.Read(path, &o.Options, nil)
		switch {
		case errors.Is(err, dump.ErrUnknownKind):
			w.Flush()
			fmt.Fprintf(stderr, "Ignoring unknown file %s\n", path)
			continue
		case err != nil:
			f.Problems = append(f.Problems, dump.Problem{Position: -1, Kind: "io", Detail: err.Error()})
			code |= exitOperational
		case f.Failed():
			code |= exitProblems
		}
		if err := dump.WriteJSON(w, f); err != nil {
			return &exitError{code: exitOperational, err: err}
		}
	}
	return exitWith(code)
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
--index-sanity-check, a record its decoder cannot read, an index whose
.log is missing), dump prints the exception's first line as the JVM does
and stops there, as Kafka's tool does: no further file, no end-of-run
report.

Exit status: 0 every file dumped and valid, 4 a file holds invalid data
(a bad CRC, invalid bytes, an index entry that does not match its log, a
corrupt snapshot, an exception of Kafka's tool), 8 a file could not be
read, 16 usage error; several files OR their codes.`
