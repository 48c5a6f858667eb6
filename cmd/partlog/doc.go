// Command partlog inspects, verifies and repairs Kafka partition log
// directories, and serves one to Kafka clients. Data goes to stdout,
// diagnostics to stderr; "partlog COMMAND --help" says what each command
// reads, writes and exits with.
//
// Install it from a clone of the repository with
//
//	go install ./cmd/partlog
//
// The commands:
//
//	partlog dump [flags] FILE...          print .log, index, snapshot and checkpoint files as kafka-dump-log does
//	partlog verify [--full] DIR...        say what recovery would do, changing nothing
//	partlog recover [--apply] [--full] [--force] DIR...
//	                                      repair partition directories as a broker's load would
//	partlog info [--json] DIR...          describe partition directories at a glance
//	partlog producers [--json] DIR        print a partition's producer state
//	partlog compact [--apply] DIR...      clean compacted partitions offline, as Kafka's log cleaner
//	partlog demo [--keep] [--dir DIR]     build a crashed log directory, then dump, verify and recover it
//	partlog simulate                      run the cluster-mirroring scenarios on disk
//	partlog serve --dir DIR               serve a log directory to Kafka clients (one node)
//	partlog mirror start|stop|status      drive the mirrors of a partlog serve through its admin endpoint
//	partlog completion SHELL              print a shell completion script
//
// Exit status, as fsck's: 0 nothing wrong or nothing to do, 1 repaired,
// 4 problems found or left, 8 operational error, 16 usage error; several
// inputs OR their codes.
package main
