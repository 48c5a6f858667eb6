package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/dump"
	"github.com/partlog/partlog/internal/testutil"
)

// realLogDir is one log directory of testdata/realkafka: written by a
// Kafka broker and committed to a public repository (see its SOURCE.txt).
type realLogDir struct {
	name string // <owner>+<repository>
	path string
	// noLogs: the repository kept the indexes and snapshots but none of
	// the .log files (its .gitignore dropped them), so every partition is
	// really missing data and verify must say so.
	noLogs bool
}

func realLogDirs(t *testing.T) []realLogDir {
	t.Helper()
	props, err := filepath.Glob("testdata/realkafka/*/*/meta.properties")
	if err != nil {
		t.Fatal(err)
	}
	if len(props) < 6 {
		t.Fatalf("found %d real log directories, want at least 6", len(props))
	}
	var out []realLogDir
	for _, p := range props {
		dir := filepath.Dir(p)
		logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
		out = append(out, realLogDir{name: filepath.Base(filepath.Dir(dir)), path: dir, noLogs: len(logs) == 0})
	}
	return out
}

// partitionDirs returns the partition directories of a log directory.
func partitionDirs(t *testing.T, logDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(logDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, ok := partlog.ParsePartitionDir(e.Name()); ok && e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// copyLogDir copies a log directory into a new temporary directory.
func copyLogDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// dumpableFiles returns the files of a partition directory that dump
// reads, and whether each index has its .log.
func dumpableFiles(t *testing.T, dir string) (files []string, orphanIndexes []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		switch filepath.Ext(name) {
		case ".index", ".timeindex", ".txnindex":
			stem := strings.TrimSuffix(name, filepath.Ext(name))
			if _, err := os.Stat(filepath.Join(dir, stem+".log")); err != nil {
				orphanIndexes = append(orphanIndexes, name)
				continue
			}
		case ".log", ".snapshot", ".checkpoint":
		default:
			continue
		}
		files = append(files, filepath.Join(dir, name))
	}
	return files, orphanIndexes
}

// hasData reports whether a partition directory holds a non-empty .log.
func hasData(dir string) bool {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil && fi.Size() > 0 {
			return true
		}
	}
	return false
}

// decoderFor is the dump decoder flag a partition's topic calls for.
func decoderFor(partition string) string {
	switch {
	case strings.HasPrefix(partition, "__consumer_offsets-"):
		return "--offsets-decoder"
	case strings.HasPrefix(partition, "__transaction_state-"):
		return "--transaction-log-decoder"
	case strings.HasPrefix(partition, "__cluster_metadata-"):
		return "--cluster-metadata-decoder"
	}
	return "--print-data-log"
}

// checkDumpJSON fails unless every object of a `dump --json` output has
// no problems and every batch is valid; it returns the batch count.
func checkDumpJSON(t *testing.T, what, out string) int {
	t.Helper()
	batches := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var f dump.File
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(f.Problems) > 0 {
			t.Errorf("%s: %s: problems %+v", what, f.File, f.Problems)
		}
		for _, b := range f.Batches {
			batches++
			if !b.CRCValid {
				t.Errorf("%s: %s: batch at %d invalid", what, f.File, b.Position)
			}
		}
	}
	return batches
}

// check fails the test with the message unless ok.
func check(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}

// TestRealKafkaDirectories runs every command of the CLI on each partition
// of the real log directories in testdata/realkafka: dump exits 0 with
// every batch valid (text and JSON, with the topic's decoder), the
// read-only commands (dump, verify, info, producers) leave every file
// byte-identical, and recover --apply on a copy changes no .log byte. verify
// and producers exit 0 on a healthy directory, and every file recover
// --apply changes is in the quarantine. The exit codes are logged as a
// table.
func TestRealKafkaDirectories(t *testing.T) {
	type tally struct{ partitions, batches, orphanIndexes int }
	codes := map[string]map[int]int{} // command -> exit code -> partitions
	count := func(cmd string, code int) {
		if codes[cmd] == nil {
			codes[cmd] = map[int]int{}
		}
		codes[cmd][code]++
	}
	var total tally
	for _, ld := range realLogDirs(t) {
		t.Run(ld.name, func(t *testing.T) {
			work := copyLogDir(t, ld.path)
			before := testutil.HashTree(t, work)
			parts := partitionDirs(t, work)
			if len(parts) == 0 {
				t.Fatal("no partition directory")
			}
			var sum tally
			// KRaft snapshots at the top of the log directory.
			tops, _ := filepath.Glob(filepath.Join(work, "*.checkpoint"))
			if len(tops) > 0 {
				code, out, errOut := runCLI(t, "", append([]string{"dump", "--json", "--cluster-metadata-decoder"}, tops...)...)
				if code != exitOK {
					t.Errorf("dump %v: exit %d: %s", tops, code, errOut)
				}
				sum.batches += checkDumpJSON(t, "dump "+strings.Join(tops, ","), out)
			}
			emptySeen := 0
			for _, p := range parts {
				dir := filepath.Join(work, p)
				// With -short, only three of a log directory's partitions
				// without data are checked (most are empty
				// __consumer_offsets partitions, all alike).
				if testing.Short() && !hasData(dir) {
					if emptySeen++; emptySeen > 3 {
						continue
					}
				}
				sum.partitions++
				files, orphans := dumpableFiles(t, dir)
				sum.orphanIndexes += len(orphans)
				if len(orphans) > 0 && !ld.noLogs {
					t.Errorf("%s: indexes without their .log: %v", p, orphans)
				}
				if len(files) > 0 {
					args := append([]string{"dump", "--json", "--deep-iteration", decoderFor(p)}, files...)
					code, out, errOut := runCLI(t, "", args...)
					if code != exitOK {
						t.Errorf("%s: dump --json: exit %d: %s", p, code, errOut)
					}
					sum.batches += checkDumpJSON(t, p, out)
					code, out, errOut = runCLI(t, "", "dump", decoderFor(p), "--files", strings.Join(files, ","))
					if code != exitOK {
						t.Errorf("%s: dump --files: exit %d: %s", p, code, errOut)
					}
					if strings.Contains(out, "isvalid: false") || strings.Contains(out, "Error at ") {
						t.Errorf("%s: dump %s reports invalid data:\n%s", p, decoderFor(p), out)
					}
				}
				vcode, vout, verr := runCLI(t, "", "verify", dir)
				count("verify", vcode)
				icode, iout, _ := runCLI(t, "", "info", dir)
				count("info", icode)
				if strings.Contains(iout, "status: problems") && strings.Contains(iout, "problems: none") {
					t.Errorf("%s: info says no problems under status problems:\n%s", p, iout)
				}
				pcode, _, perr := runCLI(t, "", "producers", dir)
				count("producers", pcode)
				if ld.noLogs {
					// Data really is missing: verify must say so.
					if vcode != exitProblems || !strings.Contains(vout, "problem") {
						t.Errorf("%s: verify of a partition without its .log files: exit %d, want 4 naming the problem:\n%s%s", p, vcode, vout, verr)
					}
					continue
				}
				check(t, vcode == exitOK, "%s: verify exit %d, want 0:\n%s%s", p, vcode, vout, verr)
				check(t, pcode == exitOK, "%s: producers exit %d, want 0: %s", p, pcode, perr)
			}
			// The read-only commands changed nothing.
			sameTree(t, before, testutil.HashTree(t, work))

			// recover --apply on a second copy: no .log byte changes; every
			// other changed or removed file has its old bytes in the
			// quarantine.
			fix := copyLogDir(t, ld.path)
			q := filepath.Join(t.TempDir(), "quarantine")
			code, out, errOut := runCLI(t, "", "recover", "--apply", "--quarantine", q, fix)
			count("recover --apply (per log directory)", code)
			if code&exitOperational != 0 || code == exitUsage {
				t.Errorf("recover --apply: exit %d:\n%s%s", code, out, errOut)
			}
			after := testutil.HashTree(t, fix)
			quarantined := map[string]bool{}
			if _, err := os.Stat(q); err == nil {
				for _, h := range testutil.HashTree(t, q) {
					quarantined[h] = true
				}
			}
			for rel, h := range before {
				if h == "dir" || after[rel] == h {
					continue
				}
				if strings.HasSuffix(rel, ".log") {
					t.Errorf("recover --apply changed %s", rel)
					continue
				}
				check(t, quarantined[h], "recover --apply changed or removed %s without keeping its bytes in the quarantine", rel)
			}
			code, out, _ = runCLI(t, "", "recover", "--apply", "--quarantine", filepath.Join(t.TempDir(), "q2"), fix)
			check(t, code == exitOK, "second recover --apply: exit %d, want 0 (nothing left to do):\n%s", code, out)

			t.Logf("%s: %d partitions, %d batches dumped, %d indexes without a .log", ld.name, sum.partitions, sum.batches, sum.orphanIndexes)
			total.partitions += sum.partitions
			total.batches += sum.batches
			total.orphanIndexes += sum.orphanIndexes
		})
	}
	var lines []string
	for cmd, m := range codes {
		var cs []string
		for c, n := range m {
			cs = append(cs, fmt.Sprintf("exit %d: %d", c, n))
		}
		sort.Strings(cs)
		lines = append(lines, fmt.Sprintf("  %s: %s", cmd, strings.Join(cs, ", ")))
	}
	sort.Strings(lines)
	t.Logf("%d partitions, %d batches dumped; exit codes:\n%s", total.partitions, total.batches, strings.Join(lines, "\n"))
}
