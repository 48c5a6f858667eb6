package main

import (
	"errors"
	"fmt"
	"io"
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
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newDumpCommand(stdout, stderr))
	root.AddCommand(newVerifyCommand(stdout, stderr))
	root.AddCommand(newRecoverCommand(stdout, stderr))
	root.AddCommand(newInfoCommand(stdout, stderr))
	root.AddCommand(newProducersCommand(stdout, stderr))
	root.AddCommand(newDemoCommand(stdout, stderr))
	root.AddCommand(newSimulateCommand(stdout, stderr))
	return root
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
