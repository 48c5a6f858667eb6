package main

import (
	"errors"
	"fmt"
	"io"

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
