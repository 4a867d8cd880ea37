// The shared vectors of docs/partitions.md (tests/fixtures/partitioning-vectors.json); no server.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  keySlot, partitionCapacity, partitionKeys, partitionOf, partitionSlots, routingHash, slotTags,
} from '../src/index.js';
import { ROOT } from './servers.js';

const vectors = JSON.parse(readFileSync(join(ROOT, 'tests', 'fixtures', 'partitioning-vectors.json'), 'utf8'));

test('routing: seeded xxh3-64 and the partition of every vector', () => {
  for (const v of vectors.routing) {
    const item = Buffer.from(v.item_hex, 'hex');
    const seed = BigInt(v.routing_seed);
    assert.equal(routingHash(item, seed).toString(), v.xxh3_64, v.item_hex);
    assert.equal(partitionOf(item, seed, v.partitions), v.partition, v.item_hex);
  }
});

test('keys and slots', () => {
  for (const v of vectors.keys) {
    assert.equal(keySlot(v.name), v.name_slot);
    const keys = partitionKeys(v.name, v.partitions);
    assert.deepEqual(keys.map(String), v.keys);
    assert.deepEqual(partitionSlots(v.name, v.partitions), v.slots);
    // The tag leads each key, so the key's slot is the partition's target slot.
    assert.deepEqual(keys.map(keySlot), v.slots);
  }
});

test('partition capacity', () => {
  for (const v of vectors.capacity) {
    assert.equal(partitionCapacity(v.items, v.partitions, v.nonscaling), v.partition_capacity, JSON.stringify(v));
  }
});

test('slot tags', () => {
  for (const v of vectors.slot_tags) assert.equal(slotTags()[v.slot], v.tag);
  const tags = slotTags();
  tags.forEach((tag, slot) => assert.equal(keySlot(tag), slot));
  for (const slot of [0, 1, 2515, 11058, 16383]) {
    for (let m = 0; m < Number(tags[slot]); m++) assert.notEqual(keySlot(String(m)), slot);
  }
  assert.ok(Math.max(...tags.map(Number)) < 110_000);
});

test("the Redis docs' slots; an empty tag is no tag", () => {
  assert.equal(keySlot('somekey'), 11058);
  assert.equal(keySlot('foo{hash_tag}'), 2515);
  assert.equal(keySlot('hash_tag'), 2515);
  assert.notEqual(keySlot('foo{}bar'), keySlot(''));
});

test('the partition count is checked', () => {
  for (const bad of [0, 4097, -1, 2.5, '4']) assert.throws(() => partitionKeys('f', bad), RangeError);
});

test('routing spreads items evenly', () => {
  const counts = new Array(16).fill(0);
  for (let i = 0; i < 16_000; i++) counts[partitionOf(String(i), 12345n, 16)]++;
  // Binomial(16000, 1/16): mean 1000, sd 31.
  assert.ok(Math.min(...counts) > 850 && Math.max(...counts) < 1150, String(counts));
});
