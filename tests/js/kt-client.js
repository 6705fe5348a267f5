#!/usr/bin/env node
// kafkajs against a kt broker, driven by kt's pytest suite.
//
//   node kt-client.js COMMAND < spec.json > result.json
//
// COMMAND is produce, fetch or group-consume; the spec and result are JSON. Keys,
// values and header values travel base64-encoded (null stays null) so bytes
// compare exactly on the Python side. kafkajs logs go to stderr; a failure prints
// one JSON line {"error": ...} on stdout and exits 1.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const Cluster = require('kafkajs/src/cluster')
const { createLogger } = require('kafkajs/src/loggers')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const fzstd = require('fzstd')
const { ZstdCodec } = require('zstd-codec')

// kafkajs ships gzip only; the others are plugged in the documented way. zstd:
// zstd-codec (Emscripten) compresses, fzstd decompresses (it also reads frames
// without a content size, which librdkafka writes).
let zstdSimple = null
const zstdReady = new Promise(resolve =>
  ZstdCodec.run(zstd => {
    zstdSimple = new zstd.Simple()
    resolve()
  })
)
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress (encoder) {
    return Buffer.from(lz4.compress(encoder.buffer))
  },
  async decompress (buffer) {
    return Buffer.from(lz4.decompress(buffer))
  }
})
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress (encoder) {
    await zstdReady
    return Buffer.from(zstdSimple.compress(encoder.buffer, 3))
  },
  async decompress (buffer) {
    return Buffer.from(fzstd.decompress(buffer))
  }
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD
}

const stderrLog = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

const b64 = buf => (buf == null ? null : Buffer.from(buf).toString('base64'))
const unb64 = s => (s == null ? null : Buffer.from(s, 'base64'))

// spec.ssl: {ca, cert, key} file paths (cert/key for mutual TLS); spec.sasl:
// {mechanism, username, password} with kafkajs's mechanism names (plain,
// scram-sha-256, scram-sha-512). Either or both secure the connections.
function securityFor (spec) {
  const out = {}
  if (spec.ssl) {
    const read = path => (path ? fs.readFileSync(path) : undefined)
    out.ssl = {
      ca: spec.ssl.ca ? [read(spec.ssl.ca)] : undefined,
      cert: read(spec.ssl.cert),
      key: read(spec.ssl.key),
      rejectUnauthorized: true
    }
  }
  if (spec.sasl) out.sasl = { ...spec.sasl }
  return out
}

function kafkaFor (spec) {
  return new Kafka({
    clientId: 'kt-kafkajs',
    brokers: spec.brokers,
    logLevel: logLevel.WARN,
    logCreator: stderrLog,
    // spec.retry: longer retries where a test kills brokers under the client
    retry: spec.retry || { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
    ...securityFor(spec)
  })
}

function encodeMessage (m) {
  return {
    offset: String(m.offset),
    key: b64(m.key),
    value: b64(m.value),
    timestamp: String(m.timestamp),
    headers: Object.fromEntries(
      Object.entries(m.headers || {}).map(([k, v]) => [k, Array.isArray(v) ? v.map(b64) : b64(v)])
    )
  }
}

// spec: {brokers, topic, compression, idempotent, acks, batches: [[{key, value, headers, partition}]]}
// result: {batches: [[{partition, baseOffset, errorCode}]]}
// With spec.stream (a producer running while brokers are killed): spec.delayMs
// between batches, a batch that fails is reported as {error} and the producer goes
// on, and after each batch a progress line {"progress": n, "ok": bool} is printed
// (the result stays the last line); with spec.pauseAt and spec.resumeFile it
// waits after that many batches until the file exists.
async function produce (spec) {
  const kafka = kafkaFor(spec)
  const producer = kafka.producer({
    idempotent: !!spec.idempotent,
    maxInFlightRequests: spec.idempotent ? 1 : undefined,
    allowAutoTopicCreation: true
  })
  await producer.connect()
  const out = []
  try {
    for (const batch of spec.batches) {
      if (spec.stream) {
        let meta = null
        try {
          meta = await sendBatch(producer, spec, batch)
          out.push(meta.map(r => ({ partition: r.partition, baseOffset: r.baseOffset, errorCode: r.errorCode })))
        } catch (e) {
          out.push({ error: String(e && e.message ? e.message : e) })
        }
        process.stdout.write(JSON.stringify({ progress: out.length, ok: meta != null }) + '\n')
        if (spec.pauseAt === out.length && spec.resumeFile) {
          // wait half way until the test has done what it does mid-run (a kill)
          while (!fs.existsSync(spec.resumeFile)) await new Promise(resolve => setTimeout(resolve, 50))
        }
        await new Promise(resolve => setTimeout(resolve, spec.delayMs || 0))
        continue
      }
      const meta = await producer.send({
        topic: spec.topic,
        acks: spec.acks == null ? -1 : spec.acks,
        compression: CODECS[spec.compression || 'none'],
        messages: batch.map(m => ({
          key: unb64(m.key),
          value: unb64(m.value),
          partition: m.partition == null ? 0 : m.partition,
          timestamp: m.timestamp == null ? undefined : String(m.timestamp),
          headers: Object.fromEntries(Object.entries(m.headers || {}).map(([k, v]) => [k, unb64(v)]))
        }))
      })
      out.push(meta.map(r => ({ partition: r.partition, baseOffset: r.baseOffset, errorCode: r.errorCode })))
    }
  } finally {
    await producer.disconnect()
  }
  return { batches: out }
}

function sendBatch (producer, spec, batch) {
  return producer.send({
    topic: spec.topic,
    acks: spec.acks == null ? -1 : spec.acks,
    compression: CODECS[spec.compression || 'none'],
    messages: batch.map(m => ({
      key: unb64(m.key),
      value: unb64(m.value),
      partition: m.partition == null ? 0 : m.partition
    }))
  })
}

// Reading without a consumer group: the admin client's fetchTopicOffsets for the
// partition's range, then Fetch requests straight to the partition leader through
// kafkajs's own cluster and broker classes (what consumer.run uses underneath).
// spec: {brokers, topic, partition, count, timeoutMs, maxBytes, maxWaitTime}
// result: {low, high, messages: [...]}
async function fetchPartition (spec) {
  const kafka = kafkaFor(spec)
  const admin = kafka.admin()
  await admin.connect()
  let offsets
  try {
    offsets = await admin.fetchTopicOffsets(spec.topic)
  } finally {
    await admin.disconnect()
  }
  const partition = spec.partition || 0
  const range = offsets.find(o => o.partition === partition)
  const cluster = new Cluster({
    logger: createLogger({ level: logLevel.WARN, logCreator: stderrLog }),
    brokers: spec.brokers,
    clientId: 'kt-kafkajs-fetch',
    connectionTimeout: 3000,
    socketFactory: require('kafkajs/src/network/socketFactory')(),
    retry: { retries: 3 },
    metadataMaxAge: 300000,
    allowAutoTopicCreation: false
  })
  await cluster.connect()
  const messages = []
  try {
    await cluster.addTargetTopic(spec.topic)
    await cluster.refreshMetadata()
    const leaders = cluster.findLeaderForPartitions(spec.topic, [partition])
    const broker = await cluster.findBroker({ nodeId: Object.keys(leaders)[0] })
    let next = BigInt(range.low)
    const deadline = Date.now() + (spec.timeoutMs || 10000)
    for (let i = 0; i < 10000 && messages.length < spec.count && Date.now() < deadline; i++) {
      const response = await broker.fetch({
        replicaId: -1,
        isolationLevel: 1,
        maxWaitTime: spec.maxWaitTime == null ? 500 : spec.maxWaitTime,
        minBytes: 1,
        maxBytes: spec.maxBytes || 10485760,
        topics: [{
          topic: spec.topic,
          partitions: [{ partition, fetchOffset: String(next), maxBytes: spec.maxBytes || 1048576 }]
        }]
      })
      for (const t of response.responses) {
        for (const p of t.partitions) {
          if (p.errorCode) throw new Error(`fetch error code ${p.errorCode}`)
          for (const m of p.messages) {
            // A batch comes whole: skip records before the fetch offset.
            if (BigInt(m.offset) < next) continue
            messages.push(encodeMessage(m))
            next = BigInt(m.offset) + 1n
          }
        }
      }
    }
  } finally {
    await cluster.disconnect()
  }
  return { low: range.low, high: range.high, messages }
}

// spec: {brokers, topic, groupId, count, timeoutMs}: consumer.run in a group.
async function groupConsume (spec) {
  const kafka = kafkaFor(spec)
  const consumer = kafka.consumer({ groupId: spec.groupId, maxWaitTimeInMs: 500 })
  await consumer.connect()
  const messages = []
  try {
    await consumer.subscribe({ topic: spec.topic, fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, spec.timeoutMs || 20000)
      consumer.run({
        eachMessage: async ({ partition, message }) => {
          messages.push({ partition, ...encodeMessage(message) })
          if (messages.length >= spec.count) {
            clearTimeout(timer)
            resolve()
          }
        }
      }).catch(reject)
    })
  } finally {
    await consumer.disconnect()
  }
  return { messages }
}

// spec: {brokers, topic, partitions, configs: {k: v}, morePartitions}: the admin
// client's topic lifecycle. result: what the broker reported at each step.
async function adminTopics (spec) {
  const kafka = kafkaFor(spec)
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{
        topic: spec.topic,
        numPartitions: spec.partitions,
        configEntries: Object.entries(spec.configs || {}).map(([name, value]) => ({ name, value }))
      }],
      waitForLeaders: true
    })
    // kafkajs resolves to false (not an error) when the topic already exists.
    const createdAgain = await admin.createTopics({ topics: [{ topic: spec.topic, numPartitions: 1 }] })
    const listed = await admin.listTopics()
    const meta = await admin.fetchTopicMetadata({ topics: [spec.topic] })
    const configs = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: 2, name: spec.topic }]
    })
    await admin.createPartitions({ topicPartitions: [{ topic: spec.topic, count: spec.morePartitions }] })
    const grown = await admin.fetchTopicMetadata({ topics: [spec.topic] })
    await admin.deleteTopics({ topics: [spec.topic] })
    const after = await admin.listTopics()
    return {
      created,
      createdAgain,
      listed: listed.includes(spec.topic),
      partitions: meta.topics[0].partitions.length,
      configs: Object.fromEntries(configs.resources[0].configEntries.map(c => [c.configName, c.configValue])),
      grownPartitions: grown.topics[0].partitions.length,
      listedAfterDelete: after.includes(spec.topic)
    }
  } finally {
    await admin.disconnect()
  }
}

// spec: {brokers, topic, transactionalId, transactions: [{commit, partition, values: [b64],
// offsets: {groupId, topic, partition, offset} | null}], fence}: one transactional
// producer runs the transactions in order (offsets sent to the transaction when
// given). With `fence`, it then opens one more, a second producer with the same
// id initialises, and the first tries to commit. result: {fencedError} (the error
// type the zombie got, or null).
async function transactions (spec) {
  const kafka = kafkaFor(spec)
  const producer = kafka.producer({ transactionalId: spec.transactionalId, maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  let fencedError = null
  try {
    for (const t of spec.transactions) {
      const txn = await producer.transaction()
      await txn.send({
        topic: spec.topic,
        messages: t.values.map(v => ({ value: unb64(v), partition: t.partition || 0 }))
      })
      if (t.offsets) {
        await txn.sendOffsets({
          consumerGroupId: t.offsets.groupId,
          topics: [{ topic: t.offsets.topic, partitions: [{ partition: t.offsets.partition, offset: String(t.offsets.offset) }] }]
        })
      }
      if (t.commit) await txn.commit()
      else await txn.abort()
    }
    if (spec.fence) {
      const zombie = await producer.transaction()
      await zombie.send({ topic: spec.topic, messages: [{ value: Buffer.from('zombie'), partition: 0 }] })
      const fresh = kafka.producer({ transactionalId: spec.transactionalId, maxInFlightRequests: 1, idempotent: true })
      await fresh.connect()
      // kafkajs sends InitProducerId with the first transaction.
      const txn = await fresh.transaction()
      try {
        await zombie.commit()
      } catch (err) {
        fencedError = err.type || err.name
      }
      await txn.send({ topic: spec.topic, messages: [{ value: Buffer.from('fresh'), partition: 0 }] })
      await txn.commit()
      await fresh.disconnect()
    }
  } finally {
    await producer.disconnect()
  }
  return { fencedError }
}

const COMMANDS = {
  produce,
  fetch: fetchPartition,
  'group-consume': groupConsume,
  'admin-topics': adminTopics,
  transactions
}

async function main () {
  const command = COMMANDS[process.argv[2]]
  if (!command) throw new Error(`usage: kt-client.js ${Object.keys(COMMANDS).join('|')} < spec.json`)
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const spec = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  await writeOut(JSON.stringify(await command(spec)) + '\n')
}

// process.exit does not wait for a pipe to take what was written: a result
// larger than the pipe's buffer (64 KiB) was cut short. Exit once it is written.
function writeOut (text) {
  return new Promise(resolve => process.stdout.write(text, () => resolve()))
}

main().then(
  () => process.exit(0),
  err => writeOut(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }) + '\n')
    .then(() => process.exit(1))
)
