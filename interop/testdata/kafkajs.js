// kafkajs client for the interop tests: node kafkajs.js BROKER MODE TOPIC [N]
//   admin:   create TOPIC with 2 partitions and retention.ms=3600000, describe
//            two of its configs, list offsets (latest, by timestamp)
//   produce: N records, idempotent, acks=-1, to TOPIC (keys k0..)
//   txn:     one committed and one aborted transaction of N records each
//   group:   consume N records of TOPIC in consumer group "kafkajs-group"
// Prints one JSON object per line; exits non-zero on any error.
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');

const [broker, mode, topic, nArg] = process.argv.slice(2);
const n = parseInt(nArg || '10', 10);
const kafka = new Kafka({ clientId: 'partlog-interop', brokers: [broker], logLevel: logLevel.WARN,
  retry: { retries: 8, initialRetryTime: 100 } });
const out = (o) => console.log(JSON.stringify(o));

async function admin() {
  const a = kafka.admin();
  await a.connect();
  const created = await a.createTopics({ topics: [{ topic, numPartitions: 2,
    configEntries: [{ name: 'retention.ms', value: '3600000' }] }], waitForLeaders: true });
  out({ created });
  const described = await a.describeConfigs({ includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms', 'segment.bytes'] }] });
  out({ configs: described.resources[0].configEntries.map((c) => ({ name: c.configName, value: c.configValue, isDefault: c.isDefault }))
    .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)) });
  const meta = await a.fetchTopicMetadata({ topics: [topic] });
  out({ partitions: meta.topics[0].partitions.length });
  const p = kafka.producer();
  await p.connect();
  const base = 1700000000000;
  for (let i = 0; i < 5; i++) {
    await p.send({ topic, messages: [{ partition: 0, value: 'v' + i, timestamp: String(base + i * 1000) }] });
  }
  await p.disconnect();
  const latest = await a.fetchTopicOffsets(topic);
  out({ latest: latest.map((o) => ({ partition: o.partition, high: o.high, low: o.low })) });
  const byTime = await a.fetchTopicOffsetsByTimestamp(topic, base + 2500);
  out({ byTime: byTime.map((o) => ({ partition: o.partition, offset: o.offset })) });
  await a.disconnect();
}

async function produce() {
  const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  const messages = [];
  for (let i = 0; i < n; i++) messages.push({ key: 'k' + (i % 4), value: 'kafkajs-' + i });
  const res = await p.send({ topic, acks: -1, messages });
  out({ produced: n, res });
  await p.disconnect();
}

async function txn() {
  const p = kafka.producer({ transactionalId: 'kafkajs-txn', idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  for (const [commit, tag] of [[true, 'committed'], [false, 'aborted']]) {
    const t = await p.transaction();
    const messages = [];
    for (let i = 0; i < n; i++) messages.push({ key: 'k' + i, value: tag + '-' + i });
    await t.send({ topic, messages });
    if (commit) await t.commit(); else await t.abort();
    out({ txn: tag });
  }
  await p.disconnect();
}

async function group() {
  const c = kafka.consumer({ groupId: 'kafkajs-group', sessionTimeout: 10000 });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  let got = 0;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('consumed ' + got + ' of ' + n)), 30000);
    c.run({ eachMessage: async ({ partition, message }) => {
      out({ partition, offset: message.offset, value: message.value.toString() });
      if (++got >= n) { clearTimeout(timer); resolve(); }
    } }).catch(reject);
  });
  await c.disconnect();
}

const modes = { admin, produce, txn, group };
if (!modes[mode]) { console.error('unknown mode ' + mode); process.exit(2); }
modes[mode]().then(() => process.exit(0), (e) => { console.error(e && e.stack || e); process.exit(1); });
