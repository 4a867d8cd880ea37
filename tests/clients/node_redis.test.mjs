// node-redis (npm `redis`) bloom commands, client.bf.*, against rustbloom in RESP2 and RESP3.
// Run: node --test node_redis.test.mjs (the Makefile's `clients` target does it).

import { test, describe, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createClient, RESP_TYPES } from 'redis';

const here = dirname(fileURLToPath(import.meta.url));
const modulePath = process.env.RUSTBLOOM_MODULE || join(here, '..', '..', 'target', 'release', 'librustbloom.so');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Server {
  async start() {
    if (!existsSync(modulePath)) throw new Error(`module not found at ${modulePath}: run make build`);
    this.dir = mkdtempSync(join(tmpdir(), 'rbnode'));
    this.port = await freePort();
    this.proc = spawn(process.env.RUSTBLOOM_SERVER || 'redis-server', [
      '--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir,
      '--logfile', 'redis.log', '--save', '', '--appendonly', 'no',
      '--loadmodule', realpathSync(modulePath),
    ], { cwd: this.dir, stdio: 'ignore' });
    this.exited = false;
    this.proc.on('exit', () => { this.exited = true; });
    const deadline = Date.now() + 30000;
    while (Date.now() < deadline) {
      if (this.exited) throw new Error('redis-server exited at start');
      const c = createClient({ url: this.url(), socket: { reconnectStrategy: false } });
      c.on('error', () => {});
      try {
        await c.connect();
        await c.ping();
        await c.quit();
        return;
      } catch {
        await sleep(50);
      }
    }
    throw new Error('redis-server did not come up');
  }

  url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  async stop() {
    if (this.proc && !this.exited) {
      const gone = new Promise((r) => this.proc.once('exit', r));
      try {
        const c = createClient({ url: this.url(), socket: { reconnectStrategy: false } });
        c.on('error', () => {});
        await c.connect();
        await c.sendCommand(['SHUTDOWN', 'NOSAVE']).catch(() => {});
      } catch { /* already down */ }
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 10000);
      await gone;
      clearTimeout(timer);
    }
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}

const server = new Server();
before(async () => { await server.start(); });
after(async () => { await server.stop(); });

for (const RESP of [2, 3]) {
  describe(`RESP${RESP}`, () => {
    let client;
    before(async () => {
      client = createClient({ url: server.url(), RESP });
      client.on('error', () => {});
      await client.connect();
      // Seed 0 for every filter these tests create (node-redis's reserve takes no SEED): with
      // random seeds a few items in a small filter read as present by chance now and then, and
      // the exact answers of the mAdd test failed about 9 times in a million per protocol.
      await client.sendCommand(['CONFIG', 'SET', 'bf.seed-mode', 'fixed']);
    });
    after(async () => { await client.quit(); });
    beforeEach(async () => { await client.flushAll(); });

    test('reserve, add, exists, card', async () => {
      assert.equal(await client.bf.reserve('k', 0.001, 1000), 'OK');
      assert.equal(await client.bf.add('k', 'a'), true);
      assert.equal(await client.bf.add('k', 'a'), false);
      assert.equal(await client.bf.exists('k', 'a'), true);
      assert.equal(await client.bf.exists('k', 'b'), false);
      assert.equal(await client.bf.exists('missing', 'a'), false);
      assert.equal(await client.bf.card('k'), 1);
      assert.equal(await client.bf.card('missing'), 0);
      await assert.rejects(client.bf.reserve('k', 0.01, 100), /^.*item exists/);
    });

    test('reserve options', async () => {
      await client.bf.reserve('x', 0.01, 100, { EXPANSION: 4 });
      await client.bf.reserve('ns', 0.01, 100, { NONSCALING: true });
      const ix = await client.bf.info('x');
      assert.equal(ix['Capacity'], 100);
      assert.equal(ix['Expansion rate'], 4);
      const ins = await client.bf.info('ns');
      assert.equal(ins['Expansion rate'], null);
    });

    test('mAdd, mExists, binary and empty items', async () => {
      assert.deepEqual(await client.bf.mAdd('m', ['a', 'b', '', 'a']), [true, true, true, false]);
      assert.deepEqual(await client.bf.mExists('m', ['a', '', 'zz']), [true, true, false]);
      assert.deepEqual(await client.bf.mExists('nokey', ['a', 'b']), [false, false]);
      assert.equal(await client.bf.add('m', Buffer.from([0, 255, 1])), true);
      assert.equal(await client.bf.exists('m', Buffer.from([0, 255, 1])), true);
      assert.equal(await client.bf.card('m'), 4);
    });

    test('insert', async () => {
      assert.deepEqual(
        await client.bf.insert('i', ['x', 'y', 'x'], { CAPACITY: 5000, ERROR: 0.001, EXPANSION: 3 }),
        [true, true, false]);
      const info = await client.bf.info('i');
      assert.equal(info['Capacity'], 5000);
      assert.equal(info['Expansion rate'], 3);
      assert.equal(info['Number of items inserted'], 2);
      assert.deepEqual(await client.bf.insert('i', 'z', { NOCREATE: true }), [true]);
      await assert.rejects(client.bf.insert('missing', ['a'], { NOCREATE: true }), /not found/);
      assert.equal(await client.exists('missing'), 0);
      assert.deepEqual(await client.bf.insert('n', ['a'], { CAPACITY: 10, NONSCALING: true }), [true]);
      assert.equal((await client.bf.info('n'))['Expansion rate'], null);
    });

    test('info', async () => {
      await client.bf.reserve('k', 0.01, 100);
      await client.bf.mAdd('k', Array.from({ length: 350 }, (_, i) => `item${i}`));
      const info = await client.bf.info('k');
      assert.equal(info['Capacity'], 700);
      assert.equal(info['Number of filters'], 3);
      assert.ok(info['Number of items inserted'] >= 340 && info['Number of items inserted'] <= 350);
      assert.equal(info['Number of items inserted'], await client.bf.card('k'));
      assert.ok(info['Size'] > 0);
      assert.equal(info['Expansion rate'], 2);
      // One field: a one-element array in RESP2, a one-entry map in RESP3 (RedisBloom 2.6+).
      const capacity = await client.sendCommand(['BF.INFO', 'k', 'CAPACITY']);
      if (RESP === 3) {
        assert.deepEqual({ ...capacity }, { Capacity: 700 });
      } else {
        assert.deepEqual(capacity, [700]);
      }
      await assert.rejects(client.bf.info('missing'), /not found/);
    });

    test('scanDump and loadChunk', async () => {
      const bin = client.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
      await client.bf.reserve('src', 0.001, 20000);
      const items = Array.from({ length: 30000 }, (_, i) => `u${i}`);
      for (let i = 0; i < items.length; i += 1000) await client.bf.mAdd('src', items.slice(i, i + 1000));
      let iterator = 0;
      let chunks = 0;
      for (;;) {
        const r = await bin.bf.scanDump('src', iterator);
        iterator = r.iterator;
        if (iterator === 0) break;
        assert.ok(Buffer.isBuffer(r.chunk));
        assert.equal(await client.bf.loadChunk('copy', iterator, r.chunk), 'OK');
        chunks++;
      }
      assert.ok(chunks >= 2);
      assert.deepEqual(await client.bf.info('copy'), await client.bf.info('src'));
      assert.ok((await client.bf.mExists('copy', items)).every((b) => b === true));
      await assert.rejects(client.bf.loadChunk('junk', 1, Buffer.from('nope')), /received bad data/);
      await assert.rejects(client.bf.scanDump('missing', 0), /not found/);
    });

    test('errors', async () => {
      await assert.rejects(client.bf.reserve('e', 1.5, 100), /error rate must be in the range/);
      await assert.rejects(client.bf.reserve('e', 0.01, 0), /capacity must be in the range/);
      await assert.rejects(client.bf.reserve('e', 0.01, 100, { EXPANSION: 2, NONSCALING: true }),
        /Nonscaling filters cannot expand/);
      assert.equal(await client.exists('e'), 0);
      await client.set('s', 'v');
      await assert.rejects(client.bf.add('s', 'a'), /^.*WRONGTYPE/);
    });

    test('non-scaling filter full', async () => {
      await client.bf.reserve('f', 0.01, 3, { NONSCALING: true });
      // An item may be a false positive of the full filter (answered 0), so add distinct items
      // until one needs room.
      await assert.rejects(async () => {
        for (let i = 0; i < 100; i++) await client.bf.add('f', `item-${i}`);
      }, /non scaling filter is full/);
      assert.equal(await client.bf.card('f'), 3);
      // BF.MADD carries the error inside its reply array, after any false positives.
      const names = Array.from({ length: 20 }, (_, i) => `more-${i}`);
      const reply = await client.sendCommand(['BF.MADD', 'f', ...names]).catch((e) => e);
      const err = Array.isArray(reply) ? reply[reply.length - 1] : reply;
      assert.match(String(err?.message ?? err), /non scaling filter is full/);
    });

    test('multi/pipeline', async () => {
      const res = await client.multi()
        .bf.reserve('p', 0.01, 1000)
        .bf.add('p', 'a')
        .bf.mAdd('p', ['a', 'b'])
        .bf.card('p')
        .exec();
      assert.deepEqual(res, ['OK', true, [false, true], 2]);
    });
  });
}
