// Preloaded (`node --import ./test/node-redis-from.js`) to run this package and its tests on
// another node-redis than the one its lockfile installs: `redis` imported from this package's own
// files (src/, test/) resolves from $RUSTBLOOM_NODE_REDIS (a directory whose node_modules holds
// it: make client-packages installs node-redis 6 into target/node-redis-6), as if that
// directory held the package. The rest (its other dependencies, node-redis' own imports) resolves
// as usual. Without the variable this does nothing.

import { existsSync } from 'node:fs';
import { register } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

// This package's directory (clients/node/), as a URL prefix.
const packageRoot = new URL('..', import.meta.url).href;

const from = process.env.RUSTBLOOM_NODE_REDIS;
if (from) {
  // Never a silent fallback to the lockfile's node-redis (resolution would walk up from there).
  if (!existsSync(join(from, 'node_modules', 'redis', 'package.json'))) {
    throw new Error(`RUSTBLOOM_NODE_REDIS=${from} holds no node_modules/redis: run make client-packages`);
  }
  register('./node-redis-hooks.js', import.meta.url, {
    data: { packageRoot, redisParent: pathToFileURL(resolve(from, 'package.json')).href },
  });
}
