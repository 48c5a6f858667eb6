package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/partlog/partlog/server"
	"github.com/spf13/cobra"
)

// mirrorOptions are the flags of `partlog mirror start|stop|status`.
type mirrorOptions struct {
	server      string
	dir         string // the server's log directory: its admin token
	tokenFile   string
	source      string
	sourceAdmin string
	topics      []string
	name        string
	policy      string
	allowCut    bool
	json        bool
	timeout     time.Duration
}

const mirrorLong = `mirror starts, stops and shows the mirrors of a running "partlog serve",
through its admin endpoint (--server: the address "partlog serve" printed as
"admin on HOST:PORT"). Start and stop send the server's admin token, which
the server keeps in its log directory (partlog-admin-token, readable by its
owner only): --dir DIR names that directory, or --token-file the file.

A destination server mirrors topics of a source cluster: it fetches the
source's batches (read_uncommitted) and stores them byte for byte at the
source's offsets. A mirrored partition is read-only: produces are refused
with POLICY_VIOLATION. "mirror stop" makes it writable: it truncates to the
last stable offset (or, --policy ABORT_OPEN, aborts the open transactions),
records the last mirrored position, raises the leader epoch and writes the
MIRROR_PID_RESET barrier, which empties the producer state, so producers of
this cluster can never be confused with the source's even where their
producer ids are equal. Each step is durable before the next; a crash
finishes the stop when the server starts again.

Failback: the old source mirrors from the new one with --source-admin set
to the new source's admin endpoint; it then truncates only what it wrote
after the point where the new source stopped mirroring it, instead of
fetching everything again. A start that would truncate records the
destination holds of its own is refused unless --allow-truncation; the
answer says how many offsets each partition lost.

Reads: the admin token (--dir or --token-file); it talks HTTP (JSON) to
--server only.

Writes: nothing; the server changes its own log directory (the mirrored
partitions, their mirror.checkpoint files, its state file).

Exit status: 0 done, 4 some partitions could not be started or stopped
(named on stderr; the others were), 8 the server or the source could not
be reached, 16 usage error.`

func newMirrorCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Start, stop and show the mirrors of a partlog serve (cluster mirroring)",
		Long:  mirrorLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return &exitError{code: exitUsage}
		},
	}
	var start, stop, status mirrorOptions
	startCmd := &cobra.Command{
		Use:   "start --server ADMIN --source HOST:PORT --topics T1,T2",
		Short: "Mirror topics of a source cluster into the server (read-only until stopped)",
		Long: `start makes the server mirror the topics from the source cluster at --source
(its Kafka address). Missing topics are created with the source's topic id
and partition count. Each partition is first truncated: to 0 (mirrored from
the start), or, with --source-admin, to the position the source recorded
when it stopped mirroring this partition from this server (failback). A
partition that would lose records of its own is refused (and left as it
is) unless --allow-truncation; the TRUNCATED column (truncated_offsets in
--json) says how many offsets each partition lost.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if start.source == "" || len(start.topics) == 0 {
				return &exitError{code: exitUsage, err: errors.New("mirror start: --source and --topics are required")}
			}
			req := server.MirrorStartRequest{Name: start.name, Source: start.source, SourceAdmin: start.sourceAdmin, Topics: start.topics,
				AllowTruncation: start.allowCut}
			return start.change(cmd.Context(), stdout, stderr, "start", "/v1/mirrors/start", req)
		},
	}
	stopCmd := &cobra.Command{
		Use:   "stop --server ADMIN --topics T1,T2",
		Short: "Stop mirroring topics: barrier written, partitions writable",
		Long: `stop ends the mirroring of the topics' partitions: fetching stops, the log
is truncated to its last stable offset (TRUNCATE_LSO, the default) or the
open transactions are aborted (ABORT_OPEN), the position is recorded, the
leader epoch raised and the MIRROR_PID_RESET barrier written; then the
partitions take produces. It returns once every partition is STOPPED.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(stop.topics) == 0 {
				return &exitError{code: exitUsage, err: errors.New("mirror stop: --topics is required")}
			}
			switch stop.policy {
			case "TRUNCATE_LSO", "ABORT_OPEN":
			default:
				return &exitError{code: exitUsage, err: fmt.Errorf("mirror stop: --policy %q: want TRUNCATE_LSO or ABORT_OPEN", stop.policy)}
			}
			req := server.MirrorStopRequest{Topics: stop.topics, Policy: stop.policy}
			return stop.change(cmd.Context(), stdout, stderr, "stop", "/v1/mirrors/stop", req)
		},
	}
	statusCmd := &cobra.Command{
		Use:   "status --server ADMIN",
		Short: "Show every mirrored partition: state, end of the mirrored range, lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp server.AdminResponse
			if err := status.call(cmd.Context(), http.MethodGet, "/v1/mirrors", nil, &resp); err != nil {
				return err
			}
			return status.print(stdout, resp)
		},
	}
	for _, c := range []struct {
		cmd *cobra.Command
		o   *mirrorOptions
	}{{startCmd, &start}, {stopCmd, &stop}, {statusCmd, &status}} {
		f := c.cmd.Flags()
		f.StringVar(&c.o.server, "server", "127.0.0.1:9093", "the server's admin endpoint (HOST:PORT)")
		f.BoolVar(&c.o.json, "json", false, "print the answer as JSON")
		f.DurationVar(&c.o.timeout, "timeout", 2*time.Minute, "give up waiting for the server after this long")
		f.StringVar(&c.o.dir, "dir", "", "the server's log directory, whose partlog-admin-token start and stop send")
		f.StringVar(&c.o.tokenFile, "token-file", "", "the server's admin token file (instead of --dir)")
		cmd.AddCommand(c.cmd)
	}
	startCmd.Flags().StringVar(&start.source, "source", "", "the source cluster's Kafka address (HOST:PORT)")
	startCmd.Flags().StringVar(&start.sourceAdmin, "source-admin", "", "the source's admin endpoint, if it is a partlog serve (failback position, loop check)")
	startCmd.Flags().StringSliceVar(&start.topics, "topics", nil, "topics to mirror (comma separated)")
	startCmd.Flags().StringVar(&start.name, "name", "", `name of the mirror link (default "from-<source cluster id>")`)
	startCmd.Flags().BoolVar(&start.allowCut, "allow-truncation", false, "truncate partitions that hold records of their own (to 0, or in a failback to the source's position); without it they are refused")
	stopCmd.Flags().StringSliceVar(&stop.topics, "topics", nil, "topics to stop mirroring (comma separated)")
	stopCmd.Flags().StringVar(&stop.policy, "policy", "TRUNCATE_LSO", "open transactions: TRUNCATE_LSO (truncate them away) or ABORT_OPEN (abort them)")
	return cmd
}

// token reads the server's admin token from --token-file or --dir.
func (o *mirrorOptions) token() (string, error) {
	switch {
	case o.dir != "" && o.tokenFile != "":
		return "", &exitError{code: exitUsage, err: errors.New("mirror: --dir and --token-file are exclusive")}
	case o.tokenFile != "":
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", &exitError{code: exitOperational, err: fmt.Errorf("mirror: %w", err)}
		}
		return strings.TrimSpace(string(b)), nil
	case o.dir != "":
		tok, err := server.ReadAdminToken(o.dir)
		if err != nil {
			return "", &exitError{code: exitOperational, err: fmt.Errorf("mirror: the admin token of %s: %w", o.dir, err)}
		}
		return tok, nil
	}
	return "", nil
}

// change sends a start or stop and prints what changed.
func (o *mirrorOptions) change(ctx context.Context, stdout, stderr io.Writer, what, path string, req any) error {
	if o.dir == "" && o.tokenFile == "" {
		return &exitError{code: exitUsage, err: fmt.Errorf("mirror %s: the server's admin token is needed: --dir (the server's log directory) or --token-file", what)}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var resp server.AdminResponse
	if err := o.call(ctx, http.MethodPost, path, body, &resp); err != nil {
		return err
	}
	if err := o.print(stdout, resp); err != nil {
		return err
	}
	if resp.Error != "" {
		fmt.Fprintf(stderr, "mirror %s: %s\n", what, resp.Error)
		return &exitError{code: exitProblems}
	}
	return nil
}

// call sends one request to the admin endpoint and decodes its answer;
// a 400 is a usage error, any other failure operational.
func (o *mirrorOptions) call(ctx context.Context, method, path string, body []byte, out *server.AdminResponse) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tok, err := o.token()
	if err != nil {
		return err
	}
	// The endpoint answers a name as Host only with the token: without
	// one, the request goes to the name's address.
	addr := o.server
	if u, err := url.Parse("http://" + o.server); err != nil || u.Host != o.server {
		return &exitError{code: exitUsage, err: fmt.Errorf("mirror: --server %q: want HOST:PORT", o.server)}
	}
	if tok == "" {
		if addr, err = server.AddressOf(ctx, o.server); err != nil {
			return &exitError{code: exitOperational, err: fmt.Errorf("mirror: --server: %w", err)}
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("mirror: --server %q: %w", o.server, err)}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &exitError{code: exitOperational, err: fmt.Errorf("mirror: %w", err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return &exitError{code: exitOperational, err: fmt.Errorf("mirror: reading the answer: %w", err)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &exitError{code: exitOperational, err: fmt.Errorf("mirror: %s answered %s: %s", o.server, resp.Status, excerpt(data))}
	}
	switch {
	case resp.StatusCode == http.StatusBadRequest:
		return &exitError{code: exitUsage, err: fmt.Errorf("mirror: %s", out.Error)}
	case resp.StatusCode != http.StatusOK:
		return &exitError{code: exitOperational, err: fmt.Errorf("mirror: %s: %s", resp.Status, out.Error)}
	}
	return nil
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

// print writes the partitions as a table, or the whole answer as JSON.
func (o *mirrorOptions) print(w io.Writer, resp server.AdminResponse) error {
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(resp)
	}
	if len(resp.Partitions) == 0 {
		fmt.Fprintln(w, "no mirrored partitions")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// MIRRORED END is the end of the mirrored range: the offset after the
	// last record mirrored (the log end while mirroring).
	fmt.Fprintln(tw, "PARTITION\tSTATE\tSOURCE\tMIRRORED END\tLOG END\tLAG\tEPOCH\tBARRIER\tTRUNCATED\tERROR")
	for _, p := range resp.Partitions {
		state := p.State
		if p.Step != "" {
			state += "/" + p.Step
		}
		src := p.SourceClusterID
		if p.Source != "" {
			src += " (" + p.Source + ")"
		}
		lag, barrier := "-", "-"
		if p.Lag >= 0 {
			lag = fmt.Sprint(p.Lag)
		}
		if p.BarrierOffset >= 0 {
			barrier = fmt.Sprint(p.BarrierOffset)
		}
		fmt.Fprintf(tw, "%s-%d\t%s\t%s\t%d\t%d\t%s\t%d\t%s\t%d\t%s\n", p.Topic, p.Partition, state, src,
			p.LastMirroredOffset, p.LogEndOffset, lag, p.LeaderEpoch, barrier, p.Truncated, p.Error)
	}
	return tw.Flush()
}
