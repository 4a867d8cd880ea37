// The servers of the tests: one server, and a cluster of 3 masters + 3 replicas, each with the
// rustbloom module loaded, on free ports and in temporary directories of their own; stopped by
// stopAll() (each test file's `after`) and, whatever happens, when the process exits.
//
// The server binary is $RUSTBLOOM_SERVER (default: redis-server), the module $RUSTBLOOM_MODULE
// (default: target/release/librustbloom.so of this repository).

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createClient, createCluster } from 'redis';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
// The cluster bus listens on port + 10000, which must stay below 65536.
const MAX_NODE_PORT = 55535;
const START_DEADLINE_MS = 30_000;
const CLUSTER_DEADLINE_MS = 60_000;

/**
 * The major version of the node-redis these tests run on: the lockfile's (5), or the one
 * test/node-redis-from.js points `redis` at (make client-tests runs the cluster tests on 6 too).
 */
export const NODE_REDIS_MAJOR = (() => {
  const entry = fileURLToPath(import.meta.resolve('redis'));
  const dir = entry.slice(0, entry.lastIndexOf('/node_modules/redis/') + '/node_modules/redis/'.length);
  return Number(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version.split('.')[0]);
})();

const running = new Set();
process.on('exit', () => {
  for (const node of running) node.kill();
});

export function serverBinary() {
  return process.env.RUSTBLOOM_SERVER || 'redis-server';
}

function modulePath() {
  const path = process.env.RUSTBLOOM_MODULE || join(ROOT, 'target', 'release', 'librustbloom.so');
  if (!existsSync(path)) throw new Error(`module not found at ${path}: run \`make build\` or set RUSTBLOOM_MODULE`);
  return realpathSync(path);
}

function bindable(port) {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(null));
    s.listen(port, '127.0.0.1', () => {
      const bound = s.address().port;
      s.close(() => resolve(bound));
    });
  });
}

/** A free loopback port; for a cluster node one <= 55535 whose bus port (+10000) is free. */
export async function freePort(clusterBus) {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = await bindable(0);
    if (!clusterBus) return port;
    if (port <= MAX_NODE_PORT && (await bindable(port + 10000)) !== null) return port;
  }
  throw new Error('no free port pair (p, p + 10000) on loopback');
}

/** One server process in its own temporary directory. */
class Node {
  static async start(cluster) {
    const node = new Node();
    node.dir = mkdtempSync(join(tmpdir(), 'rbnode-'));
    running.add(node);
    for (let attempt = 0; attempt < 8; attempt++) {
      node.port = await freePort(cluster);
      node.spawn(cluster);
      if (await node.waitPing()) return node;
      node.kill();
    }
    node.stop();
    throw new Error(`${serverBinary()} did not start`);
  }

  spawn(cluster) {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir,
      '--logfile', 'server.log', '--save', '', '--appendonly', 'no', '--loadmodule', modulePath()];
    if (cluster) {
      args.push('--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000');
    }
    this.proc = spawn(serverBinary(), args, { cwd: this.dir, stdio: 'ignore' });
    this.exited = false;
    this.proc.on('exit', () => { this.exited = true; });
    this.proc.on('error', () => { this.exited = true; });
  }

  async waitPing() {
    const deadline = Date.now() + START_DEADLINE_MS;
    while (Date.now() < deadline && !this.exited) {
      const c = createClient({ url: this.url(), socket: { reconnectStrategy: false } });
      c.on('error', () => {});
      try {
        await c.connect();
        await c.ping();
        c.destroy();
        return true;
      } catch {
        await sleep(50);
      }
    }
    return false;
  }

  url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  kill() {
    if (this.proc && !this.exited) this.proc.kill('SIGKILL');
  }

  /**
   * Stops the server without closing its connections (SIGSTOP), as a hung machine would: it
   * accepts connections (the kernel does) and answers nothing. stop() still ends it.
   */
  hang() {
    if (this.proc && !this.exited) this.proc.kill('SIGSTOP');
  }

  stop() {
    this.kill();
    running.delete(this);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let single = null;
let cluster = null;

export async function singleServer() {
  single ??= Node.start(false);
  return single;
}

/** The cluster's six nodes, started and joined on first use. */
export async function clusterNodes() {
  cluster ??= startCluster();
  return cluster;
}

/** `node`'s reply to one command, on a connection of its own (cluster set-up and checks). */
export async function ask(node, args) {
  const c = createClient({ url: node.url(), socket: { reconnectStrategy: false } });
  c.on('error', () => {});
  await c.connect();
  try {
    return await c.sendCommand(args);
  } finally {
    c.destroy();
  }
}

/** A 3+3 cluster of its own (for a test that kills nodes); the caller stops its nodes. */
export async function startCluster() {
  const nodes = await Promise.all(Array.from({ length: 6 }, () => Node.start(true)));
  const created = spawnSync('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas', '1', '--cluster-yes'], { encoding: 'utf8', timeout: CLUSTER_DEADLINE_MS });
  if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
  const deadline = Date.now() + CLUSTER_DEADLINE_MS;
  for (;;) {
    const infos = await Promise.all(nodes.map((n) => ask(n, ['CLUSTER', 'INFO'])));
    if (infos.every((i) => i.includes('cluster_state:ok') && new RegExp(`cluster_known_nodes:${nodes.length}\\b`).test(i))) {
      return nodes;
    }
    if (Date.now() > deadline) throw new Error(`the cluster did not reach cluster_state:ok: ${infos[0]}`);
    await sleep(100);
  }
}

/** Until every replica's link to its master is up (a replica that never synced does not take over). */
export async function waitReplicasSynced(nodes) {
  const deadline = Date.now() + CLUSTER_DEADLINE_MS;
  for (;;) {
    const infos = await Promise.all(nodes.map((n) => ask(n, ['INFO', 'replication'])));
    const replicas = infos.filter((i) => i.includes('role:slave'));
    if (replicas.length === nodes.length / 2 && replicas.every((i) => i.includes('master_link_status:up'))) return;
    if (Date.now() > deadline) throw new Error('the replicas did not sync');
    await sleep(100);
  }
}

/**
 * Until `master`'s replica has every write the master has (replication is asynchronous: a write
 * acknowledged just before a master dies may not have reached it).
 */
export async function waitReplicaCaughtUp(master) {
  const deadline = Date.now() + CLUSTER_DEADLINE_MS;
  for (;;) {
    const info = await ask(master, ['INFO', 'replication']);
    const offset = info.match(/master_repl_offset:(\d+)/)?.[1];
    if (offset !== undefined && info.match(/slave0:.*offset=(\d+)/)?.[1] === offset) return;
    if (Date.now() > deadline) throw new Error(`the replica of ${master.url()} did not catch up`);
    await sleep(50);
  }
}

/** A connected client on one server ('single') or the cluster ('cluster'); the caller closes it. */
export async function connect(target, options = {}) {
  if (target === 'single') {
    const client = createClient({ url: (await singleServer()).url(), ...options });
    client.on('error', () => {});
    return client.connect();
  }
  const nodes = await clusterNodes();
  const client = createCluster({ rootNodes: [{ url: nodes[0].url() }], ...options });
  client.on('error', () => {});
  return client.connect();
}

/** The port a tool (bfctl, Python) reaches the same target at. */
export async function portOf(target) {
  return target === 'single' ? (await singleServer()).port : (await clusterNodes())[0].port;
}

/** Stops every server this process started. */
export async function stopAll() {
  // A start still under way finishes first, so that none of its nodes is left running.
  await Promise.allSettled([single, cluster].filter(Boolean));
  for (const node of [...running]) node.stop();
  single = null;
  cluster = null;
}
