// Package peers benchmarks partlog beside other Go storage libraries that
// could hold a partition's batches: github.com/tidwall/wal, the NATS
// server's file store, github.com/cockroachdb/pebble and go.etcd.io/bbolt,
// plus franz-go's kmsg decoder. It is a module of its own so that none of
// them becomes a dependency of the engine.
//
//	cd bench/peers && go test -run '^$' -bench . -benchmem
package peers
