// Command partlog inspects, verifies and repairs Kafka partition log
// directories. Data goes to stdout, diagnostics to stderr.
//
//	partlog dump [flags] FILE...
//	partlog verify|recover|info|producers DIR...
//	partlog demo
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
