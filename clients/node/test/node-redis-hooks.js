// The module resolution hooks node-redis-from.js registers (they run on a loader thread of their
// own): `redis` and `redis/...` imported from a file of this package outside node_modules are
// resolved as if imported from `redisParent`.

let packageRoot = null;
let redisParent = null;

export function initialize(data) {
  ({ packageRoot, redisParent } = data);
}

export function resolve(specifier, context, nextResolve) {
  const parent = context.parentURL ?? '';
  const ours = parent.startsWith(packageRoot) && !parent.slice(packageRoot.length).includes('node_modules/');
  if (ours && (specifier === 'redis' || specifier.startsWith('redis/'))) {
    return nextResolve(specifier, { ...context, parentURL: redisParent });
  }
  return nextResolve(specifier, context);
}
