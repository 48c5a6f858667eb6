import java.io.File;
import java.util.HashMap;
import java.util.Optional;

import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

/**
 * Loads one partition directory with Kafka's own log loader, as a
 * broker's LogManager does at startup (UnifiedLog.create, default topic
 * configuration), prints its log start and end offsets and closes it.
 * An exception the loader throws ends the program as the broker's
 * LogManager would let it end the broker.
 *
 * Arguments: partition directory (named topic-partition), whether the
 * last shutdown was clean (true/false), recovery point, log start offset.
 */
public final class LoadLog {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        boolean clean = Boolean.parseBoolean(args[1]);
        long recoveryPoint = Long.parseLong(args[2]);
        long logStart = Long.parseLong(args[3]);
        KafkaScheduler scheduler = new KafkaScheduler(1, true, "load-log-");
        scheduler.startup();
        try {
            UnifiedLog log = UnifiedLog.create(dir, new LogConfig(new HashMap<>()), logStart, recoveryPoint,
                scheduler, new BrokerTopicStats(), Time.SYSTEM, 900000,
                new ProducerStateManagerConfig(86400000, false), 600000,
                new LogDirFailureChannel(1), clean, Optional.empty());
            System.out.println("logStartOffset " + log.logStartOffset());
            System.out.println("logEndOffset " + log.logEndOffset());
            log.close();
        } finally {
            scheduler.shutdown();
        }
    }
}
