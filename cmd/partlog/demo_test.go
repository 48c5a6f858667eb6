package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/testutil"
)

// TestDemo runs the README's main command in-process: it must build the
// crashed directory, find the torn tail, repair it, and end clean.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "", "demo", "--dir", dir)
	if code != exitOK {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"Found 40 invalid bytes at the end of 00000000000000000000.log",
		"MirrorPidReset {\"version\":0,\"sourceClusterId\":\"AAAAAAAAAAAAAAAAAAAAAQ\"}",
		"torn-tail",
		"repaired",
		"ok (nothing to do)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	checkConsistent(t, dir)
}

// TestDemoRefusesKafkaData: demo --dir must not build (and damage) a
// partition where Kafka data already lives; it used to rewrite a real
// .timeindex. Every file must stay as it was.
func TestDemoRefusesKafkaData(t *testing.T) {
	real := "testdata/realkafka/karol-ostrowski+yacht-tracker/kafka-data"
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		{"log directory", func(t *testing.T) string { return copyLogDir(t, real) }, "already holds"},
		{"partition directory", func(t *testing.T) string { return filepath.Join(copyLogDir(t, real), "test-topic-0") }, "already holds Kafka file"},
		{"orders-0 present", func(t *testing.T) string {
			d := t.TempDir()
			if err := os.Mkdir(filepath.Join(d, "orders-0"), 0o755); err != nil {
				t.Fatal(err)
			}
			return d
		}, "already holds partition directory orders-0"},
		{"meta.properties only", func(t *testing.T) string {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, "meta.properties"), []byte("version=0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return d
		}, "already holds Kafka file meta.properties"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			before := testutil.HashTree(t, dir)
			code, out, errOut := runCLI(t, "", "demo", "--dir", dir)
			if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			sameTree(t, before, testutil.HashTree(t, dir))
		})
	}
	// A directory holding other files only, or none yet, is accepted.
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "", "demo", "--dir", d); code != exitOK {
		t.Errorf("unrelated files: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "demo", "--dir", filepath.Join(t.TempDir(), "new")); code != exitOK {
		t.Errorf("new directory: exit %d: %s", code, errOut)
	}
}

// TestDemoSaysHowToKeep: the demo's temporary directory used to vanish
// with no word of --keep; it now says it removes it and how to keep it,
// and with --keep keeps it and names it.
func TestDemoSaysHowToKeep(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	code, out, errOut := runCLI(t, "", "demo")
	if code != exitOK {
		t.Fatalf("demo exit %d: %s", code, errOut)
	}
	removed := lastLine(out)
	if !strings.HasPrefix(removed, "# removing ") || !strings.Contains(removed, "--keep") {
		t.Fatalf("last line %q, want the removal and --keep", removed)
	}
	gone := strings.Fields(strings.TrimPrefix(removed, "# removing "))[0]
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", gone, err)
	}
	code, out, errOut = runCLI(t, "", "demo", "--keep")
	if code != exitOK {
		t.Fatalf("demo --keep exit %d: %s", code, errOut)
	}
	kept := strings.TrimPrefix(lastLine(out), "# kept ")
	if _, err := os.Stat(filepath.Join(kept, "orders-0", "00000000000000000000.log")); err != nil {
		t.Fatalf("demo --keep: last line %q: %v", lastLine(out), err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
