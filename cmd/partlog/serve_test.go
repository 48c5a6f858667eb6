package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
