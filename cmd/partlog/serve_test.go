package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestServeProfiles runs serve with the hidden profiling flags until its
// context ends: both profiles are written (gzip'd protobuf, what pprof
// reads), and a profile that cannot be created is an operational error.
func TestServeProfiles(t *testing.T) {
	dir := t.TempDir()
	o := serveOptions{listen: "127.0.0.1:0", dir: filepath.Join(dir, "data"), admin: "off", partitions: 1,
		cpuProfile: filepath.Join(dir, "cpu.pprof"), memProfile: filepath.Join(dir, "mem.pprof")}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	if err := o.run(ctx, &out, &errOut); err != nil {
		t.Fatalf("serve: %v (%s)", err, errOut.String())
	}
	for _, p := range []string{o.cpuProfile, o.memProfile} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("%s is not a gzip'd profile (%d bytes): %s", p, len(b), errOut.String())
		}
	}
	code, _, msg := runCLI(t, "", "serve", "--dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--admin", "off",
		"--cpuprofile", filepath.Join(dir, "missing", "cpu.pprof"))
	if code != exitOperational || !strings.Contains(msg, "cpu.pprof") {
		t.Fatalf("profile in a missing directory: exit %d, %q", code, msg)
	}
}

// TestServeProfileWindows: with --profile-signals the CPU profile covers
// the windows from SIGUSR1 to SIGUSR2, each written when it ends (none
// before the first); without --cpuprofile the switch is refused.
func TestServeProfileWindows(t *testing.T) {
	dir := t.TempDir()
	o := serveOptions{listen: "127.0.0.1:0", dir: filepath.Join(dir, "data"), admin: "off", partitions: 1,
		cpuProfile: filepath.Join(dir, "window.pprof"), profSignal: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var errOut bytes.Buffer
	ran := make(chan error, 1)
	go func() { ran <- o.run(ctx, outW, &errOut); outW.Close() }()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("serve printed %q (%v)", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if _, err := os.Stat(o.cpuProfile); !os.IsNotExist(err) {
		t.Fatalf("a profile before any window: %v", err)
	}
	for window := range 2 {
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := os.ReadFile(o.cpuProfile)
			if err == nil && len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("window %d: no profile (%v, %d bytes)", window, err, len(b))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if window == 0 {
			if err := os.Remove(o.cpuProfile); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("serve: %v (%s)", err, errOut.String())
	}
	if _, err := os.Stat(o.cpuProfile + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("a window's temporary file is left: %v", err)
	}
	code, _, msg := runCLI(t, "", "serve", "--dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--admin", "off", "--profile-signals")
	if code != exitOperational || !strings.Contains(msg, "--profile-signals needs --cpuprofile") {
		t.Fatalf("--profile-signals alone: exit %d, %q", code, msg)
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
	d, err = partlog.OpenDir(dir, &partlog.DirOptions{Quarantine: "partlog-quarantine/test"})
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
