// The install line docs/partitions.md gives, run verbatim in a project outside the repository:
// the package must import there and find its peer `redis` (a plain `npm install ./clients/node`
// links the directory, and `redis` is then looked up beside the repository's copy, not the
// project's; `redis` without a version pulls a major outside the package's peer range).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './servers.js';

test('the documented npm install works from a project outside the repository', { timeout: 300_000 }, () => {
  const docs = readFileSync(join(ROOT, 'docs', 'partitions.md'), 'utf8');
  const line = docs.match(/`(npm install [^`]*\.\/clients\/node[^`]*)`/)?.[1];
  assert.ok(line, 'no npm install line in docs/partitions.md');
  const project = mkdtempSync(join(tmpdir(), 'rbnode-install-'));
  try {
    execFileSync('npm', ['init', '-y'], { cwd: project, stdio: 'ignore' });
    const args = line.split(/\s+/).slice(1).map((arg) => (arg === './clients/node' ? join(ROOT, 'clients', 'node') : arg));
    execFileSync('npm', args, { cwd: project, stdio: 'ignore' });
    writeFileSync(join(project, 'check.mjs'),
      "import { PartitionedBloom, partitionKeys } from 'rustbloom';\n"
      + "import { createCluster } from 'redis';\n"
      + "console.log(typeof PartitionedBloom, typeof createCluster, String(partitionKeys('x', 2)[1]));\n");
    const out = execFileSync('node', ['check.mjs'], { cwd: project, encoding: 'utf8' });
    assert.equal(out.trim(), 'function function {51781}x/1');
    const redisMajor = JSON.parse(readFileSync(join(project, 'node_modules', 'redis', 'package.json'), 'utf8')).version.split('.')[0];
    const peer = JSON.parse(readFileSync(join(ROOT, 'clients', 'node', 'package.json'), 'utf8')).peerDependencies.redis;
    assert.equal(`^${redisMajor}.0.0`, peer);
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
});
