package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

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

It prints "listening on HOST:PORT" on stdout once it accepts connections
(--listen 127.0.0.1:0 picks a free port), then "admin on HOST:PORT" for the
admin endpoint, and shuts down cleanly (flush, checkpoints, clean-shutdown
marker) on SIGINT or SIGTERM.

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

Writes: DIR only (the partitions, Kafka's checkpoints, each mirrored
partition's mirror.checkpoint, the server's state file
partlog-server-state.json: producer ids, transactions, topic configs,
mirror links, and the admin token partlog-admin-token).

Exit status: 0 after a clean shutdown, 8 the directory or the address could
not be opened, 16 usage error.`,
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
	return cmd
}

func (o *serveOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Consumer groups: the single-node coordinator of package server/group,
	// its state in the log directory beside the server's own
	// (group.StateFile); closed after the server.
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	groups, err := group.Open(group.Config{Dir: o.dir})
	if err != nil {
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	defer groups.Close()
	srv, err := server.Open(server.Config{
		Groups:                groups,
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
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		_ = srv.Close()
		return &exitError{code: exitOperational, err: fmt.Errorf("serve: %w", err)}
	}
	for _, p := range srv.Dir().Problems() {
		fmt.Fprintf(stderr, "serve: %s: %s (%s)\n", p.Name, p.Kind, p.Detail)
	}
	var aln net.Listener
	if addr := adminAddress(o.admin, o.listen, ln.Addr()); addr != "" {
		if aln, err = net.Listen("tcp", addr); err != nil {
			_ = ln.Close()
			_ = srv.Close()
			return &exitError{code: exitOperational, err: fmt.Errorf("serve: admin endpoint: %w", err)}
		}
		if a, ok := aln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			fmt.Fprintf(stderr, "serve: warning: the admin endpoint %s is not on loopback: its lookups need no token\n", aln.Addr())
		}
	}
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
