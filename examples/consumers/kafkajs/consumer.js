// A KafkaJS consumer with the client's defaults: eachMessage, auto-commit on (KafkaJS commits the
// resolved offsets after each fetched batch), one Postgres insert (node-postgres) per payment, with the
// worker and attempt that applied it. The only settings changed from KafkaJS's defaults are the ones
// a team must set: the clientId, fromBeginning (the run's payments are in the topic before the group
// starts) and the cluster's login.
//
// Build (pinned: package.json and package-lock.json), from the repository root:
//
//     (cd examples/consumers/kafkajs && npm ci)
//
// Run it under the harness:
//
//     harness run custom --worker-cmd "node examples/consumers/kafkajs/consumer.js" \
//         --expect at-least-once --kill-mode random --kills 10 --workers 2 --partitions 2 --messages 3000 --seed 1
//
// The clientId is HARNESS_CLIENT_ID, so the harness can tell which member is which process. The
// cluster's login is HARNESS_KAFKA_CONFIG: PLAINTEXT ({}) or SASL_PLAINTEXT with SCRAM-SHA-512 or
// SCRAM-SHA-256 (the harness's stacks); anything else is refused with one line. It reads
// HARNESS_POSTGRES_DSN_NO_REQUIRE_AUTH (node-postgres does not know require_auth).
'use strict'

const { Kafka, logLevel } = require('kafkajs')
const { Client } = require('pg')

const env = process.env

function fail (message) {
  process.stderr.write(`kafkajs example: ${message}\n`)
  process.exit(2)
}

// The cluster's login (HARNESS_KAFKA_CONFIG, librdkafka's names) in KafkaJS's terms.
function login () {
  let conf
  try {
    conf = JSON.parse(env.HARNESS_KAFKA_CONFIG || '{}')
  } catch (e) {
    fail('HARNESS_KAFKA_CONFIG is not JSON')
  }
  const known = ['security.protocol', 'sasl.mechanism', 'sasl.username', 'sasl.password']
  const unknown = Object.keys(conf).filter((k) => !known.includes(k)).sort()
  if (unknown.length) fail(`no mapping for Kafka settings ${unknown.join(', ')}`)
  const protocol = (conf['security.protocol'] || 'PLAINTEXT').toUpperCase()
  if (protocol === 'PLAINTEXT') return {}
  if (protocol !== 'SASL_PLAINTEXT') fail(`security.protocol ${protocol} is not supported`)
  const mechanism = (conf['sasl.mechanism'] || '').toLowerCase()
  if (!['scram-sha-512', 'scram-sha-256'].includes(mechanism)) fail(`sasl.mechanism ${mechanism} is not supported`)
  return { ssl: false, sasl: { mechanism, username: conf['sasl.username'], password: conf['sasl.password'] } }
}

async function main () {
  const worker = env.HARNESS_WORKER
  const attempt = Number.parseInt(env.HARNESS_ATTEMPT, 10)
  const insert = `insert into ${env.HARNESS_LEDGER_TABLE} (message_id, amount, worker, attempt) values ($1, $2, $3, $4)`
  const db = new Client({ connectionString: env.HARNESS_POSTGRES_DSN_NO_REQUIRE_AUTH })
  await db.connect()
  const kafka = new Kafka({
    clientId: env.HARNESS_CLIENT_ID,
    brokers: env.HARNESS_BOOTSTRAP_SERVERS.split(','),
    logLevel: logLevel.WARN,
    ...login()
  })
  const consumer = kafka.consumer({ groupId: env.HARNESS_GROUP_ID })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    await consumer.disconnect() // commits what was resolved, then leaves the group
    await db.end()
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  await consumer.connect()
  await consumer.subscribe({ topics: [env.HARNESS_INPUT_TOPIC], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ message }) => {
      const payment = JSON.parse(message.value.toString())
      await db.query(insert, [payment.id, payment.amount, worker, attempt])
    }
  })
}

main().catch((e) => fail(e.message))
