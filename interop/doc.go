// Package interop runs real Kafka clients against `partlog serve`:
// franz-go's kgo, kcat (librdkafka) and kafkajs. It is a module of its
// own, like bench/peers, so that the engine never depends on a client
// library. The tests build cmd/partlog into a temporary directory and
// start `partlog serve` on 127.0.0.1 with a free port; kcat and node are
// executed when present, skipped otherwise, and required (missing is a
// failure) with PARTLOG_INTEROP_REQUIRE_CLIENTS=1, as .ci/run sets it.
package interop
