// The install line docs/partitions.md and this package's README give, run verbatim (only the
// placeholder path to the checkout replaced) in a project outside the repository: the package must
// import there and find its peer `redis` (a plain `npm install <dir>` links the directory, and
// `redis` is then looked up beside the repository's copy, not the project's; `redis` without a
// version may pull a major outside the package's peer range).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './servers.js';

const PLACEHOLDER = '/path/to/rustbloom/';

/** The distinct `npm install` lines of the documents that give one. */
function installLines() {
  const lines = new Set();
  for (const doc of [['docs', 'partitions.md'], ['clients', 'node', 'README.md']]) {
    const line = readFileSync(join(ROOT, ...doc), 'utf8').match(/(?:^|`)(npm install [^`\n]*clients\/node[^`\n]*)/m)?.[1];
    assert.ok(line?.includes(`${PLACEHOLDER}clients/node`), `no npm install line with ${PLACEHOLDER}clients/node in ${doc.join('/')}`);
    lines.add(line.trim());
  }
  return [...lines];
}

test('the documented npm install works from a project outside the repository', { timeout: 300_000 }, () => {
  for (const line of installLines()) installAndImport(line);
});

function installAndImport(line) {
  const project = mkdtempSync(join(tmpdir(), 'rbnode-install-'));
  try {
    execFileSync('npm', ['init', '-y'], { cwd: project, stdio: 'ignore' });
    const args = line.split(/\s+/).slice(1).map((arg) => arg.replace(PLACEHOLDER, `${ROOT}/`));
    execFileSync('npm', args, { cwd: project, stdio: 'ignore' });
    writeFileSync(join(project, 'check.mjs'),
      "import { PartitionedBloom, partitionKeys } from 'rustbloom';\n"
      + "import { createCluster } from 'redis';\n"
      + "console.log(typeof PartitionedBloom, typeof createCluster, String(partitionKeys('x', 2)[1]));\n");
    const out = execFileSync('node', ['check.mjs'], { cwd: project, encoding: 'utf8' });
    assert.equal(out.trim(), 'function function {51781}x/1');
    const redisMajor = JSON.parse(readFileSync(join(project, 'node_modules', 'redis', 'package.json'), 'utf8')).version.split('.')[0];
    const peer = JSON.parse(readFileSync(join(ROOT, 'clients', 'node', 'package.json'), 'utf8')).peerDependencies.redis;
    assert.ok(peer.split('||').map((range) => range.trim()).includes(`^${redisMajor}.0.0`), `redis ${redisMajor} outside ${peer}`);
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
}
