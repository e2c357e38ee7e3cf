// KafkaJS against a real node (run by tests/integration/test_kafka_kafkajs_e2e.py): the admin
// creates a topic, a producer sends keyed records one by one (each send answers its partition),
// a consumer group reads them from the earliest offset and commits; one JSON line on stdout says
// where each key landed and what the group read.
// Usage: node kafkajs_e2e.js BOOTSTRAP TOPIC GROUP PARTITIONS RECORDS
"use strict";
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, groupId, partitionsText, recordsText] = process.argv.slice(2);
  const partitions = Number(partitionsText);
  const records = Number(recordsText);
  const kafka = new Kafka({ clientId: "kraft-kafkajs-test", brokers: [bootstrap], logLevel: logLevel.WARN });

  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
                                             waitForLeaders: true });
  await admin.disconnect();

  // KafkaJS 2's default partitioner is the Java client's (murmur2 of the key)
  const producer = kafka.producer();
  await producer.connect();
  const landed = {};
  for (let i = 0; i < records; i++) {
    const [meta] = await producer.send({ topic, messages: [{ key: `key-${i}`, value: `value-${i}` }] });
    landed[`key-${i}`] = meta.partition;
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const consumed = [];
  const done = new Promise((resolve) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        consumed.push({ partition, offset: Number(message.offset), key: message.key.toString(),
                        value: message.value.toString() });
        if (consumed.length === records) resolve();
      },
    });
  });
  await done;
  // commit the next offset of each partition read (Kafka's convention)
  const next = {};
  for (const m of consumed) next[m.partition] = Math.max(next[m.partition] ?? 0, m.offset + 1);
  await consumer.commitOffsets(Object.entries(next).map(([partition, offset]) => (
    { topic, partition: Number(partition), offset: String(offset) })));
  await consumer.disconnect();
  process.stdout.write(JSON.stringify({ created, landed, consumed, committed: next }) + "\n");
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
