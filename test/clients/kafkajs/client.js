#!/usr/bin/env node
// kgate end-to-end client: kafkajs.
//
// Usage: node client.js BOOTSTRAP TOPIC create PARTITIONS
//        node client.js BOOTSTRAP TOPIC produce FROM TO CODEC
//        node client.js BOOTSTRAP TOPIC verify FROM TO -
// See test/clients/README.md for the record convention.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const kafkajsPackage = require('kafkajs/package.json')
const SnappyCodec = require('kafkajs-snappy')
const lz4js = require('lz4js')
const lz4xxh32 = require('lz4js/xxh32.js').hash
const { ZstdCodec } = require('zstd-codec')

const CLIENT = 'kafkajs'
const PARTITIONS = 3
const BASE_TS = 1700000000000
// The records' timestamps are in 2023: ask for unlimited retention so that a
// time-based retention check does not delete them.
const TOPIC_CONFIG = [{ name: 'retention.ms', value: '-1' }]
const VERIFY_TIMEOUT_MS = 90000
const SEND_BATCH = 250

class Failure extends Error {
  constructor(message) {
    super(message)
    this.name = 'Failure'
  }
}

// kafkajs ships only gzip. Snappy comes from kafkajs-snappy; LZ4 (frame
// format) and zstd are wired here from pure-JS libraries so that nothing
// needs a native build.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
// lz4js writes frames without the block-independence flag, which Kafka's
// LZ4 reader rejects. Its frames of up to one 4 MiB block are independent,
// so set the flag and recompute the header checksum.
const LZ4_MAX_BLOCK = 4 << 20
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) {
    if (encoder.buffer.length > LZ4_MAX_BLOCK) throw new Error('lz4: batch larger than one 4 MiB block')
    const frame = Buffer.from(lz4js.compress(encoder.buffer))
    frame[4] |= 0x20 // FLG: block independence
    frame[6] = (lz4xxh32(0, frame, 4, 2) >>> 8) & 0xff // HC over FLG and BD
    return frame
  },
  async decompress(buffer) {
    return Buffer.from(lz4js.decompress(buffer))
  },
})
let zstdReady = null
const zstd = () => {
  if (!zstdReady) zstdReady = new Promise(resolve => ZstdCodec.run(z => resolve(z)))
  return zstdReady
}
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) {
    const z = await zstd()
    const out = new z.Simple().compress(encoder.buffer, 3)
    if (!out) throw new Error('zstd compression failed')
    return Buffer.from(out)
  },
  async decompress(buffer) {
    const z = await zstd()
    const out = new z.Streaming().decompress(buffer)
    if (!out) throw new Error('zstd decompression failed')
    return Buffer.from(out)
  },
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

function record(i) {
  const unit = `value-${i}-`
  const n = 10 + ((i * 37) % 491)
  return {
    partition: i % PARTITIONS,
    key: `key-${i}`,
    value: unit.repeat(Math.floor(n / unit.length) + 1).slice(0, n),
    headers: [['h1', `v${i}`], ['h2', '']],
    timestamp: BASE_TS + i,
  }
}

// With KGATE_E2E_SASL_MECHANISM (plain, scram-sha-256, scram-sha-512),
// KGATE_E2E_SASL_USER and KGATE_E2E_SASL_PASSWORD the client authenticates;
// with KGATE_E2E_SSL_CA it speaks TLS trusting that CA file, presenting
// the client certificate KGATE_E2E_SSL_CERT (key KGATE_E2E_SSL_KEY) if set.
function security() {
  const out = {}
  if (process.env.KGATE_E2E_SSL_CA) {
    const fs = require('fs')
    out.ssl = { ca: [fs.readFileSync(process.env.KGATE_E2E_SSL_CA, 'utf8')] }
    if (process.env.KGATE_E2E_SSL_CERT) {
      out.ssl.cert = fs.readFileSync(process.env.KGATE_E2E_SSL_CERT, 'utf8')
      out.ssl.key = fs.readFileSync(process.env.KGATE_E2E_SSL_KEY, 'utf8')
    }
  }
  if (process.env.KGATE_E2E_SASL_MECHANISM) {
    out.sasl = {
      mechanism: process.env.KGATE_E2E_SASL_MECHANISM,
      username: process.env.KGATE_E2E_SASL_USER,
      password: process.env.KGATE_E2E_SASL_PASSWORD,
    }
  }
  return out
}

function newKafka(bootstrap) {
  return new Kafka({
    clientId: 'kgate-e2e-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 5000 },
    ...security(),
  })
}

async function create(bootstrap, topic, partitions) {
  const admin = newKafka(bootstrap).admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions: partitions, replicationFactor: 1, configEntries: TOPIC_CONFIG }],
      waitForLeaders: true,
      timeout: 30000,
    })
    if (!created) throw new Failure(`createTopics: topic ${topic} already existed`)
    return {}
  } finally {
    await admin.disconnect()
  }
}

async function produce(bootstrap, topic, from, to, codec) {
  if (!(codec in CODECS)) throw new Failure(`unknown codec ${codec}`)
  const producer = newKafka(bootstrap).producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false })
  await producer.connect()
  let acked = 0
  try {
    for (let lo = from; lo < to; lo += SEND_BATCH) {
      const messages = []
      for (let i = lo; i < Math.min(lo + SEND_BATCH, to); i++) {
        const r = record(i)
        messages.push({
          partition: r.partition,
          key: r.key,
          value: r.value,
          headers: Object.fromEntries(r.headers),
          timestamp: String(r.timestamp),
        })
      }
      const res = await producer.send({ topic, acks: -1, compression: CODECS[codec], messages })
      for (const pr of res) {
        if (pr.errorCode !== 0) throw new Failure(`produce partition ${pr.partition}: error code ${pr.errorCode}`)
      }
      acked += messages.length
    }
    return { records: acked }
  } finally {
    await producer.disconnect()
  }
}

// kafkajs's consumer only works through a consumer group, which kgate does not
// have yet. To assign partitions directly, verify drives the same Cluster and
// Broker objects (and so the same Fetch encoding, decompression and record
// decoding) that the kafkajs consumer uses internally.
function clusterOf(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  if (!sym) throw new Failure(`kafkajs ${kafkajsPackage.version}: cannot find its internal cluster factory`)
  return kafka[sym]({ allowAutoTopicCreation: false, isolationLevel: 1 })
}

function headerPairs(headers) {
  const pairs = []
  for (const [k, v] of Object.entries(headers || {})) {
    for (const one of Array.isArray(v) ? v : [v]) pairs.push([k, one == null ? null : one.toString()])
  }
  return pairs
}

function check(m, partition, n, i) {
  const want = record(i)
  const where = `partition ${partition} offset ${m.offset} (record #${n} there, expected index ${i})`
  if (m.isControlRecord) throw new Failure(`${where}: unexpected control record`)
  if (m.offset !== String(n)) throw new Failure(`${where}: got offset ${m.offset}, want ${n}`)
  const key = m.key == null ? null : m.key.toString()
  if (key !== want.key) throw new Failure(`${where}: key ${JSON.stringify(key)}, want ${JSON.stringify(want.key)}`)
  const value = m.value == null ? null : m.value.toString()
  if (value !== want.value) {
    throw new Failure(`${where}: value ${JSON.stringify(value && value.slice(0, 40))} (${value && value.length} bytes), want ${JSON.stringify(want.value.slice(0, 40))} (${want.value.length} bytes)`)
  }
  const headers = headerPairs(m.headers)
  if (JSON.stringify(headers) !== JSON.stringify(want.headers)) {
    throw new Failure(`${where}: headers ${JSON.stringify(headers)}, want ${JSON.stringify(want.headers)}`)
  }
  if (m.timestamp !== String(want.timestamp)) throw new Failure(`${where}: timestamp ${m.timestamp}, want ${want.timestamp}`)
  const tsType = m.batchContext && m.batchContext.timestampType
  if (m.magicByte !== 2 || tsType !== 0) {
    throw new Failure(`${where}: magic ${m.magicByte} timestamp type ${tsType}: want magic 2 with CreateTime (0)`)
  }
}

async function verify(bootstrap, topic, from, to) {
  const want = []
  for (let p = 0; p < PARTITIONS; p++) {
    want.push([])
    for (let i = from; i < to; i++) if (i % PARTITIONS === p) want[p].push(i)
  }
  const got = want.map(() => 0)
  const highWatermark = want.map(() => null)
  const progress = () => got.map((g, p) => `p${p} ${g}/${want[p].length}`).join(', ')
  const complete = () => got.every((g, p) => g >= want[p].length)

  const cluster = clusterOf(newKafka(bootstrap))
  await cluster.connect()
  try {
    await cluster.addTargetTopic(topic)
    await cluster.refreshMetadata()
    const deadline = Date.now() + VERIFY_TIMEOUT_MS
    while (!complete() || highWatermark.some(h => h === null)) {
      if (Date.now() > deadline) throw new Failure(`incomplete after ${VERIFY_TIMEOUT_MS / 1000}s: ${progress()}`)
      const leaders = cluster.findLeaderForPartitions(topic, want.map((_, p) => p))
      for (const [nodeId, partitions] of Object.entries(leaders)) {
        const broker = await cluster.findBroker({ nodeId })
        const resp = await broker.fetch({
          replicaId: -1,
          isolationLevel: 1,
          maxWaitTime: 500,
          minBytes: 1,
          maxBytes: 10 << 20,
          topics: [{ topic, partitions: partitions.map(p => ({ partition: p, fetchOffset: String(got[p]), maxBytes: 1 << 20 })) }],
        })
        for (const tr of resp.responses) {
          for (const pr of tr.partitions) {
            const p = pr.partition
            if (pr.errorCode !== 0) throw new Failure(`fetch partition ${p} at offset ${got[p]}: error code ${pr.errorCode} (${progress()})`)
            highWatermark[p] = Number(pr.highWatermark)
            for (const m of pr.messages) {
              // A compressed batch can start before the requested offset.
              if (Number(m.offset) < got[p]) continue
              const n = got[p]
              if (n >= want[p].length) {
                throw new Failure(`partition ${p}: unexpected extra record at offset ${m.offset} (key ${m.key}): want exactly ${want[p].length}`)
              }
              check(m, p, n, want[p][n])
              got[p]++
            }
          }
        }
      }
    }
    for (let p = 0; p < PARTITIONS; p++) {
      if (highWatermark[p] !== want[p].length) {
        throw new Failure(`partition ${p}: high watermark ${highWatermark[p]}, want ${want[p].length}`)
      }
    }
    return { records: got.reduce((a, b) => a + b, 0) }
  } finally {
    await cluster.disconnect()
  }
}

async function main(argv) {
  const result = { client: CLIENT, version: kafkajsPackage.version }
  const start = Date.now()
  try {
    if (argv.length < 3) throw new Failure('usage: client.js BOOTSTRAP TOPIC create|produce|verify ...')
    const [bootstrap, topic, mode] = argv
    result.mode = mode
    if (mode === 'create') {
      Object.assign(result, await create(bootstrap, topic, Number(argv[3])))
    } else if (mode === 'produce' || mode === 'verify') {
      const from = Number(argv[3])
      const to = Number(argv[4])
      Object.assign(result, { from, to })
      if (mode === 'produce') {
        result.codec = argv[5]
        Object.assign(result, await produce(bootstrap, topic, from, to, argv[5]))
      } else {
        Object.assign(result, await verify(bootstrap, topic, from, to))
      }
    } else {
      throw new Failure(`unknown mode ${mode}`)
    }
    result.ok = true
  } catch (e) {
    result.ok = false
    result.error = `${e.name}: ${e.message}`
  }
  result.elapsed_ms = Date.now() - start
  process.stdout.write(JSON.stringify(result) + '\n')
  return result.ok ? 0 : 1
}

main(process.argv.slice(2)).then(code => process.exit(code), e => {
  process.stdout.write(JSON.stringify({ client: CLIENT, ok: false, error: String(e) }) + '\n')
  process.exit(1)
})
