package kafka

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testutil"
)

// Result is what a Kafka tool printed and its exit code.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Main classes of Kafka's bin/ tools.
const (
	DumpLogSegments     = "org.apache.kafka.tools.DumpLogSegments"
	TopicCommand        = "org.apache.kafka.tools.TopicCommand"
	ConfigCommand       = "org.apache.kafka.tools.ConfigCommand"
	ConsumerGroups      = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	TransactionsCommand = "org.apache.kafka.tools.TransactionsCommand"
	LogDirsCommand      = "org.apache.kafka.tools.LogDirsCommand"
	GetOffsetShell      = "org.apache.kafka.tools.GetOffsetShell"
	DeleteRecords       = "org.apache.kafka.tools.DeleteRecordsCommand"
	ProducerPerformance = "org.apache.kafka.tools.ProducerPerformance"
	ConsumerPerformance = "org.apache.kafka.tools.ConsumerPerformance"
	EndToEndLatency     = "org.apache.kafka.tools.EndToEndLatency"
	ConsoleConsumer     = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	ConsoleProducer     = "org.apache.kafka.tools.ConsoleProducer"
	StorageTool         = "kafka.tools.StorageTool"
)

// toolLog4j sends the tools' own logging (warnings and errors) to
// stderr, never into the stdout a test compares.
const toolLog4j = `status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
`

var (
	toolLogOnce sync.Once
	toolLogPath string
)

// toolJVMArgs are the JVM flags of a tool process: a small heap, the
// quick-starting compiler and collector (jvm nil), or jvm; then the
// logging configuration above.
func (in *Install) toolJVMArgs(jvm []string) []string {
	toolLogOnce.Do(func() {
		f, err := os.CreateTemp("", "partlog-kafka-tools-*.properties")
		if err != nil {
			return
		}
		_, _ = f.WriteString(toolLog4j)
		f.Close()
		toolLogPath = f.Name()
	})
	args := append([]string(nil), jvm...)
	if jvm == nil {
		args = []string{"-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	}
	args = append(args, "-Djava.awt.headless=true")
	if toolLogPath != "" {
		args = append(args, "-Dlog4j2.configurationFile="+toolLogPath)
	}
	return args
}

// Run runs one Kafka tool (its main class and arguments) in a JVM of its
// own and returns its output. The error is for a tool that could not be
// run at all; a tool that fails reports it in Result.Code.
func (in *Install) Run(ctx context.Context, class string, args ...string) (Result, error) {
	argv := append(in.toolJVMArgs(nil), "-cp", in.Classpath(), class)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, in.Java, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		res.Code = ee.ExitCode()
	default:
		return res, fmt.Errorf("running %s %s: %w\n%s", class, quoteArgs(args), err, res.Stderr)
	}
	return res, nil
}

// Tools is one JVM running Kafka's tools one after another (ToolRunner):
// a tool call costs milliseconds instead of a JVM start. Calls are
// serialised. Tools that run until stopped (a console consumer) belong
// in Run with a context instead.
type Tools struct {
	in     *Install
	jvm    []string // JVM flags (nil: toolJVMArgs' defaults)
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr testutil.SyncBuffer // the JVM's own stderr (its logging)
	pid    atomic.Int64        // cmd's process id, 0 without one (read during a call)
}

// StartTools starts the tool JVM of a test (stopped at its end). It ends
// the test through Unavailable when the JVM cannot start.
func (in *Install) StartTools(t testing.TB) *Tools {
	t.Helper()
	tl, err := in.NewTools()
	if err != nil {
		Unavailable(t, err)
	}
	t.Cleanup(tl.Close)
	return tl
}

// StartToolsJVM is StartTools with the tool JVM's flags (heap, compiler,
// collector) given, for clients that are measured: a benchmark wants a
// fixed heap and the optimizing compiler, not a quick start.
func (in *Install) StartToolsJVM(t testing.TB, jvm ...string) *Tools {
	t.Helper()
	tl, err := in.newTools(append([]string{}, jvm...))
	if err != nil {
		Unavailable(t, err)
	}
	t.Cleanup(tl.Close)
	return tl
}

// NewTools starts a tool JVM; Close stops it.
func (in *Install) NewTools() (*Tools, error) { return in.newTools(nil) }

func (in *Install) newTools(jvm []string) (*Tools, error) {
	if _, err := in.Helpers(); err != nil {
		return nil, err
	}
	tl := &Tools{in: in, jvm: jvm}
	if err := tl.start(); err != nil {
		return nil, err
	}
	return tl, nil
}

func (tl *Tools) start() error {
	argv := append(tl.in.toolJVMArgs(tl.jvm), "-cp", tl.in.Classpath(), "ToolRunner")
	cmd := exec.Command(tl.in.Java, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	tl.stderr.Reset()
	cmd.Stderr = &tl.stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the Kafka tool JVM: %w", err)
	}
	tl.cmd, tl.stdin, tl.stdout = cmd, stdin, bufio.NewReaderSize(stdout, 1<<16)
	tl.pid.Store(int64(cmd.Process.Pid))
	return nil
}

// Run runs class's main with args in the tool JVM. A tool that does not
// answer within timeout (0: 2 minutes) is killed with the JVM, which the
// next call starts again.
func (tl *Tools) Run(timeout time.Duration, class string, args ...string) (Result, error) {
	for _, a := range append([]string{class}, args...) {
		if strings.ContainsAny(a, "\r\n") {
			return Result{}, fmt.Errorf("tool argument %q holds a line break", a)
		}
	}
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.cmd == nil {
		if err := tl.start(); err != nil {
			return Result{}, err
		}
	}
	var req strings.Builder
	fmt.Fprintf(&req, "%d\n%s\n", len(args), class)
	for _, a := range args {
		req.WriteString(a)
		req.WriteByte('\n')
	}
	type answer struct {
		res Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		if _, err := io.WriteString(tl.stdin, req.String()); err != nil {
			done <- answer{err: err}
			return
		}
		res, err := tl.read()
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			tl.kill()
			return Result{}, fmt.Errorf("tool JVM: %s %s: %w\n%s", class, quoteArgs(args), a.err, tl.stderr.String())
		}
		return a.res, nil
	case <-time.After(timeout):
		tl.kill()
		<-done
		return Result{}, fmt.Errorf("%s %s did not finish within %v", class, quoteArgs(args), timeout)
	}
}

// read parses one answer of ToolRunner.
func (tl *Tools) read() (Result, error) {
	head, err := tl.stdout.ReadString('\n')
	if err != nil {
		return Result{}, err
	}
	var code, no, ne int
	if _, err := fmt.Sscanf(head, "EXIT %d %d %d\n", &code, &no, &ne); err != nil {
		return Result{}, fmt.Errorf("bad answer %q: %w", head, err)
	}
	buf := make([]byte, no+ne)
	if _, err := io.ReadFull(tl.stdout, buf); err != nil {
		return Result{}, err
	}
	return Result{Stdout: string(buf[:no]), Stderr: string(buf[no:]), Code: code}, nil
}

func (tl *Tools) kill() {
	if tl.cmd == nil {
		return
	}
	_ = tl.cmd.Process.Kill()
	_ = tl.cmd.Wait()
	tl.cmd = nil
	tl.pid.Store(0)
}

// Pid is the tool JVM's process id (0 while none runs: before the first
// call after a killed one). It does not wait for a call in progress.
func (tl *Tools) Pid() int { return int(tl.pid.Load()) }

// Close stops the tool JVM.
func (tl *Tools) Close() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.cmd == nil {
		return
	}
	tl.stdin.Close()
	waited := make(chan struct{})
	go func() { _ = tl.cmd.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		_ = tl.cmd.Process.Kill()
		<-waited
	}
	tl.cmd = nil
	tl.pid.Store(0)
}

// Dump runs DumpLogSegments over files with flags (e.g. "--deep-iteration",
// "--print-data-log") and returns its stdout; a non-zero exit is an error.
func (tl *Tools) Dump(files []string, flags ...string) (string, error) {
	abs := make([]string, len(files))
	for i, f := range files {
		a, err := filepath.Abs(f)
		if err != nil {
			return "", err
		}
		abs[i] = a
	}
	args := append([]string{"--files", strings.Join(abs, ",")}, flags...)
	res, err := tl.Run(0, DumpLogSegments, args...)
	if err != nil {
		return "", err
	}
	if res.Code != 0 {
		return res.Stdout, fmt.Errorf("DumpLogSegments %s exited %d: %s", quoteArgs(args), res.Code, res.Stderr)
	}
	return res.Stdout, nil
}
