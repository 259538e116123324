// kafkajs against the broker at STROM_COMPAT_BOOTSTRAP (`strom serve` or Apache Kafka;
// compat-tests/run-clients.sh runs the same tests against both), with node's test runner.
//
// kafkajs has no manual assignment: its only consumer joins a group. Strom has no consumer
// groups yet, so records are read back with kafkajs's own Cluster/Broker.fetch (the code
// path its consumer uses underneath, including its record batch decoding and codecs),
// reached through the Kafka object's private createCluster.
'use strict'

const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, ConfigSource, logLevel } = require('kafkajs')

// kafkajs ships gzip only; snappy comes from kafkajs-snappy (pure JS). lz4 and zstd need
// native npm modules (node-gyp builds), left out: see compat-tests/ALLOWLIST.md.
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')

const BOOTSTRAP = process.env.STROM_COMPAT_BOOTSTRAP
const RECORDS = parseInt(process.env.STROM_COMPAT_CLIENT_RECORDS || '2000', 10)
const PARTITIONS = 3
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }
// acks and idempotence: idempotence needs acks=all, so it is off for acks 0 and 1.
const MODES = {
  acks0: { acks: 0, idempotent: false },
  acks1: { acks: 1, idempotent: false },
  acksall: { acks: -1, idempotent: false },
  'acksall-idempotent': { acks: -1, idempotent: true },
}
const TIMEOUT = 120_000

assert.ok(BOOTSTRAP, 'STROM_COMPAT_BOOTSTRAP is not set (run through compat-tests/run-clients.sh)')

const kafka = new Kafka({
  clientId: 'strom-compat-kafkajs',
  brokers: [BOOTSTRAP],
  logLevel: logLevel.ERROR,
  retry: { retries: 5 },
})

const topicName = what => `node-kafkajs-${what}-${crypto.randomBytes(4).toString('hex')}`

function pseudoRandom(seed, len) {
  const b = Buffer.alloc(len)
  let x = 0x9e3779b97f4a7c15n ^ BigInt(seed)
  const mask = (1n << 64n) - 1n
  for (let i = 0; i < len; i++) {
    x ^= (x << 13n) & mask
    x ^= x >> 7n
    x ^= (x << 17n) & mask
    b[i] = Number(x & 0xffn)
  }
  return b
}

// The record shapes every language's suite sends: null and empty keys and values,
// no/one/repeated/empty headers, incompressible, compressible and 100 KB values.
// Headers are [key, value] pairs in wire order (value null = a null header value).
function makeRecords(n, base) {
  const out = []
  for (let i = 0; i < n; i++) {
    const key = i % 7 === 0 ? null : i % 7 === 1 ? Buffer.alloc(0) : Buffer.from(`key-${i}`)
    let value
    if (i % 11 === 0) value = null
    else if (i % 11 === 1) value = Buffer.alloc(0)
    else if (i % 13 === 5) value = Buffer.from('compressible '.repeat(150))
    else if (i === 17) value = pseudoRandom(i, 100_000)
    else value = pseudoRandom(i, 1 + ((i * 37) % 300))
    const headers = [
      [],
      [['h', Buffer.from(`v-${i}`)]],
      [['dup', Buffer.from('a')], ['dup', Buffer.from('b')]],
      [['empty', Buffer.alloc(0)]],
      // kafkajs cannot send a null header value (its size computation throws on null),
      // so this shape carries a non-null value here: see compat-tests/ALLOWLIST.md.
      [['null-value', Buffer.from('not-null')]],
    ][i % 5]
    out.push({ partition: i % PARTITIONS, key, value, timestamp: base + i, headers })
  }
  return out
}

// kafkajs takes headers as an object; a repeated key is an array of values.
function headersObject(pairs) {
  const o = {}
  for (const [k, v] of pairs) {
    if (o[k] === undefined) o[k] = v
    else o[k] = Array.isArray(o[k]) ? o[k].concat([v]) : [o[k], v]
  }
  return o
}

const baseTimestamp = () => Date.now() - 600_000

async function withAdmin(fn) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

async function createTopic(admin, topic, numPartitions, configEntries = []) {
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions, replicationFactor: 1, configEntries }],
    waitForLeaders: true,
    timeout: 30_000,
  })
  assert.equal(created, true, `createTopics(${topic}) did not create it`)
  // Wait until every partition answers ListOffsets: Kafka answers CreateTopics before the
  // broker has created the partitions, and drops acks=0 records sent in between (FINDINGS.md).
  const deadline = Date.now() + 30_000
  for (;;) {
    try {
      const o = await admin.fetchTopicOffsets(topic)
      if (o.length === numPartitions) return
    } catch (e) {
      if (Date.now() > deadline) throw e
    }
    assert.ok(Date.now() < deadline, `partitions of ${topic} not ready within 30 s`)
    await new Promise(r => setTimeout(r, 50))
  }
}

// Sends the records in batches of 250 (one produce request each) and returns the offset
// each ack reported (null under acks=0: there is no response).
async function produce(topic, codec, mode, records) {
  const { acks, idempotent } = MODES[mode]
  const producer = kafka.producer({
    idempotent,
    maxInFlightRequests: idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  const offsets = new Array(records.length).fill(null)
  try {
    for (let start = 0; start < records.length; start += 250) {
      const chunk = records.slice(start, start + 250)
      const meta = await producer.send({
        topic,
        acks,
        compression: CODECS[codec],
        timeout: 30_000,
        messages: chunk.map(r => ({
          partition: r.partition,
          key: r.key,
          value: r.value,
          timestamp: String(r.timestamp),
          headers: headersObject(r.headers),
        })),
      })
      if (acks === 0) continue
      // One entry per partition: its base offset; the chunk's records follow in order.
      for (const m of meta) {
        assert.equal(m.errorCode, 0, `produce error ${m.errorCode} on partition ${m.partition}`)
        let next = BigInt(m.baseOffset)
        chunk.forEach((r, j) => {
          if (r.partition === m.partition) offsets[start + j] = next++
        })
      }
    }
  } finally {
    await producer.disconnect()
  }
  return offsets
}

// Reads every partition from offset 0 until it holds want[p] records: Fetch requests through
// kafkajs's Cluster/Broker (see the file comment).
async function consumeAll(topic, want) {
  const createCluster = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  assert.ok(createCluster, 'kafkajs internals changed: no private:Kafka:createCluster')
  const cluster = kafka[createCluster]({ allowAutoTopicCreation: false })
  await cluster.connect()
  const got = want.map(() => [])
  const next = want.map(() => 0n)
  try {
    await cluster.addTargetTopic(topic)
    await cluster.refreshMetadata()
    const leaders = cluster.findLeaderForPartitions(topic, want.map((_, p) => p))
    const deadline = Date.now() + 60_000
    while (got.some((g, p) => g.length < want[p])) {
      assert.ok(Date.now() < deadline, `consume timed out: have ${got.map(g => g.length)} of ${want}`)
      for (const [nodeId, parts] of Object.entries(leaders)) {
        const broker = await cluster.findBroker({ nodeId })
        const todo = parts.filter(p => got[p].length < want[p])
        if (todo.length === 0) continue
        const resp = await broker.fetch({
          replicaId: -1,
          isolationLevel: 0,
          maxWaitTime: 500,
          minBytes: 1,
          maxBytes: 10 << 20,
          topics: [{ topic, partitions: todo.map(p => ({ partition: p, fetchOffset: String(next[p]), maxBytes: 1 << 20 })) }],
        })
        for (const t of resp.responses) {
          for (const part of t.partitions) {
            assert.equal(part.errorCode, 0, `fetch error ${part.errorCode} on partition ${part.partition}`)
            for (const m of part.messages) {
              // A fetch returns whole batches: skip records before the fetch offset.
              if (BigInt(m.offset) < next[part.partition] || m.isControlRecord) continue
              got[part.partition].push(m)
              next[part.partition] = BigInt(m.offset) + 1n
            }
          }
        }
      }
    }
  } finally {
    await cluster.disconnect()
  }
  return got
}

const describe = b => (b === null ? 'null' : b.length > 24 ? `${b.length} bytes ${b.subarray(0, 24).toString('hex')}…` : JSON.stringify(b.toString('latin1')))

// Byte-for-byte equality that tells null from empty.
function sameBytes(a, b) {
  if (a === null || b === null) return a === b
  return Buffer.compare(a, b) === 0
}

function compare(sent, m, where) {
  const errs = []
  if (!sameBytes(sent.key, m.key)) errs.push(`key ${describe(m.key)}, want ${describe(sent.key)}`)
  if (!sameBytes(sent.value, m.value)) errs.push(`value ${describe(m.value)}, want ${describe(sent.value)}`)
  if (String(sent.timestamp) !== String(m.timestamp)) errs.push(`timestamp ${m.timestamp}, want ${sent.timestamp}`)
  // The batch's timestamp type (kafkajs: 0 CreateTime, 1 LogAppendTime).
  if (m.batchContext.timestampType !== 0) errs.push(`timestamp type ${m.batchContext.timestampType}, want CreateTime (0)`)
  // kafkajs decodes headers into an object in wire order; flatten back into pairs.
  const pairs = []
  for (const [k, v] of Object.entries(m.headers || {})) {
    for (const x of Array.isArray(v) ? v : [v]) pairs.push([k, x])
  }
  if (pairs.length !== sent.headers.length) errs.push(`${pairs.length} headers, want ${sent.headers.length}`)
  else {
    sent.headers.forEach(([k, v], h) => {
      if (pairs[h][0] !== k || !sameBytes(pairs[h][1], v)) errs.push(`header ${h} ${pairs[h][0]}:${describe(pairs[h][1])}, want ${k}:${describe(v)}`)
    })
  }
  return errs.map(e => `${where}: ${e}`)
}

for (const codec of Object.keys(CODECS)) {
  for (const mode of Object.keys(MODES)) {
    test(`produce/consume byte for byte: ${codec} ${mode}`, { timeout: TIMEOUT }, async () => {
      const topic = topicName(`${codec}-${mode}`)
      await withAdmin(admin => createTopic(admin, topic, PARTITIONS))
      const records = makeRecords(RECORDS, baseTimestamp())
      const acked = await produce(topic, codec, mode, records)
      const order = Array.from({ length: PARTITIONS }, () => [])
      records.forEach((r, i) => order[r.partition].push(i))
      if (MODES[mode].acks !== 0) {
        order.forEach((idx, p) =>
          idx.forEach((i, j) => assert.equal(acked[i], BigInt(j), `record ${i} acked at ${acked[i]} in partition ${p}, want ${j}`)),
        )
      }
      const want = order.map(idx => idx.length)
      const got = await consumeAll(topic, want)
      const errs = []
      order.forEach((idx, p) => {
        if (got[p].length !== idx.length) errs.push(`partition ${p}: ${got[p].length} records, want ${idx.length}`)
        got[p].forEach((m, j) => {
          if (m.offset !== String(j)) errs.push(`partition ${p}: offset ${m.offset} at position ${j} (offsets must be contiguous from 0)`)
          errs.push(...compare(records[idx[j]], m, `partition ${p} offset ${j}`))
        })
      })
      assert.deepEqual(errs.slice(0, 10), [], `${errs.length} differences`)
      const ends = await withAdmin(admin => admin.fetchTopicOffsets(topic))
      for (const e of ends) assert.equal(e.high, String(want[e.partition]), `high watermark of partition ${e.partition}`)
    })
  }
}

test('admin: create, metadata, describe configs, delete', { timeout: TIMEOUT }, async () => {
  await withAdmin(async admin => {
    const topic = topicName('admin')
    await createTopic(admin, topic, PARTITIONS, [{ name: 'max.message.bytes', value: '2000000' }])
    // kafkajs resolves false when the topic exists (TOPIC_ALREADY_EXISTS from the broker).
    const again = await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], timeout: 30_000 })
    assert.equal(again, false, 'second createTopics should report TOPIC_ALREADY_EXISTS')

    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    assert.equal(md.topics.length, 1)
    assert.equal(md.topics[0].partitions.length, PARTITIONS)
    for (const p of md.topics[0].partitions) {
      assert.equal(p.partitionErrorCode, 0)
      assert.deepEqual(p.replicas, [p.leader])
      assert.deepEqual(p.isr, [p.leader])
    }

    const cfg = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
      includeSynonyms: false,
    })
    const res = cfg.resources[0]
    assert.equal(res.errorCode, 0)
    assert.ok(res.configEntries.length >= 20, `DescribeConfigs has ${res.configEntries.length} entries`)
    const byName = Object.fromEntries(res.configEntries.map(e => [e.configName, e]))
    const check = (name, value, source) => {
      assert.ok(byName[name], `${name} missing`)
      assert.equal(byName[name].configValue, value, `${name} value`)
      assert.equal(byName[name].configSource, source, `${name} source`)
    }
    check('max.message.bytes', '2000000', ConfigSource.TOPIC_CONFIG)
    check('cleanup.policy', 'delete', ConfigSource.DEFAULT_CONFIG)
    check('retention.ms', '604800000', ConfigSource.DEFAULT_CONFIG)

    await admin.deleteTopics({ topics: [topic], timeout: 30_000 })
    // Kafka answers DeleteTopics once its controller has committed the deletion; its broker
    // stops listing the topic when the metadata log reaches it. Strom has dropped it when it
    // answers. So: at once on Strom, within a bound on Kafka.
    const gone = Date.now() + (process.env.STROM_COMPAT_BROKER === 'strom' ? 0 : 30_000)
    let left = await admin.listTopics()
    while (left.includes(topic) && Date.now() < gone) {
      await new Promise(r => setTimeout(r, 100))
      left = await admin.listTopics()
    }
    assert.ok(!left.includes(topic), 'deleted topic still listed')
  })
})

test('ListOffsets by timestamp', { timeout: TIMEOUT }, async () => {
  const topic = topicName('list-offsets')
  await withAdmin(admin => createTopic(admin, topic, 1))
  const n = 200
  const base = baseTimestamp()
  const records = Array.from({ length: n }, (_, i) => ({
    partition: 0, key: Buffer.from(`k${i}`), value: Buffer.from(`v${i}`), timestamp: base + 10 * i, headers: [],
  }))
  await produce(topic, 'none', 'acksall-idempotent', records)
  await withAdmin(async admin => {
    // kafkajs answers "no offset at or after the timestamp" (-1) with the high watermark.
    const cases = [[base - 1000, 0], [base, 0], [base + 1, 1], [base + 570, 57], [base + 575, 58], [base + 10 * (n - 1), n - 1], [base + 10 * n, n]]
    for (const [ts, want] of cases) {
      const r = await admin.fetchTopicOffsetsByTimestamp(topic, ts)
      assert.deepEqual(r, [{ partition: 0, offset: String(want) }], `ListOffsets at base+${ts - base}`)
    }
    const o = await admin.fetchTopicOffsets(topic)
    assert.deepEqual(o.map(({ partition, low, high }) => ({ partition, low, high })), [{ partition: 0, low: '0', high: String(n) }])
  })
})
