package main

import (
	"net"
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
