import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client driven through the scenarios the interop tests
 * run against partlog serve and Kafka: each prints what it observed, one
 * fact a line, in an order that does not depend on timing, so that the
 * two brokers' outputs can be compared.
 *
 * Usage: ClientScenarios SCENARIO BOOTSTRAP ARGS...
 *   idempotent TOPIC N
 *   txn TOPIC TXNID N commit|abort
 *   fence TOPIC TXNID
 *   consume TOPIC GROUP classic|consumer read_committed|read_uncommitted N
 *   admin TOPIC
 */
public final class ClientScenarios {
    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        String bootstrap = args[1];
        switch (scenario) {
            case "idempotent" -> idempotent(bootstrap, args[2], Integer.parseInt(args[3]));
            case "txn" -> transaction(bootstrap, args[2], args[3], Integer.parseInt(args[4]), args[5].equals("commit"));
            case "fence" -> fence(bootstrap, args[2], args[3]);
            case "consume" -> consume(bootstrap, args[2], args[3], args[4], args[5], Integer.parseInt(args[6]));
            case "admin" -> admin(bootstrap, args[2]);
            default -> throw new IllegalArgumentException("unknown scenario " + scenario);
        }
    }

    private static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return p;
    }

    /** Sends N records idempotently to partition 0 and prints their offsets. */
    static void idempotent(String bootstrap, String topic, int n) throws Exception {
        Properties p = producerProps(bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put("max.in.flight.requests.per.connection", "5");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)));
            }
            for (int i = 0; i < n; i++) {
                RecordMetadata md = sent.get(i).get();
                System.out.println("sent v" + i + " at " + md.partition() + ":" + md.offset());
            }
        }
    }

    /** Sends N records to partitions 0 and 1 in one transaction and commits or aborts it. */
    static void transaction(String bootstrap, String topic, String txnID, int n, boolean commit) throws Exception {
        Properties p = producerProps(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, "k" + i, (commit ? "c" : "a") + i)).get();
            }
            if (commit) {
                producer.commitTransaction();
            } else {
                producer.abortTransaction();
            }
            System.out.println((commit ? "committed " : "aborted ") + n);
        }
    }

    /** A second producer of the same transactional id fences the first, whose commit then fails. */
    static void fence(String bootstrap, String topic, String txnID) throws Exception {
        Properties p = producerProps(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
        KafkaProducer<String, String> first = new KafkaProducer<>(p);
        first.initTransactions();
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, 0, "k", "fenced")).get();
        try (KafkaProducer<String, String> second = new KafkaProducer<>(p)) {
            second.initTransactions();
            System.out.println("second producer initialized");
            try {
                first.commitTransaction();
                System.out.println("first producer committed (not fenced)");
            } catch (org.apache.kafka.common.KafkaException e) {
                System.out.println("first producer fenced: " + e.getClass().getSimpleName());
            } finally {
                first.close(Duration.ofSeconds(5));
            }
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, "k", "winner")).get();
            second.commitTransaction();
            System.out.println("second producer committed");
        }
    }

    /** Consumes N records as a member of GROUP with the given protocol, commits, and prints them by partition. */
    static void consume(String bootstrap, String topic, String group, String protocol, String isolation, int n) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Map<Integer, List<String>> byPartition = new TreeMap<>();
        int got = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    byPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset() + "=" + r.value());
                    got++;
                }
            }
            consumer.commitSync();
            // The group as the admin client describes it while this member
            // is in it: a KIP-848 consumer group is type CONSUMER (described
            // by ConsumerGroupDescribe), a classic one CLASSIC.
            Properties ap = new Properties();
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin admin = Admin.create(ap)) {
                ConsumerGroupDescription d = admin.describeConsumerGroups(Collections.singletonList(group))
                    .describedGroups().get(group).get();
                System.out.println("group type " + d.type() + ", " + d.members().size() + " member(s)");
            } catch (InterruptedException | ExecutionException e) {
                System.out.println("describe group: " + e.getCause());
            }
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : new TreeMap<String, Map.Entry<TopicPartition, OffsetAndMetadata>>() {{
                for (Map.Entry<TopicPartition, OffsetAndMetadata> x : committed.entrySet()) {
                    put(x.getKey().toString(), x);
                }
            }}.values()) {
                System.out.println("committed " + e.getKey() + " " + (e.getValue() == null ? "none" : e.getValue().offset()));
            }
        }
        for (Map.Entry<Integer, List<String>> e : byPartition.entrySet()) {
            System.out.println("partition " + e.getKey() + ": " + String.join(" ", e.getValue()));
        }
        System.out.println("consumed " + got);
    }

    /** The admin client's operations over a topic of its own. */
    static void admin(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            System.out.println("nodes " + admin.describeCluster().nodes().get().size());
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1).configs(Map.of("retention.ms", "3600000")))).all().get();
            System.out.println("created " + topic);
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            } catch (ExecutionException e) {
                System.out.println("create again: " + e.getCause().getClass().getSimpleName());
            }
            waitFor(() -> admin.listTopics().names().get().contains(topic));
            waitFor(() -> admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size() == 2);
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            System.out.println("partitions " + d.partitions().size() + " replicas " + d.partitions().get(0).replicas().size());
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            waitFor(() -> admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size() == 3);
            System.out.println("partitions now 3");
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(new ConfigEntry("max.message.bytes", "20000"), AlterConfigOp.OpType.SET)))).all().get();
            waitFor(() -> "20000".equals(admin.describeConfigs(List.of(res)).all().get().get(res).get("max.message.bytes").value()));
            Config c = admin.describeConfigs(List.of(res)).all().get().get(res);
            System.out.println("retention.ms " + c.get("retention.ms").value() + " " + c.get("retention.ms").source());
            System.out.println("max.message.bytes " + c.get("max.message.bytes").value());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap))) {
                for (int i = 0; i < 5; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, "k", "v" + i)).get();
                }
            }
            TopicPartition tp0 = new TopicPartition(topic, 0);
            System.out.println("latest " + admin.listOffsets(Map.of(tp0, OffsetSpec.latest())).all().get().get(tp0).offset());
            admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(2))).all().get();
            System.out.println("earliest after delete " + admin.listOffsets(Map.of(tp0, OffsetSpec.earliest())).all().get().get(tp0).offset());
            admin.alterConsumerGroupOffsets("admin-group", Map.of(tp0, new OffsetAndMetadata(3))).all().get();
            System.out.println("group offset " + admin.listConsumerGroupOffsets("admin-group").partitionsToOffsetAndMetadata().get().get(tp0).offset());
            boolean listed = false;
            for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
                listed |= g.groupId().equals("admin-group");
            }
            System.out.println("group listed " + listed);
            admin.deleteConsumerGroups(List.of("admin-group")).all().get();
            System.out.println("group deleted");
            admin.deleteTopics(List.of(topic)).all().get();
            waitFor(() -> !admin.listTopics().names().get().contains(topic));
            System.out.println("deleted " + topic);
        }
    }

    interface Check {
        boolean ok() throws Exception;
    }

    private static void waitFor(Check c) throws Exception {
        long deadline = System.currentTimeMillis() + 20_000;
        while (!c.ok()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("condition not met within 20 s");
            }
            Thread.sleep(100);
        }
    }

    private ClientScenarios() {
    }
}
