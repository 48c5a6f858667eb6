package partlog

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/snapshot"
)

// kafkaErrorTable is every exported error of the package (its own and
// those it re-exports) with its Kafka code.
var kafkaErrorTable = map[string]struct {
	err  error
	code int16
}{
	"ErrClosed":                       {ErrClosed, 6},
	"ErrLocked":                       {ErrLocked, 56},
	"ErrNeedsRecovery":                {ErrNeedsRecovery, 56},
	"ErrFlushedDamage":                {ErrFlushedDamage, 56},
	"ErrInvalidRecords":               {ErrInvalidRecords, 2},
	"ErrPolicy":                       {ErrPolicy, 87},
	"ErrRecordTooLarge":               {ErrRecordTooLarge, 10},
	"ErrRecordListTooLarge":           {ErrRecordListTooLarge, 18},
	"ErrOffsetOutOfRange":             {ErrOffsetOutOfRange, 1},
	"ErrTruncated":                    {ErrTruncated, 6},
	"ErrUnexpectedOffset":             {ErrUnexpectedOffset, -1},
	"ErrStaleLeaderEpoch":             {ErrStaleLeaderEpoch, 74},
	"ErrOpenTransactions":             {ErrOpenTransactions, 51},
	"ErrNotBatchBoundary":             {ErrNotBatchBoundary, -1},
	"ErrInvalidTimestamp":             {ErrInvalidTimestamp, 32},
	"ErrInconsistentTopicID":          {ErrInconsistentTopicID, 103},
	"ErrFailed":                       {ErrFailed, 56},
	"ErrDirLocked":                    {ErrDirLocked, 56},
	"ErrUnknownPartition":             {ErrUnknownPartition, 3},
	"ErrInvalidTopic":                 {ErrInvalidTopic, 17},
	"ErrOutOfOrderSequence":           {ErrOutOfOrderSequence, 45},
	"ErrDuplicateSequence":            {ErrDuplicateSequence, 46},
	"ErrInvalidProducerEpoch":         {ErrInvalidProducerEpoch, 47},
	"ErrProducerFenced":               {ErrProducerFenced, 90},
	"ErrInvalidTxnState":              {ErrInvalidTxnState, 48},
	"ErrTransactionCoordinatorFenced": {ErrTransactionCoordinatorFenced, 52},
	"ErrControlFromClient":            {ErrControlFromClient, 87},
	"ErrInvalidSequence":              {ErrInvalidSequence, 87},
	"ErrUnknownControlType":           {ErrUnknownControlType, -1},
	"ErrCorrupt":                      {ErrCorrupt, 56},
	"ErrTornTail":                     {ErrTornTail, 2},
	"ErrCleaningStopped":              {ErrCleaningStopped, -1},
	"ErrUncleanable":                  {ErrUncleanable, -1},
}

// TestKafkaErrorCodeEveryError: every exported Err* variable declared in
// the package's sources is in the table, and maps to its code bare,
// wrapped with %w, and inside the error types the library returns.
func TestKafkaErrorCodeEveryError(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	declared := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						declared[n.Name] = true
					}
				}
			}
		}
	}
	for name := range declared {
		if _, ok := kafkaErrorTable[name]; !ok {
			t.Errorf("%s is exported but not in the table", name)
		}
	}
	for name, c := range kafkaErrorTable {
		if !declared[name] {
			t.Errorf("table names %s, which the package does not declare", name)
		}
		for _, e := range []error{c.err, fmt.Errorf("ctx: %w", c.err), fmt.Errorf("a: %w", fmt.Errorf("b: %w", c.err))} {
			if got := KafkaErrorCode(e); got != c.code {
				t.Errorf("KafkaErrorCode(%v) = %d, want %d", e, got, c.code)
			}
		}
	}
}

// TestKafkaErrorCodeReturned: errors as the library returns them.
func TestKafkaErrorCodeReturned(t *testing.T) {
	_, statErr := os.Stat(filepath.Join(t.TempDir(), "missing"))
	for _, c := range []struct {
		name string
		err  error
		code int16
	}{
		{"nil", nil, 0},
		{"offset error", &OffsetError{Err: ErrOffsetOutOfRange, Offset: 9}, 1},
		{"unexpected offset", &OffsetError{Err: ErrUnexpectedOffset, Offset: 9}, -1},
		{"producer error", &producerstate.ProducerError{Err: producerstate.ErrInvalidProducerEpoch}, 47},
		{"duplicate", &producerstate.DuplicateSequenceError{}, 46},
		{"corrupt batch", fmt.Errorf("%w: %w", ErrInvalidRecords, &batch.CorruptionError{Kind: batch.ErrCorrupt, Reason: "crc"}), 2},
		{"torn", &batch.TornTailError{}, 2},
		{"path error", statErr, 56},
		{"ENOSPC", fmt.Errorf("write: %w", syscall.ENOSPC), 56},
		{"fs.PathError EIO", &fs.PathError{Op: "fsync", Path: "x", Err: syscall.EIO}, 56},
		{"failed log", fmt.Errorf("%w: %w", ErrFailed, syscall.EIO), 56},
		{"deadline", context.DeadlineExceeded, 7},
		{"unknown", errors.New("something else"), -1},
	} {
		if got := KafkaErrorCode(c.err); got != c.code {
			t.Errorf("%s: KafkaErrorCode(%v) = %d, want %d", c.name, c.err, got, c.code)
		}
	}
	// The two size errors come from the two limits.
	o := smallOpts(t)
	o.MaxBatchBytes = 500
	l, _ := openTestLog(t, o)
	_, err := l.AppendAsLeader(makeBatch(t, 3, 300, 1000), 0)
	if KafkaErrorCode(err) != 10 {
		t.Errorf("batch over MaxBatchBytes: %v (code %d)", err, KafkaErrorCode(err))
	}
	o2 := smallOpts(t)
	o2.SegmentBytes = 2000
	l2, _ := openTestLog(t, o2)
	var big []byte
	for i := 0; i < 10; i++ {
		big = append(big, makeBatch(t, 1, 300, 1000)...)
	}
	_, err = l2.AppendAsLeader(big, 0)
	if !errors.Is(err, ErrRecordListTooLarge) || KafkaErrorCode(err) != 18 {
		t.Errorf("append over SegmentBytes: %v (code %d)", err, KafkaErrorCode(err))
	}
}

// TestErrCorruptMarksEveryPackage: the one corruption marker answers for
// the corruption errors of every package that decodes bytes, each package's
// own sentinel keeps answering for its errors only, and KafkaErrorCode
// still tells a corrupt batch (CORRUPT_MESSAGE) from a corrupt file
// (KAFKA_STORAGE_ERROR; a corrupt snapshot was UNKNOWN_SERVER_ERROR).
func TestErrCorruptMarksEveryPackage(t *testing.T) {
	bad := make([]byte, 70)
	bad[0], bad[11] = 1, 5 // a length field below the smallest entry, not zeros
	_, batchErr := batch.Check(bad)
	_, indexErr := index.DecodeOffsetIndex(make([]byte, 9), 0)
	_, snapErr := snapshot.Decode([]byte{0, 9})
	_, ckptErr := checkpoint.ParseOffsets([]byte("0\n1\nbad line here\n"))
	for _, tc := range []struct {
		name     string
		err      error
		sentinel error
		code     int16
	}{
		{"batch", batchErr, batch.ErrCorrupt, 2},
		{"index", indexErr, index.ErrCorrupt, 56},
		{"snapshot", snapErr, snapshot.ErrCorrupt, 56},
		{"checkpoint", ckptErr, checkpoint.ErrCorrupt, 56},
	} {
		if tc.err == nil {
			t.Fatalf("%s: the bytes decoded", tc.name)
		}
		if !errors.Is(tc.err, ErrCorrupt) || !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%s: %v: Is(ErrCorrupt) %v, Is(its sentinel) %v", tc.name, tc.err, errors.Is(tc.err, ErrCorrupt), errors.Is(tc.err, tc.sentinel))
		}
		for _, other := range []error{batch.ErrCorrupt, index.ErrCorrupt, snapshot.ErrCorrupt, checkpoint.ErrCorrupt} {
			if other != tc.sentinel && errors.Is(tc.err, other) {
				t.Errorf("%s: %v answers another package's sentinel %v", tc.name, tc.err, other)
			}
		}
		if c := KafkaErrorCode(tc.err); c != tc.code {
			t.Errorf("%s: KafkaErrorCode %d, want %d", tc.name, c, tc.code)
		}
	}
}
