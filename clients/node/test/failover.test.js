// The clients' bounded wait (docs/partitions.md, "One contract"): a load in progress when a
// master dies goes on once its replica took over (node-redis 6), or fails with
// NodeUnavailableError by its deadline (node-redis 5 keeps a command for a dead master queued
// until that node returns); every item acknowledged is there afterwards; where no node serves a
// partition any more (its replica gone, its master hung) the call fails with NodeUnavailableError
// by its deadline; never a hang. make client-tests runs this file on both majors. Each test has a
// cluster of its own.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createCluster } from 'redis';
import { NodeUnavailableError, PartitionedBloom } from '../src/index.js';
import { NODE_REDIS_MAJOR, ask, startCluster, waitReplicaCaughtUp, waitReplicasSynced } from './servers.js';

const range = (n, f) => Array.from({ length: n }, (_, i) => f(i));

/** A cluster client that starts from every node, as users configure one. */
async function clientOf(nodes) {
  const client = createCluster({ rootNodes: nodes.map((n) => ({ url: n.url() })) });
  client.on('error', () => {});
  return client.connect();
}

/** A master (not the first node) and its replica. */
async function masterAndReplica(client, nodes) {
  const master = nodes.find((n) => n.port === client.masters.find((m) => m.port !== nodes[0].port).port);
  for (const n of nodes) {
    const info = await ask(n, ['INFO', 'replication']);
    if (info.includes('role:slave') && info.includes(`master_port:${master.port}`)) return [master, n];
  }
  return [master, null];
}

test(`a load through a master's failover goes on, or fails by its deadline, never hangs (node-redis ${NODE_REDIS_MAJOR})`, { timeout: 120_000 }, async () => {
  const nodes = await startCluster();
  const client = await clientOf(nodes);
  try {
    const retryForMs = 10_000;
    const bloom = new PartitionedBloom(client, 'failover', { retryForMs });
    await bloom.reserve(0.001, 200_000, 6);
    await waitReplicasSynced(nodes);
    const [victim] = await masterAndReplica(client, nodes);
    const items = range(60_000, (i) => `f:${i}`);
    const acknowledged = [];
    let failedAt = null;
    let failure = null;
    for (let start = 0; start < items.length && failure === null; start += 1000) {
      if (start === 6000) {
        // A tenth of the way in, once the replica has every write acknowledged so far (losing
        // those, replication being asynchronous, would be the server's doing, not the client's).
        await waitReplicaCaughtUp(victim);
        victim.kill();
      }
      const chunk = items.slice(start, start + 1000);
      const started = Date.now();
      try {
        await bloom.madd(chunk);
        acknowledged.push(...chunk);
      } catch (e) {
        [failedAt, failure] = [Date.now() - started, e];
      }
    }
    if (NODE_REDIS_MAJOR >= 6) {
      // node-redis 6 follows the failover: the load completes.
      assert.equal(failure, null);
      assert.equal(acknowledged.length, items.length);
    } else {
      // node-redis 5 keeps the dead master's commands queued until it returns: the client gives
      // up at its deadline with NodeUnavailableError (it used to wait for minutes).
      assert.ok(failure instanceof NodeUnavailableError, String(failure));
      assert.ok(failedAt >= retryForMs && failedAt < retryForMs + 10_000, `${failedAt} ms`);
    }
    // Every item acknowledged is there, read by a client that starts afresh.
    const reader = await clientOf(nodes);
    try {
      const found = await new PartitionedBloom(reader, 'failover').mexists(acknowledged);
      assert.equal(found.filter((f) => !f).length, 0, 'acknowledged items missing after the failover');
    } finally {
      reader.destroy();
    }
  } finally {
    client.destroy();
    for (const n of nodes) n.stop();
  }
});

// The master hangs rather than dies (its connections stay open, unanswered), the harder case: only
// the package's bound on each attempt keeps the deadline.
test(`a partition no node serves (replica gone, master hung) fails by the deadline, never hangs (node-redis ${NODE_REDIS_MAJOR})`, { timeout: 120_000 }, async () => {
  const nodes = await startCluster();
  const client = await clientOf(nodes);
  try {
    const bloom = new PartitionedBloom(client, 'orphaned', { retryForMs: 3000 });
    await bloom.reserve(0.01, 10_000, 6);
    await waitReplicasSynced(nodes);
    const [master, replica] = await masterAndReplica(client, nodes);
    assert.ok(replica, 'no replica found for the master');
    replica.kill();
    master.hang();
    const started = Date.now();
    await assert.rejects(bloom.madd(range(2000, (i) => `after:${i}`)), NodeUnavailableError);
    const took = Date.now() - started;
    assert.ok(took >= 3000 && took < 30_000, `${took} ms`);
  } finally {
    client.destroy();
    for (const n of nodes) n.stop();
  }
});
