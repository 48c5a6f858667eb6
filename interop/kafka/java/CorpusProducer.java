import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Writes the Java client's part of a corpus (interop/kafka corpus.go):
 * idempotent lz4 batches, then a committed and an aborted transaction,
 * all with headers, to partition 0 of a topic.
 *
 * Arguments: bootstrap address, topic, round number.
 */
public final class CorpusProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String round = args[2];
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, null)) {
            for (int i = 0; i < 30; i++) {
                p.send(record(topic, round, i));
                if (i % 7 == 6) {
                    p.flush();
                }
            }
            p.flush();
        }
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, "corpus-java")) {
            p.initTransactions();
            for (int t = 0; t < 2; t++) {
                p.beginTransaction();
                for (int i = 0; i < 8; i++) {
                    p.send(record(topic, round, 100 * (t + 1) + i));
                }
                p.flush();
                if (t == 0) {
                    p.commitTransaction();
                } else {
                    p.abortTransaction();
                }
            }
        }
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txnID) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "50");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        if (txnID != null) {
            props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
        }
        return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    }

    static ProducerRecord<byte[], byte[]> record(String topic, String round, int i) {
        RecordHeaders headers = new RecordHeaders();
        headers.add("java", ("r" + round).getBytes(StandardCharsets.UTF_8));
        if (i % 3 == 0) {
            headers.add("n", null);
        }
        byte[] key = i % 4 == 0 ? null : ("jk" + i).getBytes(StandardCharsets.UTF_8);
        byte[] value = i % 5 == 4 ? null : ("java value " + round + "/" + i).getBytes(StandardCharsets.UTF_8);
        return new ProducerRecord<>(topic, 0, key, value, headers);
    }
}
