package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/spf13/cobra"
)

// demoOptions are the flags of `partlog demo`.
type demoOptions struct {
	dir  string
	keep bool
}

func newDemoCommand(stdout, stderr io.Writer) *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Build a small crashed log directory and dump, verify and recover it",
		Long: `demo writes a Kafka log directory with one partition (plain, idempotent and
transactional batches, a COMMIT marker and a MIRROR_PID_RESET barrier), then
damages it as a crash in the middle of an append would (a torn last batch,
no clean-shutdown marker), and runs on it, in order:

  partlog dump --deep-iteration --print-data-log --mirror-format <the .log>
  partlog verify <partition>
  partlog recover --apply <partition>
  partlog verify <partition>
  partlog producers <partition>

Nothing outside the demo directory is touched. By default it is a new
temporary directory, removed at the end (the last line says so); --keep
keeps it for a look at the files, --dir DIR builds it in DIR and keeps it.
A --dir that already holds Kafka data (a partition directory, segment,
index or snapshot files, checkpoints, meta.properties) is refused.

Reads: nothing but the files it writes.

Exit status: 0 every step gave the expected result, 8 a step did not or
the directory could not be written, 16 usage error (including a refused
--dir).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(stdout, stderr) },
	}
	cmd.Flags().StringVar(&o.dir, "dir", "", "build the demo log directory here (default: a new temporary directory)")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the temporary directory afterwards")
	return cmd
}

// checkDemoDir refuses a --dir that holds Kafka data: a partition
// directory, a segment, index or snapshot file, a KRaft snapshot, or a
// file Kafka keeps at the top of a log directory. The demo writes a
// partition and damages it on purpose, so it must never run where real
// data lives. A missing or empty directory, or one holding other files
// only, is accepted.
func checkDemoDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		_, isPart := partlog.ParsePartitionDir(name)
		_, segErr := filenames.Parse(name)
		switch {
		case e.IsDir() && isPart:
			return fmt.Errorf("%s already holds partition directory %s: demo builds and damages a partition, so it only runs in a directory without Kafka data", dir, name)
		case !e.IsDir() && (segErr == nil || isLogDirFile(name) || strings.HasSuffix(name, ".checkpoint")):
			return fmt.Errorf("%s already holds Kafka file %s: demo builds and damages a partition, so it only runs in a directory without Kafka data", dir, name)
		}
	}
	return nil
}

func (o *demoOptions) run(stdout, stderr io.Writer) error {
	root := o.dir
	if root != "" {
		if err := checkDemoDir(root); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	if root == "" {
		d, err := os.MkdirTemp("", "partlog-demo-")
		if err != nil {
			return &exitError{code: exitOperational, err: err}
		}
		root = d
		if !o.keep {
			defer os.RemoveAll(d)
		}
	}
	part := filepath.Join(root, "orders-0")
	logFile, err := buildDemo(part)
	if err != nil {
		return &exitError{code: exitOperational, err: err}
	}
	fmt.Fprintf(stdout, "# demo log directory: %s (partition orders-0; crashed with a torn last batch)\n\n", root)
	codes := []int{}
	steps := [][]string{
		{"dump", "--deep-iteration", "--print-data-log", "--mirror-format", logFile},
		{"verify", part},
		{"recover", "--apply", part},
		{"verify", part},
		{"producers", part},
	}
	for _, args := range steps {
		fmt.Fprintf(stdout, "$ partlog %s\n", joinArgs(args))
		code := run(args, stdout, stderr)
		codes = append(codes, code)
		fmt.Fprintf(stdout, "(exit %d)\n\n", code)
	}
	// dump and verify find the torn tail (4), recover repairs it (1), then
	// everything is clean (0).
	want := []int{exitProblems, exitProblems, exitRepaired, exitOK, exitOK}
	for i := range want {
		if codes[i] != want[i] {
			return &exitError{code: exitOperational, err: fmt.Errorf("demo step %q exited %d, expected %d", joinArgs(steps[i]), codes[i], want[i])}
		}
	}
	// A newcomer who wants to look at the files must learn how.
	if o.dir == "" && !o.keep {
		fmt.Fprintf(stdout, "# removing %s (partlog demo --keep keeps it, --dir DIR builds it in DIR)\n", root)
	} else {
		fmt.Fprintf(stdout, "# kept %s\n", root)
	}
	return nil
}

func joinArgs(args []string) string {
	s := ""
	for i, a := range args {
		if i > 0 {
			s += " "
		}
		s += a
	}
	return s
}

// buildDemo writes the demo partition and damages it; it returns the
// path of its .log file.
func buildDemo(part string) (string, error) {
	if err := os.MkdirAll(part, 0o755); err != nil {
		return "", err
	}
	l, err := partlog.Open(part, &partlog.Options{SegmentBytes: 1 << 20, MaxIndexBytes: 4096, PrefaultBytes: -1})
	if err != nil {
		return "", err
	}
	ts := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMilli()
	var b batch.Builder
	build := func(spec batch.BatchSpec, kv ...string) []byte {
		var recs []batch.RecordSpec
		for i := 0; i+1 < len(kv); i += 2 {
			recs = append(recs, batch.RecordSpec{Timestamp: ts + int64(i), Key: []byte(kv[i]), Value: []byte(kv[i+1])})
		}
		out, _ := b.AppendBatch(nil, &spec, recs)
		return out
	}
	plain := batch.NewBatchSpec(0)
	idem := batch.NewBatchSpec(0)
	idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence = 1000, 0, 0
	txn := batch.NewBatchSpec(0)
	txn.ProducerID, txn.ProducerEpoch, txn.BaseSequence, txn.Transactional = 2000, 3, 0, true
	steps := []struct {
		coordinator bool
		bytes       []byte
	}{
		{false, build(plain, "order-1", "created", "order-2", "created")},
		{false, build(idem, "order-1", "paid")},
		{false, build(txn, "order-2", "shipped", "order-3", "created")},
		{true, batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{ProducerID: 2000, ProducerEpoch: 3, Timestamp: ts + 10}, true, 7)},
		{true, batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{Timestamp: ts + 20}, "AAAAAAAAAAAAAAAAAAAAAQ")},
		{false, build(plain, "order-3", "paid", "order-4", "created", "order-5", "created")},
	}
	for _, s := range steps {
		if s.coordinator {
			_, err = l.AppendAsCoordinator(s.bytes, 1)
		} else {
			_, err = l.AppendAsLeader(s.bytes, 1)
		}
		if err != nil {
			_ = l.Close()
			return "", err
		}
	}
	if err := l.Close(); err != nil {
		return "", err
	}
	// The crash: the last batch was being copied when the process died,
	// so only its first 40 bytes reached the file.
	logFile := filepath.Join(part, "00000000000000000000.log")
	f, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	torn := build(plain, "order-6", "created")
	_, err = f.Write(torn[:40])
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return logFile, err
}
