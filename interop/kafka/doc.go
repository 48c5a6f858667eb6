// Package kafka runs Apache Kafka beside partlog in tests: it fetches
// the pinned release's jars (pom.xml, with Maven, cached), starts and
// stops single-node KRaft brokers on free loopback ports over a
// directory it is given, and runs Kafka's command-line tools as
// functions (Install.Run, one JVM per call; Tools, one JVM for many
// calls).
//
// A test asks for Kafka with Need and for a broker with StartBroker.
// Without Java, Maven or network the test is skipped with the reason,
// unless PARTLOG_INTEROP_REQUIRE_KAFKA=1 (set by .ci/run), which turns
// every such skip into a failure. PARTLOG_KAFKA_LIB names a directory of
// jars to use instead of the cache.
//
// The broker's defaults (baseProps) are those of a one-node cluster:
// replication factor 1 everywhere, one partition for the internal
// topics, no initial rebalance delay. A test changes them with
// BrokerConfig.Props. The broker logs to Dir/logs/server.log, whose tail
// every start failure quotes.
package kafka
