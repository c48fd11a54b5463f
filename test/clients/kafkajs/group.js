#!/usr/bin/env node
// kgate end-to-end consumer-group member: kafkajs.
//
// Usage: node group.js BOOTSTRAP TOPIC group GROUP CLIENT_ID [key=value ...]
// See test/clients/GROUPS.md for the options and the JSON lines printed.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')
const kafkajsPackage = require('kafkajs/package.json')

const CLIENT = 'kafkajs'
const MAX_LIFETIME_MS = 180000

class Failure extends Error {
  constructor(message) {
    super(message)
    this.name = 'Failure'
  }
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

// kafkajs logs INFO through console.info (stdout); stdout is for JSON lines.
const stderrLogger = () => ({ namespace, level, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`${new Date().toISOString()} ${level} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

function parse(argv) {
  if (argv.length < 5 || argv[2] !== 'group') {
    throw new Failure('usage: group.js BOOTSTRAP TOPIC group GROUP CLIENT_ID [session=MS] [stopat=N]')
  }
  const o = { bootstrap: argv[0], topic: argv[1], group: argv[3], clientId: argv[4], session: 6000, stopat: -1 }
  for (const kv of argv.slice(5)) {
    const i = kv.indexOf('=')
    if (i < 0) throw new Failure(`option ${JSON.stringify(kv)} is not key=value`)
    const k = kv.slice(0, i)
    const v = kv.slice(i + 1)
    if (k === 'session' || k === 'stopat') o[k] = Number(v)
    else if (k === 'assignor' && v === 'default') continue
    else throw new Failure(`unknown option ${JSON.stringify(k)} (kafkajs has no range assignor nor static membership)`)
  }
  return o
}

async function run(o, result) {
  const kafka = new Kafka({
    clientId: o.clientId,
    brokers: [o.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 5000 },
  })
  const consumer = kafka.consumer({
    groupId: o.group,
    sessionTimeout: o.session,
    heartbeatInterval: 500,
    rebalanceTimeout: 30000,
    maxWaitTimeInMs: 500,
    retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 5000 },
  })
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const ps = [...(payload.memberAssignment[o.topic] || [])].sort((a, b) => a - b)
    emit({ event: 'assigned', partitions: ps, member_id: payload.memberId })
  })
  consumer.on(consumer.events.REBALANCING, ({ payload }) => emit({ event: 'rebalancing', member_id: payload.memberId }))
  // A crash kafkajs does not restart from ends the program.
  let crashError = null
  let crashed = e => {
    crashError = e
  }
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    emit({ event: 'error', error: String(payload.error), restart: payload.restart })
    if (!payload.restart) crashed(new Failure(`consumer crashed: ${payload.error}`))
  })

  let records = 0
  await consumer.connect()
  await consumer.subscribe({ topics: [o.topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
      let last = -1
      for (const m of batch.messages) {
        if (!isRunning() || isStale()) break
        const off = Number(m.offset)
        // Records at or past stopat are skipped unprocessed: resolved, so
        // that fetching moves on, but never committed.
        if (o.stopat < 0 || off < o.stopat) {
          records++
          emit({ event: 'record', p: batch.partition, o: off, k: m.key == null ? '' : m.key.toString() })
          last = off
        }
        resolveOffset(m.offset)
      }
      if (last < 0) return
      try {
        await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: String(last + 1) }])
        emit({ event: 'commit', offsets: { [String(batch.partition)]: last + 1 } })
      } catch (e) {
        emit({ event: 'commit_error', error: `${e.name}: ${e.message}` })
      }
    },
  })

  // A "close" line on stdin (or its end) asks for a clean close.
  await new Promise((resolve, reject) => {
    if (crashError) return reject(crashError)
    crashed = reject
    const timer = setTimeout(() => reject(new Failure(`no close request within ${MAX_LIFETIME_MS / 1000}s`)), MAX_LIFETIME_MS)
    const rl = readline.createInterface({ input: process.stdin })
    const done = () => {
      clearTimeout(timer)
      rl.close()
      resolve()
    }
    rl.on('line', line => {
      if (line.trim() === 'close') done()
    })
    rl.on('close', done)
  }).finally(() => consumer.disconnect()) // leaves the group
  result.records = records
}

async function main(argv) {
  const result = { client: CLIENT, mode: 'group', version: kafkajsPackage.version }
  const start = Date.now()
  try {
    await run(parse(argv), result)
    result.ok = true
  } catch (e) {
    result.ok = false
    result.error = `${e.name}: ${e.message}`
  }
  result.elapsed_ms = Date.now() - start
  emit(result)
  return result.ok ? 0 : 1
}

main(process.argv.slice(2)).then(code => process.exit(code), e => {
  emit({ client: CLIENT, ok: false, error: String(e) })
  process.exit(1)
})
