package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/partlog/partlog/mirror/sim"
	"github.com/spf13/cobra"
)

// simulateOptions are the flags of `partlog simulate`.
type simulateOptions struct {
	topology string
	strategy string
	dir      string
	json     bool

	topologies []sim.Topology
	strategies []sim.Strategy
}

func (o *simulateOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.topology, "topology", "all", "scenario to run (docs/mirror.md §4), or all")
	f.StringVar(&o.strategy, "strategy", "all", "barrier, none, negation, idempotent-negation, bitfield, or all")
	f.StringVar(&o.dir, "dir", "", "keep the simulated clusters' partition directories here (default: a temporary directory, removed afterwards)")
	f.BoolVar(&o.json, "json", false, "print one JSON object per scenario and strategy (schemaVersion 1) instead of text")
}

func (o *simulateOptions) validate() error {
	o.topologies, o.strategies = nil, nil
	if o.topology == "all" {
		o.topologies = sim.Topologies
	} else {
		t, err := sim.FindTopology(o.topology)
		if err != nil {
			names := make([]string, len(sim.Topologies))
			for i, t := range sim.Topologies {
				names[i] = t.Name
			}
			return fmt.Errorf("%w (want all or one of %s)", err, strings.Join(names, ", "))
		}
		o.topologies = []sim.Topology{t}
	}
	if o.strategy == "all" {
		o.strategies = sim.Strategies
	} else {
		s, err := sim.ParseStrategy(o.strategy)
		if err != nil {
			return err
		}
		o.strategies = []sim.Strategy{s}
	}
	return nil
}

func newSimulateCommand(stdout, stderr io.Writer) *cobra.Command {
	var o simulateOptions
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run the cluster-mirroring scenarios on disk and compare PID strategies",
		Long: `simulate runs the topologies of docs/mirror.md §4 (active-passive, failback,
fan-out, fan-in, chains, source reassignment, a chain of four) with
in-process clusters whose partition logs live on disk and whose PID
allocators all start at 5, once per strategy: barrier (the
MIRROR_PID_RESET design), none (no barrier), and the dropped rewriting
designs negation (D1), idempotent-negation (D2) and bitfield (D3).

For every run it prints each step's events and every partition's state
(log end, leader epoch, producer state, barriers), the barriers as the
dump tool shows them, and what the run showed; then a table topology ×
strategy whose cells are clean or the findings: corrupt(N,...) for the
silent-corruption cases of docs/mirror.md §1.2, lost, dup, phantom (a
read_committed consumer reads a never-committed record), rejected (a
producer wrongly refused), clash (two producers under one rewritten id),
diverged, psm-mismatch (producer state differs from a replay of its log).

Reads: nothing but the partition directories it writes (in --dir or a
temporary directory).

Exit status: 0 the barrier row is clean everywhere, 4 otherwise, 8
operational error, 16 usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return o.run(stdout, stderr)
		},
	}
	o.addFlags(cmd)
	return cmd
}

// simulateJSON is one scenario × strategy in --json output.
type simulateJSON struct {
	SchemaVersion int               `json:"schemaVersion"`
	Topology      string            `json:"topology"`
	Section       string            `json:"section"`
	Strategy      string            `json:"strategy"`
	Result        string            `json:"result"`
	Clean         bool              `json:"clean"`
	Cases         []int             `json:"corruptionCases"`
	Lost          bool              `json:"lost"`
	Dup           bool              `json:"dup"`
	Phantom       bool              `json:"phantom"`
	Rejected      bool              `json:"rejected"`
	Clash         bool              `json:"clash"`
	Diverged      bool              `json:"diverged"`
	PSMMismatch   bool              `json:"psmMismatch"`
	Findings      []string          `json:"findings"`
	Steps         []sim.Step        `json:"steps"`
	Barriers      []sim.BarrierDump `json:"barriers"`
}

func (o *simulateOptions) run(stdout, stderr io.Writer) error {
	root := o.dir
	if root == "" {
		d, err := os.MkdirTemp("", "partlog-simulate-")
		if err != nil {
			return &exitError{code: exitOperational, err: err}
		}
		root = d
		defer os.RemoveAll(d)
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	cells := map[string]map[sim.Strategy]string{}
	barrierClean := true
	for _, t := range o.topologies {
		cells[t.Name] = map[sim.Strategy]string{}
		if !o.json {
			fmt.Fprintf(w, "== %s (docs/mirror.md %s): %s\n", t.Name, t.Section, t.Summary)
		}
		for _, s := range o.strategies {
			r, err := sim.Run(t, s, root)
			if err != nil {
				w.Flush()
				return &exitError{code: exitOperational, err: err}
			}
			cells[t.Name][s] = r.Label()
			if s == sim.Barrier && !r.Clean() {
				barrierClean = false
			}
			if o.json {
				if err := enc.Encode(toJSON(t, r)); err != nil {
					return &exitError{code: exitOperational, err: err}
				}
				continue
			}
			printRun(w, r)
		}
	}
	if !o.json {
		printTable(w, o.topologies, o.strategies, cells)
	}
	if !barrierClean {
		return &exitError{code: exitProblems}
	}
	return nil
}

func toJSON(t sim.Topology, r *sim.Result) simulateJSON {
	j := simulateJSON{SchemaVersion: 1, Topology: t.Name, Section: t.Section, Strategy: r.Strategy.String(),
		Result: r.Label(), Clean: r.Clean(), Cases: []int{}, Lost: r.Lost, Dup: r.Dup, Phantom: r.Phantom,
		Rejected: r.Rejected, Clash: r.Clash, Diverged: r.Diverged, PSMMismatch: r.PSMMismatch,
		Findings: r.Findings, Steps: r.Steps, Barriers: r.Barriers}
	for i, c := range r.Cases {
		if c {
			j.Cases = append(j.Cases, i+1)
		}
	}
	if j.Findings == nil {
		j.Findings = []string{}
	}
	if j.Barriers == nil {
		j.Barriers = []sim.BarrierDump{}
	}
	return j
}

// printRun prints one scenario run: steps with their events and node
// states, the barriers, the result and its findings.
func printRun(w *bufio.Writer, r *sim.Result) {
	fmt.Fprintf(w, "-- strategy %s\n", r.Strategy)
	for _, s := range r.Steps {
		fmt.Fprintf(w, "  step %s\n", s.Title)
		for _, e := range s.Events {
			fmt.Fprintf(w, "    · %s\n", e)
		}
		for _, n := range s.Nodes {
			b := ""
			if len(n.Barriers) > 0 {
				b = " barriers " + joinInts(n.Barriers)
			}
			fmt.Fprintf(w, "    %-5s %-26s LEO %d LSO %d epoch %d PSM %s%s\n", n.Node, n.State, n.LEO, n.LSO, n.Epoch, n.PSM, b)
		}
	}
	for _, b := range r.Barriers {
		fmt.Fprintf(w, "  barrier on %s at %d:\n    %s\n    %s\n", b.Node, b.Offset, b.Header, b.Record)
	}
	fmt.Fprintf(w, "  result: %s\n", r.Label())
	for _, f := range r.Findings {
		fmt.Fprintf(w, "    ! %s\n", f)
	}
}

// printTable prints topology × strategy → result.
func printTable(w *bufio.Writer, ts []sim.Topology, ss []sim.Strategy, cells map[string]map[sim.Strategy]string) {
	widths := make([]int, len(ss)+1)
	widths[0] = len("topology")
	for _, t := range ts {
		widths[0] = max(widths[0], len(t.Name))
	}
	for i, s := range ss {
		widths[i+1] = len(s.String())
		for _, t := range ts {
			widths[i+1] = max(widths[i+1], len(cells[t.Name][s]))
		}
	}
	row := func(cols []string) {
		var line strings.Builder
		for i, c := range cols {
			if i > 0 {
				line.WriteString(" | ")
			}
			fmt.Fprintf(&line, "%-*s", widths[i], c)
		}
		w.WriteString(strings.TrimRight(line.String(), " "))
		w.WriteString("\n")
	}
	fmt.Fprintln(w)
	head := []string{"topology"}
	for _, s := range ss {
		head = append(head, s.String())
	}
	row(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = strings.Repeat("-", widths[i])
	}
	row(sep)
	for _, t := range ts {
		cols := []string{t.Name}
		for _, s := range ss {
			cols = append(cols, cells[t.Name][s])
		}
		row(cols)
	}
}
