package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerConfig says how to run a single-node KRaft broker (broker and
// controller in one process).
type BrokerConfig struct {
	// Dir holds everything of the broker: data/ (log.dirs), meta/
	// (metadata.log.dir, __cluster_metadata-0), logs/ (server.log) and
	// server.properties. Empty: a new t.TempDir().
	Dir string
	// Props override or add to the broker's properties (defaults in
	// baseProps: one replica, one partition for the internal topics, no
	// initial rebalance delay).
	Props map[string]string
	// HeapMB is the JVM's fixed heap (-Xms = -Xmx); 0 means 512.
	HeapMB int
	// LogDirs is the number of log directories (log.dirs); 0 means 1.
	// The first is Dir/data, the others Dir/data2, Dir/data3, ...; Kafka
	// spreads a new topic's partitions over them round robin.
	LogDirs int
}

// Broker is a running (or stopped) single-node Kafka.
type Broker struct {
	in     *Install
	t      testing.TB
	Dir    string // see BrokerConfig.Dir
	LogDir string // the first of log.dirs: partitions, checkpoints, meta.properties
	// LogDirs are all the log directories, LogDir first.
	LogDirs []string
	MetaDir string // metadata.log.dir: __cluster_metadata-0
	Addr    string // PLAINTEXT listener, host:port
	// ClusterID is the cluster id the directories were formatted with.
	ClusterID string
	ctrl      string // CONTROLLER listener
	heapMB    int
	props     map[string]string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// baseProps are the broker settings every test starts from: what a
// one-node cluster needs, and what keeps it quick to start.
func baseProps(b *Broker) map[string]string {
	return map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          "1",
		"controller.quorum.voters":                         "1@" + b.ctrl,
		"listeners":                                        "PLAINTEXT://" + b.Addr + ",CONTROLLER://" + b.ctrl,
		"advertised.listeners":                             "PLAINTEXT://" + b.Addr,
		"controller.listener.names":                        "CONTROLLER",
		"inter.broker.listener.name":                       "PLAINTEXT",
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                                         strings.Join(b.LogDirs, ","),
		"metadata.log.dir":                                 b.MetaDir,
		"offsets.topic.replication.factor":                 "1",
		"offsets.topic.num.partitions":                     "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"transaction.state.log.num.partitions":             "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
		"num.partitions":                                   "1",
		"auto.create.topics.enable":                        "true",
	}
}

// StartBroker formats a new single-node cluster in cfg.Dir on free
// loopback ports and starts it; it returns once the broker answers
// Metadata with itself. The broker is killed at the end of the test if
// it still runs. A broker that cannot start ends the test through
// Unavailable (fail under $PARTLOG_INTEROP_REQUIRE_KAFKA=1, else skip).
func (in *Install) StartBroker(t testing.TB, cfg BrokerConfig) *Broker {
	t.Helper()
	b, err := in.NewBroker(t, cfg)
	if err != nil {
		Unavailable(t, err)
	}
	if err := b.Start(); err != nil {
		Unavailable(t, err)
	}
	return b
}

// NewBroker formats a cluster in cfg.Dir without starting it, so a test
// can place files in LogDir first.
func (in *Install) NewBroker(t testing.TB, cfg BrokerConfig) (*Broker, error) {
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.HeapMB == 0 {
		cfg.HeapMB = 512
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		in: in, t: t, Dir: cfg.Dir,
		LogDir:  filepath.Join(cfg.Dir, "data"),
		MetaDir: filepath.Join(cfg.Dir, "meta"),
		Addr:    ports[0], ctrl: ports[1], heapMB: cfg.HeapMB,
	}
	b.LogDirs = []string{b.LogDir}
	for i := 2; i <= cfg.LogDirs; i++ {
		b.LogDirs = append(b.LogDirs, filepath.Join(cfg.Dir, "data"+strconv.Itoa(i)))
	}
	b.props = baseProps(b)
	for k, v := range cfg.Props {
		b.props[k] = v
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	if err := b.writeConfig(); err != nil {
		return nil, err
	}
	b.ClusterID = randomClusterID()
	res, err := in.Run(context.Background(), "kafka.tools.StorageTool",
		"format", "-t", b.ClusterID, "-c", b.propsPath())
	if err != nil {
		return nil, err
	}
	if res.Code != 0 {
		return nil, fmt.Errorf("kafka-storage format exited %d: %s%s", res.Code, res.Stdout, res.Stderr)
	}
	t.Cleanup(b.cleanup)
	return b, nil
}

func (b *Broker) propsPath() string { return filepath.Join(b.Dir, "server.properties") }

// writeConfig writes server.properties (sorted, so the file diffs) and
// the broker's log4j2 configuration.
func (b *Broker) writeConfig() error {
	keys := make([]string, 0, len(b.props))
	for k := range b.props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%s\n", k, b.props[k])
	}
	if err := os.WriteFile(b.propsPath(), []byte(sb.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.Dir, "log4j2.properties"), []byte(brokerLog4j), 0o644)
}

// SetProp changes a property for the next Start.
func (b *Broker) SetProp(k, v string) error {
	b.props[k] = v
	return b.writeConfig()
}

const brokerLog4j = `status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
`

// Start starts the broker process over its directories (first start or
// restart) and waits until it serves Metadata.
func (b *Broker) Start() error {
	b.mu.Lock()
	if b.cmd != nil {
		b.mu.Unlock()
		return errors.New("broker already running")
	}
	heap := strconv.Itoa(b.heapMB) + "m"
	cmd := exec.Command(b.in.Java,
		"-Xms"+heap, "-Xmx"+heap, "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		"-Djava.awt.headless=true",
		"-Dkafka.logs.dir="+filepath.Join(b.Dir, "logs"),
		"-Dlog4j2.configurationFile="+filepath.Join(b.Dir, "log4j2.properties"),
		"-cp", b.in.Classpath(), "kafka.Kafka", b.propsPath())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := os.OpenFile(filepath.Join(b.Dir, "logs", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		b.mu.Unlock()
		return fmt.Errorf("starting Kafka: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(exited) }()
	b.cmd, b.exited = cmd, exited
	b.mu.Unlock()
	if err := b.waitReady(90 * time.Second); err != nil {
		b.Kill()
		return fmt.Errorf("Kafka broker in %s did not start: %w\n%s", b.Dir, err, b.LogTail(40))
	}
	return nil
}

// waitReady polls Metadata until the broker lists itself.
func (b *Broker) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-b.exited:
			return fmt.Errorf("the broker exited (%v)", b.cmd.ProcessState)
		default:
		}
		if c, err := net.DialTimeout("tcp", b.Addr, time.Second); err == nil {
			c.Close()
			if last = b.metadataReady(); last == nil {
				return nil
			}
		} else {
			last = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %v", timeout, last)
}

func (b *Broker) metadataReady() error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Brokers) == 0 {
		return errors.New("metadata lists no broker yet")
	}
	return nil
}

// Running reports whether the broker process is alive.
func (b *Broker) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil
}

// Pid is the broker JVM's process id, 0 while it is not running (for
// its CPU time and memory in /proc: ReadUsage).
func (b *Broker) Pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Stop shuts the broker down cleanly (SIGTERM: Kafka's controlled
// shutdown flushes, writes checkpoints and the clean-shutdown marker)
// and waits for it; after 60 s it is killed and Stop reports it.
func (b *Broker) Stop() error {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	var err error
	select {
	case <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 0 && code != 143 {
			err = fmt.Errorf("Kafka exited %d on SIGTERM:\n%s", code, b.LogTail(20))
		}
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		err = fmt.Errorf("Kafka did not stop within 60 s of SIGTERM:\n%s", b.LogTail(20))
	}
	b.mu.Lock()
	b.cmd = nil
	b.mu.Unlock()
	return err
}

// Kill SIGKILLs the broker (a crash: no flush, no clean-shutdown marker).
func (b *Broker) Kill() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

func (b *Broker) cleanup() {
	if b.Running() {
		b.Kill()
	}
}

// Client returns a kgo client of the broker, closed at the end of the
// test.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// LogTail returns the last n lines of the broker's server.log (and its
// stdout, where a JVM that fails to start writes).
func (b *Broker) LogTail(n int) string {
	var sb strings.Builder
	for _, f := range []string{"server.log", "stdout.log"} {
		data, err := os.ReadFile(filepath.Join(b.Dir, "logs", f))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&sb, "--- %s (last %d lines)\n%s\n", f, len(lines), bytes.Join(lines, []byte("\n")))
	}
	return sb.String()
}

// PartitionDir is the directory of topic-partition: in the log directory
// that holds it, else (not created yet) in LogDir.
func (b *Broker) PartitionDir(topic string, partition int32) string {
	name := fmt.Sprintf("%s-%d", topic, partition)
	for _, d := range b.LogDirs {
		if st, err := os.Stat(filepath.Join(d, name)); err == nil && st.IsDir() {
			return filepath.Join(d, name)
		}
	}
	return filepath.Join(b.LogDir, name)
}

// freePorts returns n distinct free loopback host:port pairs. They are
// found by binding :0 and closing, so another process could take one
// before the broker binds it; StartBroker's caller retries nothing, the
// window is milliseconds on a test machine.
func freePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var addrs []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// randomClusterID is a Kafka cluster id: 16 random bytes, URL-safe
// base64 without padding (what `kafka-storage random-uuid` prints). As
// Kafka's Uuid.randomUuid, it never starts with '-': kafka-storage's
// argument parser would take such an id for an option (one format in 64
// failed with "argument --cluster-id/-t: expected one argument").
func randomClusterID() string {
	for {
		var u [16]byte
		_, _ = rand.Read(u[:])
		if id := base64.RawURLEncoding.EncodeToString(u[:]); id[0] != '-' {
			return id
		}
	}
}
