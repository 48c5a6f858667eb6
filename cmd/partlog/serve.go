package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/server"
	"github.com/partlog/partlog/server/group"
	"github.com/spf13/cobra"
)

// serveOptions are the flags of `partlog serve`.
type serveOptions struct {
	listen     string
	dir        string
	autoCreate bool
	fsync      bool
	partitions int32
	nodeID     int32
	admin      string
	noBarrier  bool
	maxConns   int
	maxParts   int
	cleaner    partlog.CleanerOptions
	backoffMs  int64
	cpuProfile string // hidden: a pprof CPU profile of the whole run
	memProfile string // hidden: a pprof allocation profile written at shutdown
	profSignal bool   // hidden: --cpuprofile profiles the windows from SIGUSR1 to SIGUSR2
}

func newServeCommand(stdout, stderr io.Writer) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve --dir DIR",
		Short: "Serve a log directory to Kafka clients (a single-node Kafka-protocol server)",
		Long: `serve opens the log directory DIR (creating it if needed) and answers
Kafka clients on --listen: topics are the directory's <topic>-<n> partitions,
produced with idempotence and transactions, fetched read_uncommitted or
read_committed. It is one node, for trying, testing and demos: no
replication, no SASL or TLS. The APIs and versions it implements are listed
in the documentation of package github.com/partlog/partlog/server.

It takes its addresses before it opens DIR (one it cannot listen on leaves
DIR untouched), then opens DIR, recovering what a crash left: on stderr a
line for each partition whose recovery changed something (the bytes cut
and why, the indexes rebuilt, the problems; the bytes removed are kept in
<partition>/partlog-quarantine/<UTC time>), the entries not loaded, and one
summary line. A cleanly shut down partition whose repair would cut data
below its recovery point is not served and named (recover --apply --force
cuts it); a directory whose checkpoints cannot be written (a full disk)
is served read-only. It prints "listening on HOST:PORT" on stdout once it
accepts connections (--listen 127.0.0.1:0 picks a free port), then
"admin on HOST:PORT" for the admin endpoint, and shuts down cleanly
(flush, checkpoints, clean-shutdown marker) on SIGINT or SIGTERM.

Mirroring: the server can mirror topics of another Kafka-protocol cluster
(another partlog serve, or a Kafka broker): "partlog mirror start --server
ADMIN --source HOST:PORT --topics T" sends it to the admin endpoint. A
mirrored partition stores the source's batches unchanged and is read-only
(produces are refused with POLICY_VIOLATION) until "partlog mirror stop",
which truncates to the last stable offset, writes the MIRROR_PID_RESET
barrier and makes it writable. The admin endpoint (--admin, HTTP with
JSON) serves "partlog mirror" and the lookups of peers that mirror from
this server. Starting and stopping mirrors needs the token the server
keeps in DIR/partlog-admin-token (made at the first start, readable by its
owner only; "partlog mirror --dir DIR" sends it), and requests a browser
would send (an Origin, Referer or Sec-Fetch header, a Content-Type other
than application/json, a Host that is a name rather than an address) are
refused. Keep it on loopback all the same: the lookups need no token.

Bounds (a client cannot make the server hold more): requests of at most
100 MiB (Kafka's socket.request.max.bytes) and 100 000 array entries,
fetch responses of at most 55 MiB (fetch.max.bytes), connections idle for
10 minutes closed (connections.max.idle.ms), at most --max-connections
connections (max.connections; accepting waits at the bound) and
--max-partitions partitions (topic creation refused past it); by default
each is a quarter of the process's open-file limit.

Reads: DIR (every partition, Kafka's checkpoints, the server's state file)
and requests on --listen.

Compacted topics (cleanup.policy=compact or compact,delete) are cleaned as
Kafka's log cleaner does, by --log-cleaner-threads workers shared by every
partition (idle while none is due), each with its share of
--log-cleaner-dedupe-buffer-size for its offset map.

Writes: DIR only (the partitions, Kafka's checkpoints, each mirrored
partition's mirror.checkpoint, the server's state file
partlog-server-state.json: producer ids, transactions, topic configs,
mirror links, and the admin token partlog-admin-token).

Exit status: 0 after a clean shutdown, 8 the address could not be listened
on, the directory not opened, or the shutdown failed (named on stderr),
16 usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.dir == "" {
				return &exitError{code: exitUsage, err: errors.New("serve: --dir is required")}
			}
			if o.partitions <= 0 {
				return &exitError{code: exitUsage, err: errors.New("serve: --partitions must be positive")}
			}
			return o.run(cmd.Context(), stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:9092", "address to listen on")
	cmd.Flags().StringVar(&o.dir, "dir", "", "the log directory to serve (created if missing)")
	cmd.Flags().BoolVar(&o.autoCreate, "auto-create", true, "create topics on their first metadata or produce request")
	cmd.Flags().BoolVar(&o.fsync, "fsync", false, "acks=-1 waits for fdatasync (group commit); consumers see only durable records")
	cmd.Flags().Int32Var(&o.partitions, "partitions", 1, "partitions of an auto-created topic (Kafka's num.partitions)")
	cmd.Flags().Int32Var(&o.nodeID, "node-id", 0, "this node's broker id")
	cmd.Flags().StringVar(&o.admin, "admin", "auto", `admin endpoint address (HTTP+JSON); "auto": 127.0.0.1 at the --listen port + 1 (a free port with --listen port 0); "off": none`)
	// A switch for tests and demonstrations of what the barrier prevents:
	// mirror stops write no MIRROR_PID_RESET barrier.
	cmd.Flags().BoolVar(&o.noBarrier, "unsafe-no-mirror-barrier", false, "mirror stops write no barrier (tests only: producer ids of the two clusters then collide)")
	_ = cmd.Flags().MarkHidden("unsafe-no-mirror-barrier")
	cmd.Flags().IntVar(&o.maxConns, "max-connections", 0, "most client connections at once (Kafka's max.connections; 0: a quarter of the open-file limit)")
	cmd.Flags().IntVar(&o.maxParts, "max-partitions", 0, "most partitions served; creating more is refused (0: a quarter of the open-file limit)")
	cmd.Flags().IntVar(&o.cleaner.Threads, "log-cleaner-threads", partlog.DefaultCleanerThreads, "compacted partitions cleaned at once (log.cleaner.threads)")
	cmd.Flags().Int64Var(&o.cleaner.MapBytes, "log-cleaner-dedupe-buffer-size", partlog.DefaultCleanerMapBytes, "memory of the cleaner's offset maps, all threads together (log.cleaner.dedupe.buffer.size)")
	cmd.Flags().Float64Var(&o.cleaner.IOBytesPerSecond, "log-cleaner-io-max-bytes-per-second", 0, "bytes the cleaner reads and writes per second, 0 unbounded (log.cleaner.io.max.bytes.per.second)")
	cmd.Flags().Int64Var(&o.backoffMs, "log-cleaner-backoff-ms", partlog.DefaultCleanerBackoff.Milliseconds(), "how soon a compacted partition not due yet is looked at again (log.cleaner.backoff.ms)")
	// Profiling switches for the benchmarks against Kafka (interop's
	// BenchmarkBrokers): hidden, as they are no part of serving.
	cmd.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	cmd.Flags().StringVar(&o.memProfile, "memprofile", "", "write an allocation profile to this file at shutdown (go tool pprof)")
	cmd.Flags().BoolVar(&o.profSignal, "profile-signals", false, "--cpuprofile profiles each window from SIGUSR1 to SIGUSR2 instead of the run (the file appears when the window ends)")
	for _, f := range []string{"cpuprofile", "memprofile", "profile-signals"} {
		_ = cmd.Flags().MarkHidden(f)
	}
	return cmd
}

func (o *serveOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	prof, err := o.startProfiles()
	if err != nil {
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	defer prof.end(stderr)
	// The addresses first: a server that cannot listen must not have
	// opened (and so recovered, and marked unclean) the directory.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w (%s not opened)", err, o.dir)}
	}
	var aln net.Listener
	if addr := adminAddress(o.admin, o.listen, ln.Addr()); addr != "" {
		if aln, err = net.Listen("tcp", addr); err != nil {
			_ = ln.Close()
			return &exitError{code: exitOperational, err: fmt.Errorf("serve: admin endpoint: %w (%s not opened)", err, o.dir)}
		}
		if a, ok := aln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			fmt.Fprintf(stderr, "serve: warning: the admin endpoint %s is not on loopback: its lookups need no token\n", aln.Addr())
		}
	}
	closeListeners := func() {
		_ = ln.Close()
		if aln != nil {
			_ = aln.Close()
		}
	}
	// Consumer groups: the single-node coordinator of package server/group,
	// its state in the log directory beside the server's own
	// (group.StateFile); closed after the server.
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		closeListeners()
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	groups, err := group.Open(group.Config{Dir: o.dir})
	if err != nil {
		closeListeners()
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	defer groups.Close()
	o.cleaner.Backoff = time.Duration(o.backoffMs) * time.Millisecond
	cleaner := partlog.NewCleaner(o.cleaner)
	defer cleaner.Close()
	srv, err := server.Open(server.Config{
		Log: &partlog.Options{Cleaner: cleaner},
		// What the recovery of a partition removes is kept inside it, as
		// recover --apply keeps it.
		Quarantine:            filepath.Join(quarantineDir, time.Now().UTC().Format(quarantineStamp)),
		Groups:                groups,
		GroupContext:          group.ContextWithClient,
		Dir:                   o.dir,
		AutoCreate:            o.autoCreate,
		DefaultPartitions:     o.partitions,
		Fsync:                 o.fsync,
		NodeID:                o.nodeID,
		UnsafeMirrorNoBarrier: o.noBarrier,
		MaxConnections:        o.maxConns,
		MaxPartitions:         o.maxParts,
		Logf:                  func(format string, args ...any) { fmt.Fprintf(stderr, "serve: "+format+"\n", args...) },
	})
	if err != nil {
		closeListeners()
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	groups.SetTopics(srv) // consumer groups (KIP-848) assign the server's topics
	logOpen(stderr, srv.Dir())
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if aln != nil {
		fmt.Fprintf(stdout, "admin on %s\n", aln.Addr())
		fmt.Fprintf(stderr, "serve: the admin token is in %s (partlog mirror --dir %s)\n", filepath.Join(o.dir, server.AdminTokenFile), o.dir)
		go func() {
			if err := srv.ServeAdmin(aln); err != nil {
				fmt.Fprintf(stderr, "serve: admin endpoint: %v\n", err)
			}
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	closeErr := srv.Close()
	if serveErr == nil {
		serveErr = <-errc
	}
	if err := errors.Join(serveErr, closeErr); err != nil {
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	fmt.Fprintln(stderr, "serve: shut down cleanly")
	return nil
}

// maxRecoveryLines bounds the per-partition recovery lines of a start
// (a crash of thousands of partitions recovers each of them); the
// summary line counts them all.
const maxRecoveryLines = 200

// logOpen says what opening the directory did: what recovery did to
// each partition it recovered (the bytes cut and why, the indexes
// rebuilt, the problems, where the removed bytes are kept), what was not
// loaded, and one summary line.
func logOpen(w io.Writer, d *partlog.Dir) {
	reports := d.Reports()
	tps := make([]partlog.TopicPartition, 0, len(reports))
	for tp := range reports {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b partlog.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	lines, cutParts, trimmed := 0, 0, 0
	var cutBytes int64
	for _, tp := range tps {
		r := reports[tp]
		var parts []string
		if t := r.Truncation; t != nil {
			if t.Class == recovery.ClassZeroTail {
				trimmed++
				parts = append(parts, fmt.Sprintf("preallocated tail of segment %d trimmed at offset %d", t.SegmentBaseOffset, t.Offset))
			} else {
				cutParts++
				cutBytes += t.BytesRemoved
				parts = append(parts, fmt.Sprintf("%d bytes cut from offset %d (segment %d, position %d; %s: %s)",
					t.BytesRemoved, t.Offset, t.SegmentBaseOffset, t.Position, t.Class, t.Reason))
			}
		}
		if n := len(r.IndexesRebuilt); n > 0 {
			parts = append(parts, fmt.Sprintf("indexes of %d segments rebuilt", n))
		}
		for _, p := range r.Problems {
			if p.Kind != "cut" {
				parts = append(parts, p.Kind+": "+p.Detail)
			}
		}
		if r.Quarantine != nil {
			parts = append(parts, "removed bytes kept in "+*r.Quarantine)
		}
		if len(parts) == 0 {
			continue
		}
		if lines++; lines <= maxRecoveryLines {
			fmt.Fprintf(w, "serve: recovered %s: %s\n", tp, strings.Join(parts, "; "))
		}
	}
	if lines > maxRecoveryLines {
		fmt.Fprintf(w, "serve: ... and %d more partitions recovered (partlog verify %s lists them)\n", lines-maxRecoveryLines, d.Path())
	}
	problems := d.Problems()
	for _, p := range problems {
		fmt.Fprintf(w, "serve: %s: %s (%s)\n", p.Name, p.Kind, p.Detail)
	}
	how := "after a clean shutdown"
	if !d.CleanShutdown() {
		how = "after a crash (no clean-shutdown marker; every partition validated from its recovery point)"
	}
	summary := fmt.Sprintf("serve: opened %s %s: %d partitions served, %d recovered with changes", d.Path(), how, len(d.Logs()), lines)
	if cutParts > 0 {
		summary += fmt.Sprintf(", %d with data cut (%d bytes)", cutParts, cutBytes)
	}
	if trimmed > 0 {
		summary += fmt.Sprintf(", %d preallocated tails trimmed", trimmed)
	}
	if len(problems) > 0 {
		summary += fmt.Sprintf(", %d entries not loaded or noted (above)", len(problems))
	}
	if err := d.ReadOnly(); err != nil {
		summary += "; READ-ONLY: " + err.Error()
	}
	fmt.Fprintln(w, summary)
}

// adminAddress resolves --admin: "off" is none, "auto" loopback at the
// Kafka port + 1 (or any free port when the Kafka port was chosen by the
// system), anything else an address.
func adminAddress(flag, listen string, kafka net.Addr) string {
	switch flag {
	case "off", "":
		return ""
	case "auto":
		port := 0
		if a, ok := kafka.(*net.TCPAddr); ok && a.Port > 0 && a.Port < 65535 && !strings.HasSuffix(listen, ":0") {
			port = a.Port + 1
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	return flag
}
