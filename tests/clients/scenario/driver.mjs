// The scenario's driver for the Node package (clients/node): reads one JSON request a line on
// stdin, runs it with PartitionedBloom over node-redis' createCluster, and writes one JSON
// answer a line on stdout (the protocol is described in test_scenario.py).
//
// Usage: node driver.mjs PORT (any node of the cluster).

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { PartitionedBloom, PartitionedBloomError } from '../../../clients/node/src/index.js';

// node-redis as the package resolves it, so that the client and the package share one copy of
// it: clients/node/node_modules, or $RUSTBLOOM_NODE_REDIS/node_modules when the package runs on
// another node-redis (clients/node/test/node-redis-from.js, preloaded, points it there).
const redisFrom = process.env.RUSTBLOOM_NODE_REDIS
  ? pathToFileURL(join(process.env.RUSTBLOOM_NODE_REDIS, 'package.json'))
  : new URL('../../../clients/node/package.json', import.meta.url);
const { createCluster } = await import(pathToFileURL(createRequire(redisFrom).resolve('redis')).href);

/** The item a request describes, as a Node user would pass it. */
function item(spec) {
  const [[kind, value]] = Object.entries(spec);
  switch (kind) {
    case 'text': return value;
    case 'hex': return Buffer.from(value, 'hex');
    case 'float': case 'bool': return value;
    case 'null': return null;
    default: throw new Error(`unknown item kind ${kind}`);
  }
}

/**
 * The contract's class name: FilterNotFound, PartitionMissing, Descriptor, NodeUnavailable,
 * Server (the package's *Error classes without the suffix), or TypeError; any other error by its
 * own name (a difference the scenario shows).
 */
function failure(e) {
  const name = e instanceof PartitionedBloomError ? e.name.replace(/Error$/, '') : (e?.name ?? typeof e);
  return { error: { class: name, message: String(e?.message ?? e) } };
}

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (answer) => process.stdout.write(`${JSON.stringify(answer)}\n`);

/**
 * Adds `count` items `prefix<i>` in batches; after `pause_after` batches says how many were
 * acknowledged and waits for the go-ahead. Answers how many were acknowledged in all.
 */
async function load(bloom, request) {
  let acknowledged = 0;
  for (let start = 0, batch = 0; start < request.count; start += request.batch, batch += 1) {
    if (batch === request.pause_after) {
      say({ paused: acknowledged });
      await lines.next();
    }
    const end = Math.min(start + request.batch, request.count);
    const items = Array.from({ length: end - start }, (_, i) => `${request.prefix}${start + i}`);
    try {
      await bloom.madd(items);
    } catch (e) {
      return { ...failure(e), acknowledged };
    }
    acknowledged += end - start;
  }
  return { ok: { acknowledged } };
}

async function run(client, request) {
  const retryForMs = Math.round((request.retry_for ?? 30) * 1000);
  const bloom = new PartitionedBloom(client, request.name, { retryForMs });
  switch (request.op) {
    case 'reserve':
      await bloom.reserve(request.error_rate, request.capacity, request.partitions);
      return { ok: null };
    case 'add': return { ok: await bloom.madd(request.items.map(item)) };
    case 'exists': return { ok: await bloom.mexists(request.items.map(item)) };
    case 'drop': return { ok: await bloom.drop() };
    case 'load': return load(bloom, request);
    default: throw new Error(`unknown op ${request.op}`);
  }
}

const client = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${process.argv[2]}` }] });
client.on('error', () => {});
await client.connect();
try {
  for (;;) {
    const { value: line, done } = await lines.next();
    if (done) break;
    let answer;
    try {
      answer = await run(client, JSON.parse(line));
    } catch (e) {
      answer = failure(e);
    }
    say(answer);
  }
} finally {
  client.destroy();
}
