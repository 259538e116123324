// kafkajs over TLS with a client certificate (the broker's SSL listener requires one) and
// over SASL_SSL with SCRAM-SHA-512, against the broker run-clients.sh starts with those
// listeners (Strom or Apache Kafka, configured alike; certificates made per run). Each
// produces and reads back; a wrong password is refused with SASL_AUTHENTICATION_FAILED.
// Records are read with kafkajs's own Cluster/Broker.fetch, as in kafkajs.test.js.
'use strict'

const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const { Kafka, logLevel } = require('kafkajs')

const env = name => {
  const v = process.env[name]
  assert.ok(v, `${name} is not set (run through compat-tests/run-clients.sh)`)
  return v
}
const TIMEOUT = 120_000
const N = 50

function tls(withCert) {
  const o = { ca: [fs.readFileSync(env('STROM_COMPAT_CA'))], servername: 'localhost' }
  if (withCert) {
    o.cert = fs.readFileSync(env('STROM_COMPAT_CLIENT_CERT'))
    o.key = fs.readFileSync(env('STROM_COMPAT_CLIENT_KEY'))
  }
  return o
}

const clients = {
  ssl: () => new Kafka({
    clientId: 'strom-compat-kafkajs-ssl', brokers: [env('STROM_COMPAT_SSL_BOOTSTRAP')],
    ssl: tls(true), logLevel: logLevel.NOTHING, retry: { retries: 2 },
  }),
  'sasl-ssl': (password = env('STROM_COMPAT_SASL_PASSWORD')) => new Kafka({
    clientId: 'strom-compat-kafkajs-sasl', brokers: [env('STROM_COMPAT_SASL_SSL_BOOTSTRAP')],
    ssl: tls(false), logLevel: logLevel.NOTHING, retry: { retries: 0 },
    sasl: { mechanism: 'scram-sha-512', username: env('STROM_COMPAT_SASL_USER'), password },
  }),
}

async function fetchAll(kafka, topic, want) {
  const createCluster = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  assert.ok(createCluster, 'kafkajs internals changed: no private:Kafka:createCluster')
  const cluster = kafka[createCluster]({ allowAutoTopicCreation: false })
  await cluster.connect()
  const got = []
  try {
    await cluster.addTargetTopic(topic)
    await cluster.refreshMetadata()
    const [nodeId] = Object.keys(cluster.findLeaderForPartitions(topic, [0]))
    const broker = await cluster.findBroker({ nodeId })
    const deadline = Date.now() + 60_000
    while (got.length < want) {
      assert.ok(Date.now() < deadline, `fetch timed out with ${got.length} of ${want}`)
      const resp = await broker.fetch({
        replicaId: -1, isolationLevel: 0, maxWaitTime: 500, minBytes: 1, maxBytes: 1 << 20,
        topics: [{ topic, partitions: [{ partition: 0, fetchOffset: String(got.length), maxBytes: 1 << 20 }] }],
      })
      for (const m of resp.responses[0].partitions[0].messages) {
        if (BigInt(m.offset) >= BigInt(got.length)) got.push([m.key.toString(), m.value.toString()])
      }
    }
  } finally {
    await cluster.disconnect()
  }
  return got
}

for (const [name, make] of Object.entries(clients)) {
  test(`${name}: produce and consume`, { timeout: TIMEOUT }, async () => {
    const kafka = make()
    const topic = `node-kafkajs-${name}-${crypto.randomBytes(4).toString('hex')}`
    const admin = kafka.admin()
    await admin.connect()
    try {
      assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }), true)
    } finally {
      await admin.disconnect()
    }
    const records = Array.from({ length: N }, (_, i) => [`k${i}`, `v${i}-${crypto.randomBytes(4).toString('hex')}`])
    const producer = kafka.producer({ allowAutoTopicCreation: false })
    await producer.connect()
    try {
      await producer.send({ topic, acks: -1, messages: records.map(([key, value]) => ({ partition: 0, key, value })) })
    } finally {
      await producer.disconnect()
    }
    assert.deepEqual(await fetchAll(kafka, topic, N), records)
  })
}

test('sasl-ssl: a wrong password is refused', { timeout: TIMEOUT }, async () => {
  const admin = clients['sasl-ssl']('not-the-password').admin()
  await assert.rejects(admin.connect(), e => {
    // kafkajs names the broker's SaslAuthenticate error.
    assert.match(String(e.type || e.name) + ' ' + e.message, /SASL_AUTHENTICATION_FAILED|SASL SCRAM SHA512 authentication failed/, e.message)
    return true
  })
})
