// Package bench holds partlog's benchmarks of its own API, each beside the
// ceiling or baseline it should be compared with, measured in the same
// run (ratios, not absolute figures, are what carry across machines).
// Peer libraries are benchmarked in bench/peers, a module of its own, so
// that none of them becomes a dependency of the engine.
//
//	go test ./bench -run '^$' -bench . -benchmem -benchtime 2s
package bench
