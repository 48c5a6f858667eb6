package main

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes, as fsck uses them.
const (
	exitOK          = 0
	exitRepaired    = 1
	exitProblems    = 4
	exitOperational = 8
	exitUsage       = 16
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

// exitWith is a command's result for the exit status code: nil for
// exitOK, else an *exitError that main turns into the status.
func exitWith(code int) error {
	if code != exitOK {
		return &exitError{code: code}
	}
	return nil
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// newRootCommand builds the command tree; stdout and stderr are injected
// so tests run commands in-process.
func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "partlog",
		Short:         "Inspect, verify and repair Kafka partition log directories",
		Long:          rootLong,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Bare `partlog` is a usage error: help on stdout, exit 16.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_ = cmd.Help()
			return &exitError{code: exitUsage}
		},
	}
	root.SetVersionTemplate("partlog {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newDumpCommand(stdout, stderr))
	root.AddCommand(newVerifyCommand(stdout, stderr))
	root.AddCommand(newRecoverCommand(stdout, stderr))
	root.AddCommand(newCompactCommand(stdout, stderr))
	root.AddCommand(newInfoCommand(stdout, stderr))
	root.AddCommand(newProducersCommand(stdout, stderr))
	root.AddCommand(newDemoCommand(stdout, stderr))
	root.AddCommand(newSimulateCommand(stdout, stderr))
	root.AddCommand(newServeCommand(stdout, stderr))
	root.AddCommand(newMirrorCommand(stdout, stderr))
	return root
}

const rootLong = `partlog inspects, verifies and repairs Kafka partition log directories
(the <topic>-<n> directories of a broker's log.dirs), reading the files as
Apache Kafka writes them.

Exit status, for every command (as fsck's): 0 nothing wrong or nothing to
do, 1 repaired (recover --apply), 4 problems found or left, 8 operational
error (a file could not be read or written), 16 usage error (including a
bare "partlog"). Several inputs OR their codes.`

// fallbackVersion is reported when the binary carries no module version
// (built from a work tree with go build).
const fallbackVersion = "devel"

// version is the module version the binary was built from (go install
// …@vX), else the VCS revision stamped by go build, else fallbackVersion.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fallbackVersion
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return fallbackVersion
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return fallbackVersion + " (" + rev + ")"
}

// errLine formats an error concerning path for stderr, naming the path
// once: errors of the os package and of partlog's packages already name
// the file they concern, so the path is prefixed only when the message
// does not hold it.
func errLine(path string, err error) string {
	msg := err.Error()
	if path == "" || strings.Contains(msg, path) {
		return "partlog: " + msg
	}
	return "partlog: " + path + ": " + msg
}

// run executes the CLI with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "partlog:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "partlog:", err)
	return exitUsage
}
