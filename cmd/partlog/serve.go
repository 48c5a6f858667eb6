package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
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
(--listen 127.0.0.1:0 picks a free port) and shuts down cleanly (flush,
checkpoints, clean-shutdown marker) on SIGINT or SIGTERM.

Reads: DIR (every partition, Kafka's checkpoints, the server's state file)
and requests on --listen.

Writes: DIR only (the partitions, Kafka's checkpoints, and the server's
state file partlog-server-state.json: producer ids, transactions, topic
configs).

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
		Groups:            groups,
		Dir:               o.dir,
		AutoCreate:        o.autoCreate,
		DefaultPartitions: o.partitions,
		Fsync:             o.fsync,
		NodeID:            o.nodeID,
		Logf:              func(format string, args ...any) { fmt.Fprintf(stderr, "serve: "+format+"\n", args...) },
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
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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
