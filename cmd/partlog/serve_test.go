package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog"
)

// The serving itself is tested by the interop module, which runs the
// binary against real clients; these are the command's refusals.
func TestServeRefusals(t *testing.T) {
	if code, _, errOut := runCLI(t, "", "serve"); code != exitUsage || !strings.Contains(errOut, "--dir is required") {
		t.Fatalf("serve without --dir: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "serve", "--dir", t.TempDir(), "--partitions", "0"); code != exitUsage {
		t.Fatalf("--partitions 0: exit %d", code)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	code, _, errOut := runCLI(t, "", "serve", "--dir", dir, "--listen", ln.Addr().String())
	if code != exitOperational || !strings.Contains(errOut, "address already in use") {
		t.Fatalf("address in use: exit %d, %q", code, errOut)
	}
}

// TestServeListensBeforeOpening: a serve that cannot listen opened the
// directory first (recovering it, removing its clean-shutdown marker,
// writing its state file); it fails before touching it.
func TestServeListensBeforeOpening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fresh := filepath.Join(t.TempDir(), "never")
	if code, _, _ := runCLI(t, "", "serve", "--dir", fresh, "--listen", ln.Addr().String()); code != exitOperational {
		t.Fatalf("address in use: exit %d", code)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s made by a serve that could not listen: %v", fresh, err)
	}
	dir := t.TempDir()
	d, err := partlog.OpenDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	before := listDir(t, dir)
	if code, _, _ := runCLI(t, "", "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--admin", ln.Addr().String()); code != exitOperational {
		t.Fatalf("admin address in use: exit %d", code)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Fatalf("directory changed by a serve that could not listen: %v, was %v", after, before)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestServeLogsRecovery: serve said nothing of what recovery did at its
// start (a crash's cut data among it); it logs a line per partition
// recovered with changes (bytes cut and why, indexes rebuilt, where the
// removed bytes are kept) and a summary line.
func TestServeLogsRecovery(t *testing.T) {
	dir := t.TempDir()
	d, err := partlog.OpenDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		l, err := d.Create("r", p, partlog.TopicID{1}, &partlog.Options{SegmentBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if _, err := l.AppendAsLeader(dataBatch(t, 2, fmt.Sprint(i)), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash: no marker, and a torn write at the end of r-1.
	if err := os.Remove(filepath.Join(dir, ".kafka_cleanshutdown")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "r-1", "00000000000000000000.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("torn write!")); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	d, err = partlog.OpenDir(dir, &partlog.DirOptions{Log: &partlog.Options{Quarantine: "partlog-quarantine/test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var out strings.Builder
	logOpen(&out, d)
	got := out.String()
	for _, want := range []string{
		"serve: recovered r-1: 11 bytes cut from offset",
		"removed bytes kept in " + filepath.Join(dir, "r-1", "partlog-quarantine", "test"),
		"after a crash",
		"2 partitions served",
		"1 with data cut (11 bytes)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}
