// Loads N items (default 1,000,000) into a 16-partition filter on a fresh 3+3 cluster, with
// bfctl (`bfctl load`, its default batches: 1000 items per command, 16 commands per round trip)
// and with this package (madd of BATCH items at a time, default 16,000: the same per round
// trip), ROUNDS times (default 3) alternately, and prints the median rates in items/s:
// wall-clock time of the load only (reserve excluded).
//
// Usage: node clients/node/bench/load.js   env: N, BATCH, ROUNDS, RUSTBLOOM_SERVER, RUSTBLOOM_MODULE

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { PartitionedBloom } from '../src/index.js';
import { ROOT, clusterNodes, connect, serverBinary, stopAll } from '../test/servers.js';

const n = Number(process.env.N || 1_000_000);
const batch = Number(process.env.BATCH || 16_000);
const rounds = Number(process.env.ROUNDS || 3);
const partitions = 16;
const items = Array.from({ length: n }, (_, i) => createHash('sha1').update(String(i)).digest('hex').slice(0, 16));
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

try {
  const port = (await clusterNodes())[0].port;
  const bfctl = process.env.RUSTBLOOM_BFCTL || join(ROOT, 'target', 'release', 'bfctl');
  const env = { ...process.env, BFCTL_URL: `redis://127.0.0.1:${port}` };
  const input = items.join('\n') + '\n';
  const client = await connect('cluster');
  const bfctlSeconds = [];
  const nodeSeconds = [];
  // Alternating rounds, each into fresh filters, so that both meet the same machine load.
  for (let round = 0; round < rounds; round++) {
    spawnSync(bfctl, ['--quiet', 'reserve', `bench-bfctl-${round}`, '0.0000001', String(n), '--partitions', String(partitions)], { env });
    let start = process.hrtime.bigint();
    const done = spawnSync(bfctl, ['--quiet', 'load', `bench-bfctl-${round}`], { env, input, maxBuffer: 1 << 26 });
    bfctlSeconds.push(Number(process.hrtime.bigint() - start) / 1e9);
    if (done.status !== 0) throw new Error(`bfctl load failed: ${done.stderr}`);

    const bloom = new PartitionedBloom(client, `bench-node-${round}`);
    await bloom.reserve(0.0000001, n, partitions);
    start = process.hrtime.bigint();
    for (let s = 0; s < n; s += batch) await bloom.madd(items.slice(s, s + batch));
    nodeSeconds.push(Number(process.hrtime.bigint() - start) / 1e9);
    console.log(`round ${round + 1}: bfctl ${bfctlSeconds.at(-1).toFixed(3)} s, node ${nodeSeconds.at(-1).toFixed(3)} s`);
  }
  await client.close();
  const b = median(bfctlSeconds);
  const p = median(nodeSeconds);
  console.log(`items ${n}, partitions ${partitions}, 3+3 cluster on ${serverBinary()}, median of ${rounds} rounds`);
  console.log(`bfctl load: ${b.toFixed(3)} s, ${Math.round(n / b)} items/s`);
  console.log(`node madd (batches of ${batch}): ${p.toFixed(3)} s, ${Math.round(n / p)} items/s = ${(b / p).toFixed(2)}x bfctl`);
} finally {
  await stopAll();
}
