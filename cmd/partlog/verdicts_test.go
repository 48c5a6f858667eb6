package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/testutil"
)

// verdictLogDirs are log directories of testdata/realkafka, each with the
// partition directories whose verdicts are looked at one by one (every
// partition of the log directory is verified and repaired).
var verdictLogDirs = map[string][]string{
	"panic08+kafka-starter-windows/kafka-logs": {"__consumer_offsets-3", "test-0"},
	"nomanazeem+Kafka-java/kafka-logs":         {"__cluster_metadata-0", "__consumer_offsets-15", "demo-topic-0"},
	"Jeong-Rae+KafkaDemo/kraft-combined-logs":  {"__cluster_metadata-0"},
}

// TestRealDirectoryVerdicts: on directories real Kafka brokers wrote,
// verify exits 0 naming no problem (the routine steps of Kafka's load are
// listed as changes), producers exits 0, both leave every file
// byte-identical, and recover --apply changes no .log byte, lists every
// file it changes with a copy of the old bytes in the quarantine; a second
// --apply changes nothing.
func TestRealDirectoryVerdicts(t *testing.T) {
	partitions := 0
	for logDir, parts := range verdictLogDirs {
		t.Run(strings.ReplaceAll(logDir, "/", "_"), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "copy")
			testutil.CopyTree(t, filepath.Join("testdata", "realkafka", logDir), root)
			before := testutil.HashTree(t, root)

			code, out, errOut := runCLI(t, "", "verify", "--json", root)
			if code != exitOK {
				t.Fatalf("verify exit %d\n%s%s", code, out, errOut)
			}
			reps := parseReports(t, out)
			var names []string
			for _, r := range reps {
				names = append(names, filepath.Base(r.Dir))
				if r.Status != "ok" || len(r.Problems) != 0 || r.Truncation != nil {
					t.Errorf("%s: status %s problems %+v truncation %+v", r.Dir, r.Status, r.Problems, r.Truncation)
				}
			}
			for _, p := range parts {
				if !slices.Contains(names, p) {
					t.Fatalf("partitions %v, want %s among them", names, p)
				}
			}
			code, out, errOut = runCLI(t, "", "verify", "--full", root)
			if code != exitOK {
				t.Errorf("verify --full exit %d\n%s%s", code, out, errOut)
			}
			for _, p := range parts {
				code, out, errOut := runCLI(t, "", "producers", filepath.Join(root, p))
				if code != exitOK || errOut != "" {
					t.Errorf("producers %s: exit %d\n%s%s", p, code, out, errOut)
				}
			}
			sameTree(t, before, testutil.HashTree(t, root))

			code, out, errOut = runCLI(t, "", "recover", "--apply", "--json", root)
			if code != exitOK && code != exitRepaired {
				t.Fatalf("recover --apply exit %d\n%s%s", code, out, errOut)
			}
			after := testutil.HashTree(t, root)
			repaired := parseReports(t, out)
			for _, r := range repaired {
				checkRealRepair(t, root, r, before, after)
			}
			if len(repaired) != len(names) {
				t.Errorf("recover --apply reported %d partitions, verify %d", len(repaired), len(names))
			}
			partitions += len(parts)
			code, out, errOut = runCLI(t, "", "recover", "--apply", "--json", root)
			if code != exitOK {
				t.Fatalf("second recover --apply exit %d\n%s%s", code, out, errOut)
			}
			for _, r := range parseReports(t, out) {
				if len(r.Changes) != 0 || r.Status != "ok" {
					t.Errorf("second --apply on %s: status %s changes %+v", r.Dir, r.Status, r.Changes)
				}
			}
			// Only the quarantine is new after the second run.
			for name := range testutil.HashTree(t, root) {
				if _, ok := after[name]; !ok && !strings.Contains(name, quarantineDir) {
					t.Errorf("second --apply created %s", name)
				}
			}
		})
	}
	if partitions != 6 {
		t.Errorf("%d named partitions checked, want 6", partitions)
	}
}

// checkRealRepair checks one partition's recover --apply: no .log byte
// changed, every changed file is listed, and every listed change of an
// existing file kept its old bytes in the quarantine.
func checkRealRepair(t *testing.T, root string, r reportOut, before, after map[string]string) {
	t.Helper()
	part, err := filepath.Rel(root, r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, c := range r.Changes {
		listed[c.File] = true
		if c.Action == "create" {
			continue
		}
		if c.Saved == "" || r.Quarantine == nil {
			t.Errorf("%s: change %+v kept no copy", part, c)
			continue
		}
		if _, err := os.Stat(filepath.Join(*r.Quarantine, c.Saved)); err != nil {
			t.Errorf("%s: change %+v: %v", part, c, err)
		}
	}
	for name, h := range before {
		dir, file := filepath.Split(name)
		if filepath.Clean(dir) != part {
			continue
		}
		if after[name] != h {
			if strings.HasSuffix(file, ".log") {
				t.Errorf("%s changed", name)
			}
			if !listed[file] {
				t.Errorf("%s changed or removed without a change listed (%+v)", name, r.Changes)
			}
		}
	}
	for name := range after {
		dir, file := filepath.Split(name)
		if _, ok := before[name]; ok || filepath.Clean(dir) != part {
			continue
		}
		if !listed[file] {
			t.Errorf("%s created without a change listed", name)
		}
	}
	if b, err := json.Marshal(r.Problems); err != nil || len(r.Problems) != 0 {
		t.Errorf("%s: problems %s", part, b)
	}
}

// flushedDamage writes the standard test log with a recovery point of 54
// (segments 0 and 27 below it), removes segment 27's offset index (so that
// recovery validates that segment) and breaks the CRC of its third batch:
// damage to data the log had declared durable. It returns the partition
// directory and the damaged batch's position.
func flushedDamage(t *testing.T) (string, int64) {
	t.Helper()
	dir := makeLog(t, t.TempDir(), 20)
	if err := checkpoint.WriteOffsets(filepath.Join(filepath.Dir(dir), checkpoint.RecoveryPointFile),
		map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 54}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "00000000000000000027.index")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "00000000000000000027.log")
	pos := batchPositions(t, p)[2]
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[pos+batch.OffCRC] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, pos
}

// TestRecoverRefusesFlushedCut: durable data is never cut without
// --force. verify names the damage (corrupt-flushed, at its position);
// recover --apply leaves the partition as it is and exits 4; with --force
// it cuts as Kafka would and quarantines the rest.
func TestRecoverRefusesFlushedCut(t *testing.T) {
	dir, pos := flushedDamage(t)
	logDir := filepath.Dir(dir)
	code, out, errOut := runCLI(t, "", "verify", "--json", dir)
	if code != exitProblems {
		t.Fatalf("verify exit %d\n%s%s", code, out, errOut)
	}
	r := parseReports(t, out)[0]
	if r.Truncation != nil {
		t.Fatalf("truncation %+v: a segment wholly below the recovery point is never cut without --force", r.Truncation)
	}
	if !slices.ContainsFunc(r.Problems, func(p struct {
		File     string `json:"file"`
		Position int64  `json:"position"`
		Kind     string `json:"kind"`
		Detail   string `json:"detail"`
	}) bool {
		return p.File == "00000000000000000027.log" && p.Position == pos && strings.Contains(p.Detail, "corrupt-flushed")
	}) {
		t.Errorf("problems %+v lack the damage at %d", r.Problems, pos)
	}

	before := testutil.HashTree(t, logDir)
	code, out, errOut = runCLI(t, "", "recover", "--apply", dir)
	if code != exitProblems || !strings.Contains(out, "not repaired") || !strings.Contains(out, "--force") {
		t.Fatalf("recover --apply exit %d\n%s%s", code, out, errOut)
	}
	after := testutil.HashTree(t, logDir)
	delete(after, ".lock") // the lock recover takes, as a broker does
	delete(before, ".lock")
	sameTree(t, before, after)

	code, out, errOut = runCLI(t, "", "recover", "--apply", "--force", "--json", dir)
	if code != exitRepaired {
		t.Fatalf("recover --apply --force exit %d\n%s%s", code, out, errOut)
	}
	r = parseReports(t, out)[0]
	if r.Truncation == nil || r.Truncation.Position != pos || r.Quarantine == nil {
		t.Fatalf("forced repair %+v", r)
	}
	tail := filepath.Join(*r.Quarantine, "00000000000000000027.log.tail@"+strconv.FormatInt(pos, 10))
	if _, err := os.Stat(tail); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(*r.Quarantine, "00000000000000000054.log")); err != nil {
		t.Error(err)
	}
	if code, out, errOut := runCLI(t, "", "recover", "--apply", dir); code != exitOK {
		t.Errorf("second recover --apply exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := runCLI(t, "", "recover", "--force", dir); code != exitUsage {
		t.Errorf("--force without --apply: exit %d, want %d", code, exitUsage)
	}
}

// TestVerifyFull: damage in a segment below the recovery point is not
// read by verify (as by the broker's load); verify --full reads every
// segment and reports it as corrupt-flushed.
func TestVerifyFull(t *testing.T) {
	// Every batch indexed, so that the check of a trusted segment reads
	// only its last batch.
	dir := filepath.Join(t.TempDir(), "logdir", "t-0")
	opts := testLogOpts()
	opts.IndexIntervalBytes = 1
	l, err := partlog.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := l.AppendAsLeader(dataBatch(t, 3, fmt.Sprint("b", i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteOffsets(filepath.Join(filepath.Dir(dir), checkpoint.RecoveryPointFile),
		map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 54}); err != nil {
		t.Fatal(err)
	}
	p := logFiles(t, dir)[0]
	pos := batchPositions(t, p)[4]
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[pos+batch.OffCRC] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "", "verify", "--index-interval-bytes", "1", dir); code != exitOK {
		t.Fatalf("verify exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "", "verify", "--index-interval-bytes", "1", "--full", "--json", dir)
	if code != exitProblems {
		t.Fatalf("verify --full exit %d\n%s%s", code, out, errOut)
	}
	r := parseReports(t, out)[0]
	found := false
	for _, p := range r.Problems {
		found = found || (p.File == "00000000000000000000.log" && p.Position == pos && strings.Contains(p.Detail, "corrupt-flushed"))
	}
	if !found || r.Truncation != nil {
		t.Fatalf("problems %+v truncation %+v, want corrupt-flushed in segment 0 at %d and no cut", r.Problems, r.Truncation, pos)
	}
}

// TestVerifyRoutineChanges: a missing index is rebuilt by Kafka's load
// too: verify exits 0 and lists the change; info says the same; recover
// --apply makes it and exits 0 too (it exited 1, "repaired", for a
// report naming no problem).
func TestVerifyRoutineChanges(t *testing.T) {
	dir := makeLog(t, t.TempDir(), 20)
	if err := os.Remove(filepath.Join(dir, "00000000000000000027.index")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "verify", dir)
	if code != exitOK || !strings.Contains(out, "would change: create 00000000000000000027.index: offset index rebuilt: missing") ||
		!strings.Contains(out, "note: no recovery point") || strings.Contains(out, "problem:") {
		t.Fatalf("verify exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "info", dir)
	if code != exitOK || !strings.Contains(out, "status: ok") || !strings.Contains(out, "problems: none") ||
		!strings.Contains(out, "create 00000000000000000027.index") {
		t.Fatalf("info exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "recover", "--apply", "--json", dir)
	if code != exitOK {
		t.Fatalf("recover exit %d\n%s%s", code, out, errOut)
	}
	if r := parseReports(t, out)[0]; len(r.Changes) != 1 || r.Changes[0].File != "00000000000000000027.index" || r.Changes[0].Action != "create" {
		t.Fatalf("changes %+v", r.Changes)
	}
}

// TestVerifyFindsUnusedCorruptSnapshot: every .snapshot is checked, not
// only the one a replay starts from; recover --apply quarantines a corrupt
// one instead of reporting "repaired" with the file left in place.
func TestVerifyFindsUnusedCorruptSnapshot(t *testing.T) {
	dir := makeLog(t, t.TempDir(), 20)
	name := "00000000000000000027.snapshot"
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "verify", "--json", dir)
	if code != exitProblems {
		t.Fatalf("verify exit %d\n%s%s", code, out, errOut)
	}
	if r := parseReports(t, out)[0]; !slices.ContainsFunc(r.Problems, func(p struct {
		File     string `json:"file"`
		Position int64  `json:"position"`
		Kind     string `json:"kind"`
		Detail   string `json:"detail"`
	}) bool {
		return p.File == name && p.Kind == "snapshot"
	}) {
		t.Fatalf("problems %+v", r.Problems)
	}
	// A corrupt file is damage: its removal is a repair (exit 1).
	code, out, errOut = runCLI(t, "", "recover", "--apply", "--json", dir)
	if code != exitRepaired {
		t.Fatalf("recover exit %d\n%s%s", code, out, errOut)
	}
	r := parseReports(t, out)[0]
	if _, err := os.Stat(p); err == nil {
		t.Error("corrupt snapshot left in place")
	}
	if r.Quarantine == nil {
		t.Fatal("no quarantine")
	}
	if _, err := os.Stat(filepath.Join(*r.Quarantine, name)); err != nil {
		t.Error(err)
	}
}

// TestRecoverFullAgreesWithVerifyFull: a byte flipped in the middle of a
// cleanly shut down partition's one segment: verify --full said it would
// truncate there, and recover --apply (and --force) said ok, never
// reading that far. recover --full reads what verify --full reads: the
// damage, below the recovery point, is refused without --force and cut
// with it, after which verify --full finds nothing.
func TestRecoverFullAgreesWithVerifyFull(t *testing.T) {
	root := t.TempDir()
	d, err := partlog.OpenDir(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := testLogOpts()
	opts.SegmentBytes = 1 << 20 // one segment
	l, err := d.Create("t", 0, partlog.TopicID{1}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := l.AppendAsLeader(dataBatch(t, 3, fmt.Sprint("b", i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "t-0")
	p := logFiles(t, dir)[0]
	pos := batchPositions(t, p)[20]
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[pos+batch.OffCRC] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"verify", dir}, exitOK, "ok (nothing to do)"},
		{[]string{"recover", "--apply", dir}, exitOK, ": ok"},
		{[]string{"verify", "--full", dir}, exitProblems, "would change: truncate 00000000000000000000.log"},
		{[]string{"recover", "--full", dir}, exitProblems, "would change: truncate 00000000000000000000.log"},
		{[]string{"recover", "--apply", "--full", dir}, exitProblems, "not repaired"},
		{[]string{"recover", "--apply", "--full", "--force", dir}, exitRepaired, "changed: truncate 00000000000000000000.log"},
		{[]string{"verify", "--full", dir}, exitOK, "ok"},
	} {
		code, out, errOut := runCLI(t, "", c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Fatalf("%v: exit %d (want %d), missing %q:\n%s%s", c.args, code, c.code, c.want, out, errOut)
		}
	}
	if got := len(batchPositions(t, p)); got != 20 {
		t.Fatalf("%d batches after the forced repair, want the 20 before the damage", got)
	}
}

// TestIndexOfOddLengthIsAProblem: an index whose length is not a
// multiple of its entry size (Kafka's sanity check calls it corrupt) was a
// routine rebuild in the recovery range, and a problem naming the .log
// elsewhere; it is a problem naming the index, rebuilt by recover --apply
// (exit 1), in both places.
func TestIndexOfOddLengthIsAProblem(t *testing.T) {
	for _, clean := range []bool{true, false} {
		dir := makeLog(t, t.TempDir(), 20)
		if clean {
			// Clean: the recovery point at the log end, every segment
			// trusted.
			if err := checkpoint.WriteOffsets(filepath.Join(filepath.Dir(dir), checkpoint.RecoveryPointFile),
				map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 60}); err != nil {
				t.Fatal(err)
			}
			if err := checkpoint.WriteCleanShutdown(filepath.Join(filepath.Dir(dir), checkpoint.CleanShutdownFile), -1); err != nil {
				t.Fatal(err)
			}
		}
		idx := strings.TrimSuffix(lastLog(t, dir), ".log") + ".index"
		f, err := os.OpenFile(idx, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		name := filepath.Base(idx)
		code, out, errOut := runCLI(t, "", "verify", dir)
		if code != exitProblems || !strings.Contains(out, "problem: index "+name) {
			t.Fatalf("clean %v: verify exit %d\n%s%s", clean, code, out, errOut)
		}
		code, out, errOut = runCLI(t, "", "recover", "--apply", dir)
		if code != exitRepaired || !strings.Contains(out, "changed: write "+name) {
			t.Fatalf("clean %v: recover exit %d\n%s%s", clean, code, out, errOut)
		}
		if code, out, errOut = runCLI(t, "", "verify", dir); code != exitOK {
			t.Fatalf("clean %v: verify after the repair: exit %d\n%s%s", clean, code, out, errOut)
		}
	}
}

// TestVerifyLogDirectorySummary: verify of a log directory ended without
// a word on the whole and printed a note shared by its partitions once
// per partition, and a lock held by a running partlog read "process -1".
// It ends with one summary line, prints such a note once, and names a
// partlog as the lock's holder, once.
func TestVerifyLogDirectorySummary(t *testing.T) {
	root := t.TempDir()
	d, err := partlog.OpenDir(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		l, err := d.Create("s", p, partlog.TopicID{1}, testLogOpts())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := l.AppendAsLeader(dataBatch(t, 2, fmt.Sprint(i)), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash without recovery points (a note for each partition), and
	// damage in s-2.
	for _, f := range []string{checkpoint.RecoveryPointFile, checkpoint.CleanShutdownFile} {
		if err := os.Remove(filepath.Join(root, f)); err != nil {
			t.Fatal(err)
		}
	}
	p := logFiles(t, filepath.Join(root, "s-2"))[0]
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[batch.OffCRC] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// A running partlog holds the directory (its .lock, as serve does).
	lock, err := partlog.LockLogDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	code, out, errOut := runCLI(t, "", "verify", root)
	if code != exitProblems {
		t.Fatalf("verify exit %d\n%s%s", code, out, errOut)
	}
	if n := strings.Count(out, "note: no recovery point"); n != 1 {
		t.Errorf("the shared note printed %d times:\n%s%s", n, out, errOut)
	}
	if !strings.Contains(out, "verify: 3 partitions: 2 ok, 1 with problems, 0 failed") {
		t.Errorf("no summary line:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[len(lines)-1], "verify: 3 partitions") {
		t.Errorf("the summary is not the last line:\n%s", out)
	}
	if n := strings.Count(errOut, "locked by a running partlog"); n != 1 || strings.Contains(errOut, "process -1") {
		t.Errorf("lock warning printed %d times:\n%s", n, errOut)
	}
}
