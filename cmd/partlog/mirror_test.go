package main

import (
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog/server"
)

// TestMirrorCommandUsage: what `partlog mirror` refuses before asking a
// server, and the exit codes of its answers.
func TestMirrorCommandUsage(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mirror"}, exitUsage, ""},
		{[]string{"mirror", "start", "--server", deadAddr, "--topics", "t"}, exitUsage, "--source and --topics are required"},
		{[]string{"mirror", "start", "--server", deadAddr, "--source", "x:1"}, exitUsage, "--source and --topics are required"},
		{[]string{"mirror", "stop", "--server", deadAddr}, exitUsage, "--topics is required"},
		{[]string{"mirror", "stop", "--server", deadAddr, "--topics", "t", "--policy", "KEEP"}, exitUsage, "want TRUNCATE_LSO or ABORT_OPEN"},
		{[]string{"mirror", "status", "--server", deadAddr}, exitOperational, "connection refused"},
		{[]string{"mirror", "status", "--server", "bad host:1"}, exitUsage, "--server"},
	} {
		code, _, errOut := runCLI(t, "", c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want %d, %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// TestMirrorCommandAgainstServer runs the subcommands against an admin
// endpoint: status of a server without mirrors, a start refused by the
// server (bad request: exit 16; unreachable source: exit 8).
func TestMirrorCommandAgainstServer(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Open(server.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := httptest.NewServer(srv.AdminHandler())
	defer h.Close()
	addr := strings.TrimPrefix(h.URL, "http://")
	code, out, _ := runCLI(t, "", "mirror", "status", "--server", addr)
	if code != 0 || !strings.Contains(out, "no mirrored partitions") {
		t.Fatalf("status: exit %d, %q", code, out)
	}
	code, out, _ = runCLI(t, "", "mirror", "status", "--server", addr, "--json")
	var a server.AdminResponse
	if err := json.Unmarshal([]byte(out), &a); code != 0 || err != nil || a.ClusterID == "" || a.Partitions == nil {
		t.Fatalf("status --json: exit %d, %v, %q", code, err, out)
	}
	if code, _, errOut := runCLI(t, "", "mirror", "start", "--server", addr, "--dir", dir, "--source", "127.0.0.1:1", "--topics", "a/b"); code != exitUsage || !strings.Contains(errOut, "invalid topic name") {
		t.Fatalf("start of a bad topic: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "mirror", "start", "--server", addr, "--dir", dir, "--source", "127.0.0.1:1", "--topics", "t", "--timeout", "30s"); code != exitOperational || !strings.Contains(errOut, "metadata of source") {
		t.Fatalf("start from an unreachable source: exit %d, %q", code, errOut)
	}
	if code, out, _ := runCLI(t, "", "mirror", "stop", "--server", addr, "--dir", dir, "--topics", "t"); code != exitProblems {
		t.Fatalf("stop of an unknown topic: exit %d, %q", code, out)
	}
	// Without the token a change is refused before it is sent; with a
	// wrong one the server refuses it.
	if code, _, errOut := runCLI(t, "", "mirror", "stop", "--server", addr, "--topics", "t"); code != exitUsage || !strings.Contains(errOut, "--dir") {
		t.Fatalf("stop without a token: exit %d, %q", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bad, []byte("not-the-token-at-all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "", "mirror", "stop", "--server", addr, "--token-file", bad, "--topics", "t"); code != exitOperational || !strings.Contains(errOut, "admin token") {
		t.Fatalf("stop with a wrong token: exit %d, %q", code, errOut)
	}
}

// TestMirrorStatusTableSaysWhatItShows: the column headed LAST MIRRORED
// showed the end of the mirrored range (the offset after the last
// mirrored record); it is headed MIRRORED END, and a start's answer shows
// how many offsets each partition lost (TRUNCATED), as the failback's
// truncation is otherwise silent on the command line.
func TestMirrorStatusTableSaysWhatItShows(t *testing.T) {
	var out strings.Builder
	o := mirrorOptions{}
	err := o.print(&out, server.AdminResponse{Partitions: []server.MirrorPartitionStatus{{
		Topic: "orders", Partition: 0, State: "MIRRORING", LogEndOffset: 12, LastMirroredOffset: 12,
		Lag: 0, BarrierOffset: -1, Truncated: 5,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "LAST MIRRORED") {
		t.Fatalf("table:\n%s", out.String())
	}
	header, row := lines[0], lines[1]
	col := func(name string) string {
		i := strings.Index(header, name)
		if i < 0 {
			t.Fatalf("no %s column:\n%s", name, out.String())
		}
		return strings.Fields(row[i:])[0]
	}
	if got := col("MIRRORED END"); got != "12" {
		t.Errorf("MIRRORED END %q, want 12", got)
	}
	if got := col("TRUNCATED"); got != "5" {
		t.Errorf("TRUNCATED %q, want 5", got)
	}
}
