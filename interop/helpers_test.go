package interop

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partlogBin is the partlog binary built by TestMain.
var partlogBin string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "partlog-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	partlogBin = filepath.Join(tmp, "partlog")
	// Built from the engine's own module (the directory above), as a
	// user builds it.
	build := exec.Command("go", "build", "-o", partlogBin, "./cmd/partlog")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building partlog:", err)
		_ = os.RemoveAll(tmp)
		os.Exit(1)
	}
	code := m.Run()
	for _, f := range afterAll {
		f()
	}
	_ = os.RemoveAll(tmp)
	os.Exit(code)
}

// server is a running `partlog serve`.
type server struct {
	t       testing.TB
	dir     string
	addr    string
	admin   string // the admin endpoint ("admin on" line)
	args    []string
	cmd     *exec.Cmd
	logPath string // the server's stderr, appended over restarts
	exited  chan struct{}
}

// startServer runs `partlog serve --dir dir --listen 127.0.0.1:0 args...`
// (or on addr when restarting) and waits for its "listening on" line.
func startServer(t testing.TB, dir string, args ...string) *server {
	t.Helper()
	s := &server{t: t, dir: dir, args: args}
	s.start("127.0.0.1:0")
	t.Cleanup(s.stop)
	return s
}

func (s *server) start(listen string) {
	t := s.t
	t.Helper()
	args := append([]string{"serve", "--dir", s.dir, "--listen", listen, "--admin", "127.0.0.1:0"}, s.args...)
	cmd := exec.Command(partlogBin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if s.logPath == "" {
		s.logPath = filepath.Join(t.TempDir(), "serve.log")
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	lines := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var addr string
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr = a
			}
			if a, ok := strings.CutPrefix(sc.Text(), "admin on "); ok {
				lines <- [2]string{addr, a}
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(s.exited) }()
	select {
	case a := <-lines:
		s.addr, s.admin = a[0], a[1]
	case <-s.exited:
		t.Fatalf("partlog serve exited: %s", s.log())
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("partlog serve did not start: %s", s.log())
	}
}

// log returns what the server wrote on stderr.
func (s *server) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// stop shuts the server down with SIGTERM (a clean shutdown), waits, and
// runs partlog's consistency check on its directory.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.t.Errorf("partlog serve did not stop on SIGTERM: %s", s.log())
	}
	code := s.cmd.ProcessState.ExitCode()
	if code != 0 {
		s.t.Errorf("partlog serve exited %d: %s", code, s.log())
	}
	s.cmd = nil
	if code == 0 {
		// A clean shutdown leaves every partition consistent.
		if err := partlog.Check(s.dir, nil); err != nil {
			s.t.Errorf("consistency check of %s: %v", s.dir, err)
		}
	}
}

// kill SIGKILLs the server.
func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// restart starts the server again on the same address.
func (s *server) restart() { s.start(s.addr) }

// client returns a kgo client of the server, closed at the end of the test.
func (s *server) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	// kgo asks for auto-creation only when told (Kafka honours the
	// request's flag, and so does partlog serve).
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.addr), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// groupsSupported reports whether the server advertises JoinGroup.
func groupsSupported(t testing.TB, s *server) bool {
	t.Helper()
	c := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 11 {
			return true
		}
	}
	return false
}

// requireGroups fails a consumer-group test when the server does not
// advertise the group protocol (partlog serve always runs its group
// coordinator).
func requireGroups(t testing.TB, s *server) {
	t.Helper()
	if !groupsSupported(t, s) {
		t.Fatal("the server does not advertise JoinGroup in ApiVersions: its group coordinator is missing")
	}
}

// runPartlog runs a partlog subcommand and returns its output and exit code.
func runPartlog(t testing.TB, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(partlogBin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		t.Fatal(err)
	}
	return string(out), 0
}

// requireTool returns the path of a client tool, skipping the test when
// it is missing unless PARTLOG_INTEROP_REQUIRE_CLIENTS=1 (then it fails).
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("PARTLOG_INTEROP_REQUIRE_CLIENTS") == "1" {
			t.Fatalf("%s not found and PARTLOG_INTEROP_REQUIRE_CLIENTS=1: %v", name, err)
		}
		t.Skipf("%s not found (set PARTLOG_INTEROP_REQUIRE_CLIENTS=1 to fail instead): %v", name, err)
	}
	return p
}

func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
