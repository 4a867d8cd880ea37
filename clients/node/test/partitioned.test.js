// PartitionedBloom against a real server and a real 3+3 cluster, each with the module: every
// test runs on both.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DescriptorError, FilterNotFoundError, NodeUnavailableError, PartitionMissingError, PartitionedBloom,
  ServerError, keySlot, partitionKeys,
} from '../src/index.js';
import { clusterNodes, connect, freePort, stopAll } from './servers.js';

after(stopAll);

let names = 0;
const freshName = (prefix) => `node-${prefix}:${process.pid}:${names++}`;
const range = (n, f) => Array.from({ length: n }, (_, i) => f(i));

/** BF.INFO of a key as a Map (RESP2 flat array or RESP3 map). */
async function infoOf(client, key) {
  const reply = await send(client, key, ['BF.INFO', key]);
  if (reply instanceof Map) return reply;
  if (!Array.isArray(reply)) return new Map(Object.entries(reply));
  const fields = new Map();
  for (let i = 0; i < reply.length; i += 2) fields.set(String(reply[i]), reply[i + 1]);
  return fields;
}

function send(client, key, args) {
  return Array.isArray(client.masters) ? client.sendCommand(key, false, args) : client.sendCommand(args);
}

/** The address of the master that holds key, from CLUSTER SLOTS. */
async function masterOf(client, key) {
  const slot = keySlot(key);
  const ranges = await send(client, undefined, ['CLUSTER', 'SLOTS']);
  const [, , [host, port]] = ranges.find(([start, end]) => slot >= start && slot <= end);
  return `${host}:${port}`;
}

for (const target of ['single', 'cluster']) {
  describe(`on ${target === 'single' ? 'one server' : 'a 3+3 cluster'}`, () => {
    let client;
    before(async () => { client = await connect(target); });
    after(async () => { await client?.close(); });

    test('reserve writes the descriptor and the partitions, two per master', async () => {
      const name = freshName('reserve');
      const layout = await new PartitionedBloom(client, name).reserve(0.01, 60_000, 6);
      assert.deepEqual(layout.keys, partitionKeys(name, 6));
      // Another client discovers the same layout in one BF.INFO.
      const info = await new PartitionedBloom(client, name).info();
      assert.equal(info.Partitions, 6);
      assert.equal(info['Routing seed'], layout.routingSeed);
      assert.equal(info.Capacity, 60_000);
      assert.equal(info['Partition capacity'], 10_000);
      assert.equal(info['Error rate'], 0.01);
      assert.equal(info['Expansion rate'], 2);
      assert.equal(info['Window (ms)'], null);
      const perNode = new Map();
      for (const [i, key] of layout.keys.entries()) {
        const part = await infoOf(client, key);
        assert.equal(part.get('Partition'), i);
        assert.equal(part.get('Partitions'), 6);
        assert.equal(BigInt(String(part.get('Routing seed'))), layout.routingSeed);
        const node = target === 'single' ? 'single' : await masterOf(client, key);
        perNode.set(node, (perNode.get(node) ?? 0) + 1);
      }
      assert.deepEqual([...perNode.values()].sort(), target === 'single' ? [6] : [2, 2, 2]);
    });

    test('NONSCALING partitions are sized with a margin', async () => {
      const name = freshName('nonscaling');
      await new PartitionedBloom(client, name).reserve(0.001, 60_000, 6, { nonscaling: true });
      const info = await new PartitionedBloom(client, name).info();
      assert.equal(info['Partition capacity'], 10_549);
      assert.equal(info['Expansion rate'], null);
      assert.equal((await infoOf(client, info['Partition keys'][0])).get('Capacity'), 10_549);
    });

    test('reserve refuses a taken name and leaves nothing behind', async () => {
      const name = freshName('taken');
      const bloom = new PartitionedBloom(client, name);
      await bloom.reserve(0.01, 1000, 4);
      await bloom.madd(['kept']);
      await assert.rejects(new PartitionedBloom(client, name).reserve(0.01, 1000, 4),
        (e) => e instanceof ServerError && e.message === 'item exists');
      assert.equal(await bloom.exists('kept'), true);

      const other = freshName('blocked');
      const keys = partitionKeys(other, 4);
      await send(client, keys[2], ['SET', keys[2], 'in the way']);
      await assert.rejects(new PartitionedBloom(client, other).reserve(0.01, 1000, 4),
        (e) => e instanceof ServerError && /WRONGTYPE/.test(e.message));
      const left = [];
      for (const key of [...keys, Buffer.from(other)]) left.push(await send(client, key, ['EXISTS', key]));
      assert.deepEqual(left, [0, 0, 1, 0, 0]);
    });

    test('30,000 items all present, false positives within the error rate', async () => {
      const n = 30_000;
      const bloom = new PartitionedBloom(client, freshName('load'));
      await bloom.reserve(0.01, n, 6, { nonscaling: true });
      const members = range(n, (i) => `member:${i}`);
      const added = [];
      for (let s = 0; s < n; s += 10_000) added.push(...(await bloom.madd(members.slice(s, s + 10_000))));
      assert.equal(added.length, n);
      const fresh = added.filter(Boolean).length;
      // An add answers false only for a false positive, at most about 1% of them.
      assert.ok(fresh >= n * 0.99, String(fresh));
      // Every partition received its share, and the items it counts are the adds answered true.
      const counts = [];
      for (const key of await bloom.partitionKeys()) counts.push((await infoOf(client, key)).get('Number of items inserted'));
      assert.equal(counts.reduce((a, b) => a + b), fresh);
      assert.ok(Math.min(...counts) > (n / 6) * 0.9 && Math.max(...counts) < (n / 6) * 1.1, String(counts));
      assert.ok((await bloom.mexists(members)).every(Boolean));
      // 120,000 trials at 1%: mean <= 1,200, sd ~ 35.
      const positives = (await bloom.mexists(range(4 * n, (i) => `other:${i}`))).filter(Boolean).length;
      assert.ok(positives <= 0.011 * 4 * n, String(positives));
    });

    test('answers keep the order of the items; strings and Buffers', async () => {
      const bloom = new PartitionedBloom(client, freshName('order'));
      await bloom.reserve(0.001, 10_000, 8);
      assert.deepEqual(await bloom.madd(['a', Buffer.from('b'), '17', 'a', Buffer.from([0, 255]), '']),
        [true, true, true, false, true, true]);
      assert.equal(await bloom.add('c'), true);
      assert.equal(await bloom.add('c'), false);
      assert.equal(await bloom.exists(Buffer.from('17')), true);
      assert.deepEqual(await bloom.mexists([Buffer.from([0, 255]), 'absent-1', Buffer.from('a'), 'absent-2', 'b', 'c', '']),
        [true, false, true, false, true, true, true]);
      assert.deepEqual(await bloom.mexists([]), []);
      // The clients' one contract (docs/partitions.md): never coerced.
      for (const [bad, type] of [[17, 'int'], [1.5, 'float'], [true, 'bool'], [null, 'null'], [17n, 'int']]) {
        await assert.rejects(bloom.mexists([bad]), { name: 'TypeError', message: `an item must be bytes or a string, not ${type}` });
        await assert.rejects(bloom.madd(['before', bad]), TypeError);
      }
      assert.deepEqual(await bloom.mexists(['before']), [false]);
      // A bad item anywhere in a batch adds nothing of it.
      const batch = [...range(20_000, (i) => `before-bad:${i}`), { not: 'an item' }];
      await assert.rejects(bloom.madd(batch), TypeError);
      assert.deepEqual(await bloom.mexists(batch.slice(0, 20_000)), new Array(20_000).fill(false));
      await assert.rejects(bloom.mexists('not an array'), TypeError);
    });

    test('a RESP3 client reads and writes the same filter', async () => {
      const name = freshName('resp3');
      await new PartitionedBloom(client, name).reserve(0.01, 1000, 3);
      const resp3 = await connect(target, target === 'single' ? { RESP: 3 } : { RESP: 3, defaults: { RESP: 3 } });
      try {
        const bloom = new PartitionedBloom(resp3, name);
        assert.deepEqual(await bloom.madd(['x', 'y', 'x']), [true, true, false]);
        assert.deepEqual(await new PartitionedBloom(client, name).mexists(['y', 'x', 'z']), [true, true, false]);
        assert.deepEqual((await bloom.info())['Partition keys'], partitionKeys(name, 3));
      } finally {
        await resp3.close();
      }
    });

    test('a misrouted item is refused by the server, the whole command', async () => {
      const bloom = new PartitionedBloom(client, freshName('misrouted'));
      await bloom.reserve(0.01, 1000, 4);
      const keys = await bloom.partitionKeys();
      const right = await bloom.partitionOf('somewhere');
      const wrong = (right + 1) % 4;
      await assert.rejects(send(client, keys[wrong], ['BF.ADD', keys[wrong], 'somewhere']),
        { message: `ERR item routed to partition ${right} of 4, not ${wrong}` });
      let belongs = null;
      for (let i = 0; belongs === null; i++) if ((await bloom.partitionOf(`own:${i}`)) === wrong) belongs = `own:${i}`;
      await assert.rejects(send(client, keys[wrong], ['BF.MADD', keys[wrong], belongs, 'somewhere']), /item routed to partition/);
      assert.deepEqual(await bloom.mexists(['somewhere', belongs]), [false, false]);
    });

    test('the logical name refuses item commands', async () => {
      const name = freshName('logical');
      await new PartitionedBloom(client, name).reserve(0.01, 1000, 4);
      await assert.rejects(send(client, name, ['BF.ADD', name, 'x']), /is a partitioned filter/);
      await assert.rejects(send(client, name, ['BF.EXISTS', name, 'x']), /is a partitioned filter/);
    });

    test('a deleted partition is an error, never "absent", and adds do not recreate it', async () => {
      const bloom = new PartitionedBloom(client, freshName('deleted'));
      await bloom.reserve(0.01, 1000, 4);
      const items = range(200, (i) => `item:${i}`);
      await bloom.madd(items);
      const gone = 1;
      const goneKey = (await bloom.partitionKeys())[gone];
      await send(client, goneKey, ['DEL', goneKey]);
      const inGone = [];
      const elsewhere = [];
      for (const item of items) ((await bloom.partitionOf(item)) === gone ? inGone : elsewhere).push(item);
      assert.ok(inGone.length > 0);
      const missing = (e) => e instanceof PartitionMissingError && e.index === gone;
      await assert.rejects(bloom.exists(inGone[0]), missing);
      await assert.rejects(bloom.mexists(items), missing);
      await assert.rejects(bloom.add(inGone[0]), missing);
      assert.equal(await send(client, goneKey, ['EXISTS', goneKey]), 0);
      assert.ok((await bloom.mexists(elsewhere)).every(Boolean));
      // An add names what the other partitions took (the clients' one contract); a lookup does not.
      const later = range(200, (i) => `later:${i}`);
      let laterElsewhere = 0;
      for (const item of later) if ((await bloom.partitionOf(item)) !== gone) laterElsewhere += 1;
      await assert.rejects(bloom.madd(later), (e) => missing(e) && e.acknowledged === laterElsewhere
        && e.message.endsWith(`; ${laterElsewhere} items of this call had been acknowledged`));
      await assert.rejects(bloom.mexists(later), (e) => missing(e) && e.acknowledged === undefined
        && e.message === `partition ${gone} of ${JSON.stringify(bloom.name.toString())} is missing (key ${JSON.stringify(goneKey.toString())}): restore it or recreate the filter`);
    });

    test('a missing filter, a plain filter, and insert', async () => {
      const name = freshName('insert');
      await assert.rejects(new PartitionedBloom(client, name).exists('x'), FilterNotFoundError);
      await assert.rejects(new PartitionedBloom(client, name).insert(['x'], { nocreate: true }), FilterNotFoundError);
      await assert.rejects(new PartitionedBloom(client, name).insert(['x']), RangeError);
      assert.deepEqual(await new PartitionedBloom(client, name).insert(['x', 'y'], { errorRate: 0.001, capacity: 500, partitions: 4 }), [true, true]);
      const info = await new PartitionedBloom(client, name).info();
      assert.deepEqual([info.Partitions, info.Capacity, info['Error rate']], [4, 500, 0.001]);
      // The filter is there already: the creation options are not used again.
      assert.deepEqual(await new PartitionedBloom(client, name).insert(['y', 'z'], { partitions: 9 }), [false, true]);

      const plain = freshName('plain');
      await send(client, plain, ['BF.RESERVE', plain, '0.01', '100']);
      await assert.rejects(new PartitionedBloom(client, plain).exists('x'),
        (e) => e instanceof DescriptorError && /not a partitioned filter/.test(e.message));
    });

    test('a full NONSCALING partition is an error with the server\'s text', async () => {
      const bloom = new PartitionedBloom(client, freshName('full'));
      await bloom.reserve(0.01, 5, 1, { nonscaling: true });
      await assert.rejects(bloom.madd(range(100, (i) => `item:${i}`)),
        (e) => e instanceof ServerError && e.message === 'non scaling filter is full');
    });

    test('drop deletes the descriptor and every partition', async () => {
      const name = freshName('drop');
      const bloom = new PartitionedBloom(client, name);
      const { keys } = await bloom.reserve(0.01, 1000, 5);
      await bloom.madd(['a', 'b']);
      assert.equal(await bloom.drop(), 6);
      for (const key of [Buffer.from(name), ...keys]) assert.equal(await send(client, key, ['EXISTS', key]), 0);
      await assert.rejects(bloom.exists('a'), FilterNotFoundError);
    });

    test('a batch whose reply is lost is resent for adds and lookups, never for reserve', async () => {
      const bloom = new PartitionedBloom(client, freshName('lost'));
      await bloom.reserve(0.01, 1000, 6);
      const items = range(300, (i) => `item:${i}`);
      // The server runs the first `count` commands named `command`, but their replies never
      // arrive, as when a connection drops.
      const lossy = (command, count) => new Proxy(client, {
        get(real, prop) {
          if (prop !== 'sendCommand') return Reflect.get(real, prop);
          return async (...args) => {
            const reply = await real.sendCommand(...args);
            if (args.flat().some((a) => String(a) === command) && count-- > 0) throw new Error('Socket closed unexpectedly');
            return reply;
          };
        },
      });
      const added = await new PartitionedBloom(lossy('BF.INSERT', 2), bloom.name).madd(items);
      assert.equal(added.length, 300);
      // Each item is in once: the resent commands' items answer "already there", never twice counted.
      let cards = 0;
      for (const key of await bloom.partitionKeys()) cards += Number(await send(client, key, ['BF.CARD', key]));
      assert.ok(cards >= 297 && cards <= 300, String(cards));
      // The two resent commands' items were answered "already there".
      assert.ok(added.filter((a) => !a).length >= 2, String(added.filter((a) => !a).length));
      assert.ok((await new PartitionedBloom(lossy('BF.MEXISTS', 2), bloom.name).mexists(items)).every(Boolean));
      assert.deepEqual(await bloom.mexists(range(50, (i) => `never:${i}`)), new Array(50).fill(false));
      await assert.rejects(new PartitionedBloom(lossy('BF.RESERVE', 1), freshName('lost-reserve')).reserve(0.01, 1000, 6),
        (e) => e instanceof NodeUnavailableError && /not resent/.test(e.message));
    });
  });
}

test('an unreachable master is an error, never "absent"', async () => {
  const client = await connect('cluster');
  const name = freshName('unreachable');
  try {
    await new PartitionedBloom(client, name).reserve(0.01, 1000, 6);
    const first = await masterOf(client, partitionKeys(name, 6)[0]);
    const dead = await freePort(false);
    const nodes = await clusterNodes();
    // Connections to the master of partition 0 go to a port where nothing listens.
    const blind = await connect('cluster', {
      rootNodes: [{ url: nodes.find((n) => `127.0.0.1:${n.port}` !== first).url() }],
      nodeAddressMap: (address) => {
        const [host, port] = address.split(':');
        return { host, port: address === first ? dead : Number(port) };
      },
      minimizeConnections: true,
      defaults: { socket: { connectTimeout: 500, reconnectStrategy: false } },
    });
    try {
      const bloom = new PartitionedBloom(blind, name, { retryForMs: 300 });
      const items = range(100, (i) => `item:${i}`);
      await assert.rejects(bloom.mexists(items), (e) => e instanceof NodeUnavailableError && /gave up resending/.test(e.message));
      await assert.rejects(bloom.madd(items), NodeUnavailableError);
    } finally {
      try {
        blind.destroy();
      } catch {
        // node-redis throws for the node client that never connected; the others are closed.
      }
    }
  } finally {
    await client.close();
  }
});
