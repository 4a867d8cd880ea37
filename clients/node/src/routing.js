// The partitioning rules of docs/partitions.md: which partition an item goes to, the keys of
// the partitions, their slots, and how big each one is made. Pure computation, checked against
// the shared vectors (tests/fixtures/partitioning-vectors.json).

import { xxh3 } from '@node-rs/xxhash';
import calculateSlot from 'cluster-key-slot';

/** Redis Cluster's number of hash slots. */
export const SLOTS = 16384;
/** The largest number of partitions a filter may have. */
export const MAX_PARTITIONS = 4096;
// The module's largest filter capacity (BF.RESERVE's range).
const MAX_CAPACITY = 2 ** 30;
const U64_MAX = (1n << 64n) - 1n;

/** Returns `partitions` when it is an integer in 1..4096, else throws RangeError. */
export function checkPartitions(partitions) {
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_PARTITIONS) {
    throw new RangeError(`partitions must be an integer between 1 and ${MAX_PARTITIONS}, not ${partitions}`);
  }
  return partitions;
}

/** Returns `seed` when it is a bigint in 0..2^64-1, else throws RangeError. */
export function checkRoutingSeed(seed) {
  if (typeof seed !== 'bigint' || seed < 0n || seed > U64_MAX) {
    throw new RangeError(`routing seed must be an unsigned 64-bit bigint, not ${seed}`);
  }
  return seed;
}

/** XXH3 64-bit of the item's bytes (a string as UTF-8) under the routing seed. */
export function routingHash(item, routingSeed) {
  return xxh3.xxh64(item, routingSeed);
}

/**
 * The partition (0-based) that holds `item`: the top 64 bits of hash × partitions, which maps the
 * hash onto 0..partitions without the bias of a modulo and without reusing its low bits.
 */
export function partitionOf(item, routingSeed, partitions) {
  return Number((xxh3.xxh64(item, routingSeed) * BigInt(partitions)) >> 64n);
}

/** The cluster slot of `key` (string or bytes), honouring its hash tag (cluster-key-slot). */
export function keySlot(key) {
  return calculateSlot(key);
}

let slotTagTable = null;

/**
 * For every slot s, the decimal string of the smallest n >= 0 whose CRC16 lands in s. Built once
 * per process (about 110,000 CRCs).
 */
export function slotTags() {
  if (slotTagTable === null) {
    const tags = new Array(SLOTS).fill(null);
    let missing = SLOTS;
    for (let n = 0; missing > 0; n++) {
      const tag = String(n);
      const slot = calculateSlot(tag);
      if (tags[slot] === null) {
        tags[slot] = tag;
        missing--;
      }
    }
    slotTagTable = Object.freeze(tags);
  }
  return slotTagTable;
}

/** The slots of the partitions of filter `name`: evenly spaced from the name's own slot. */
export function partitionSlots(name, partitions) {
  checkPartitions(partitions);
  const base = keySlot(name);
  return Array.from({ length: partitions }, (_, i) => (base + Math.floor((i * SLOTS) / partitions)) % SLOTS);
}

/** The keys `{T_i}NAME/i` of the partitions of filter `name`, in partition order, as Buffers. */
export function partitionKeys(name, partitions) {
  const tags = slotTags();
  const nameBytes = Buffer.from(name);
  return partitionSlots(name, partitions).map((slot, i) =>
    Buffer.concat([Buffer.from(`{${tags[slot]}}`), nameBytes, Buffer.from(`/${i}`)]));
}

/**
 * The capacity each partition is reserved with, for `items` items over `partitions`. A
 * NONSCALING partition also holds six standard deviations of the binomial spread of items per
 * partition (plus one), so that loading `items` random items never fills one of them first.
 */
export function partitionCapacity(items, partitions, nonscaling) {
  checkPartitions(partitions);
  if (!Number.isSafeInteger(items) || items < 1) {
    throw new RangeError(`capacity must be a positive integer, not ${items}`);
  }
  if (!nonscaling) {
    return Math.floor((items - 1) / partitions) + 1;
  }
  const share = 1 / partitions;
  const capacity = Math.ceil(items / partitions + 6 * Math.sqrt(items * share * (1 - share))) + 1;
  // No partition receives more than all the items: past the module's capacity cap the
  // spread is dropped where N itself fits (one NONSCALING partition of 2^30 items).
  return capacity > MAX_CAPACITY ? Math.min(capacity, items) : capacity;
}
