// Compiled by `npm run typecheck` (tsc --noEmit) against node-redis 5, and by make client-tests
// against node-redis 6 too (test/node-redis-6/tsconfig.json), never run: the declarations in
// src/index.d.ts must accept the package's documented use on both and refuse what the code refuses.

import { createClient, createCluster } from 'redis';
import { PartitionMissingError, PartitionedBloom, partitionKeys, type Layout } from 'rustbloom';

export async function documentedUse(): Promise<void> {
  const cluster = await createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:7000' }] }).connect();
  const clicks = new PartitionedBloom(cluster, 'clicks', { retryForMs: 5000 });
  const layout: Layout = await clicks.reserve(1e-9, 1_000_000_000, 16, { nonscaling: true });
  const added: boolean[] = await clicks.madd(['click-1', Buffer.from('click-2'), new Uint8Array([3])]);
  const seen: boolean = await clicks.exists('click-1');
  await clicks.insert(['x'], { errorRate: 0.001, capacity: 1000, partitions: 16 });
  const single = await createClient({ url: 'redis://127.0.0.1:6379' }).connect();
  const keys: Buffer[] = partitionKeys('clicks', 16);
  try {
    await new PartitionedBloom(single, Buffer.from('clicks')).mexists(['a']);
  } catch (e) {
    if (e instanceof PartitionMissingError) console.log(e.index, e.key, layout.routingSeed, added, seen, keys);
  }
  // @ts-expect-error: an object is not an item
  await clicks.add({ not: 'an item' });
  // @ts-expect-error: nor is a number (the clients' one contract: never coerced)
  await clicks.add(1.5);
  // @ts-expect-error: the options are named
  await clicks.reserve(0.01, 100, 4, true);
  // Any protocol: node-redis 6 answers in RESP3 by default, 5 in RESP2.
  await new PartitionedBloom(await createClient({ RESP: 3 }).connect(), 'resp3').exists('x');
  await new PartitionedBloom(await createCluster({ rootNodes: [], RESP: 2 }).connect(), 'resp2').exists('x');
  // @ts-expect-error: not a node-redis client
  new PartitionedBloom({ masters: [] }, 'clicks');
}
