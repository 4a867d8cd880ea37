// bfctl (target/release/bfctl, or $RUSTBLOOM_BFCTL) and the Python package (in the interpreter
// $RUSTBLOOM_PYTHON, default target/python-client/venv/bin/python) share partitioned filters with
// this package: what one writes the others read.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PartitionedBloom, partitionKeys } from '../src/index.js';
import { ROOT, connect, portOf, stopAll } from './servers.js';

after(stopAll);

// Reserves (argv "write") or looks up (argv "read") items read from stdin, one per line, with the
// Python package; prints 1 or 0 per item for a lookup.
const PYTHON_PEER = `
import sys, redis
from redis.cluster import RedisCluster
from rustbloom import PartitionedBloom
mode, port, cluster, name = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
client = (RedisCluster if cluster else redis.Redis)(host="127.0.0.1", port=port)
items = sys.stdin.buffer.read().split(b"\\n")[:-1]
bloom = PartitionedBloom(client, name)
if mode == "write":
    bloom.reserve(0.01, len(items), partitions=6)
    bloom.madd(items)
else:
    sys.stdout.write("".join("1\\n" if a else "0\\n" for a in bloom.mexists(items)))
`;

let names = 0;
const freshName = (prefix) => `node-${prefix}:${process.pid}:${names++}`;
const items = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}:${i}`);
const lines = (list) => list.map((i) => `${i}\n`).join('');
const answerLines = (answers) => lines(answers.map((a) => (a ? '1' : '0')));

function run(binary, args, input, env = {}) {
  assert.ok(existsSync(binary), `${binary} not found`);
  const done = spawnSync(binary, args, { input, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 300_000, maxBuffer: 1 << 28 });
  assert.equal(done.status, 0, done.stderr);
  return done.stdout;
}

async function bfctl(target, args, input = '') {
  const binary = process.env.RUSTBLOOM_BFCTL || join(ROOT, 'target', 'release', 'bfctl');
  return run(binary, ['--quiet', ...args], input, { BFCTL_URL: `redis://127.0.0.1:${await portOf(target)}` });
}

async function python(target, mode, name, list) {
  const binary = process.env.RUSTBLOOM_PYTHON || join(ROOT, 'target', 'python-client', 'venv', 'bin', 'python');
  return run(binary, ['-c', PYTHON_PEER, mode, String(await portOf(target)), target === 'cluster' ? '1' : '0', name], lines(list));
}

for (const target of ['single', 'cluster']) {
  describe(`on ${target === 'single' ? 'one server' : 'a 3+3 cluster'}`, () => {
    let client;
    before(async () => { client = await connect(target); });
    after(async () => { await client?.close(); });

    test('bfctl writes, this package reads', async () => {
      const name = freshName('bfctl-writes');
      const members = items('from-bfctl', 3000);
      await bfctl(target, ['reserve', name, '0.01', '3000', '--partitions', '6']);
      await bfctl(target, ['load', name], lines(members));
      const bloom = new PartitionedBloom(client, name);
      const info = await bloom.info();
      assert.equal(info.Partitions, 6);
      assert.deepEqual(info['Partition keys'], partitionKeys(name, 6));
      assert.ok((await bloom.mexists(members)).every(Boolean));
      assert.ok((await bloom.mexists(items('never', 3000))).filter(Boolean).length < 3000 * 0.02);
    });

    test('this package writes, bfctl reads', async () => {
      const name = freshName('node-writes');
      const bloom = new PartitionedBloom(client, name);
      await bloom.reserve(0.01, 3000, 6);
      const members = items('from-node', 3000);
      await bloom.madd(members);
      const probes = [...members, ...items('never', 3000)];
      const answers = await bfctl(target, ['exists', name], lines(probes));
      // bfctl prints 1 or 0 per input line, in order: the same answers as this package's.
      assert.equal(answers, answerLines(await bloom.mexists(probes)));
      assert.equal(answers.slice(0, 6000), '1\n'.repeat(3000));
    });

    test('Python writes, this package reads', async () => {
      const name = freshName('python-writes');
      const members = items('from-python', 3000);
      await python(target, 'write', name, members);
      const bloom = new PartitionedBloom(client, name);
      assert.equal((await bloom.layout()).partitions, 6);
      assert.ok((await bloom.mexists(members)).every(Boolean));
      assert.ok((await bloom.mexists(items('never', 3000))).filter(Boolean).length < 3000 * 0.02);
    });

    test('this package writes, Python reads', async () => {
      const name = freshName('node-writes-py');
      const bloom = new PartitionedBloom(client, name);
      await bloom.reserve(0.01, 3000, 6);
      const members = items('from-node', 3000);
      await bloom.madd(members);
      const probes = [...members, ...items('never', 3000)];
      const answers = await python(target, 'read', name, probes);
      assert.equal(answers, answerLines(await bloom.mexists(probes)));
      assert.equal(answers.slice(0, 6000), '1\n'.repeat(3000));
    });
  });
}
