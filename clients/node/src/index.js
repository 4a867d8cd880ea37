// PartitionedBloom: one logical Bloom filter whose items are spread over P partition keys, for
// the rustbloom module (docs/partitions.md), over node-redis (createClient or createCluster).

import { randomBytes } from 'node:crypto';
import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import { ErrorReply, RESP_TYPES } from 'redis';
import {
  DescriptorError,
  FilterNotFoundError,
  NodeUnavailableError,
  PartitionMissingError,
  ServerError,
} from './errors.js';
import { checkPartitions, checkRoutingSeed, partitionCapacity, partitionKeys, partitionOf } from './routing.js';

export * from './errors.js';
export * from './routing.js';

/** Items per BF.INSERT / BF.MEXISTS command; a bigger batch becomes several, all pipelined. */
export const CHUNK_ITEMS = 1000;
/** BF.INSERT's defaults when it creates a filter, as in RedisBloom. */
export const DEFAULT_ERROR_RATE = 0.01;
export const DEFAULT_CAPACITY = 100;

const RESEND_PAUSE_MS = 100;
/**
 * The longest one attempt waits for its reply before it counts as lost: node-redis 5 keeps a
 * command for a master that died queued, unanswered, until that node comes back (minutes), so
 * without this a load would hang through a failover instead of resending to the new master.
 */
const ATTEMPT_MS = 5_000;
// How many full commands a batch's routing sends before it lets node-redis write them.
const YIELD_EVERY_COMMANDS = 4;
// Error replies a cluster answers while it heals; the command did nothing, so it is sent again.
const TRANSIENT_REPLY = /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN)\b/;
// Bulk strings as Buffers: partition keys are bytes, whatever the name holds.
const RAW_REPLIES = { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } };

/** An error reply, kept as a value among a batch's answers. */
class ReplyError {
  constructor(text) {
    this.text = text.startsWith('ERR ') ? text.slice(4) : text;
  }
}

/**
 * One Bloom filter over P partition keys. `client` is a connected node-redis client or cluster;
 * `name` the logical filter name (string or Buffer).
 *
 * Each item goes to the one partition a seeded hash of it picks, so an add or a lookup touches
 * one key, and the partitions sit on evenly spaced cluster slots so that a cluster's masters
 * share them. A batch's commands are all sent at once (node-redis pipelines them per node);
 * answers come back in the order of the items. Items are strings (sent as UTF-8), Buffers or
 * Uint8Arrays, and are routed by those bytes; anything else is a TypeError (never coerced).
 *
 * The layout (partition count, routing seed, keys) is read from `BF.INFO name` on first use and
 * kept; call refresh() after the filter is deleted and recreated under the same name.
 */
export class PartitionedBloom {
  #client;
  #cluster;
  #retryForMs;
  #layout = null;

  /**
   * Options: `retryForMs` (default 30000): how long a command of a lookup or an add whose reply
   * was lost is sent again (re-adding an item leaves the filter as it was, but the "new" answers
   * of a resent add may undercount); reserve is never resent.
   */
  constructor(client, name, { retryForMs = 30_000 } = {}) {
    this.#client = client;
    this.#cluster = Array.isArray(client.masters);
    this.#retryForMs = retryForMs;
    this.name = Buffer.from(name);
  }

  /** The filter's layout, read from the server on first use. */
  async layout() {
    return this.#layout ?? this.refresh();
  }

  /** The P partition keys (Buffers), in partition order. */
  async partitionKeys() {
    return (await this.layout()).keys;
  }

  /** The partition that holds `item`. */
  async partitionOf(item) {
    const layout = await this.layout();
    return partitionOf(itemBytes(item), layout.routingSeed, layout.partitions);
  }

  /** Reads the layout again from `BF.INFO name` (one round trip). */
  async refresh() {
    const [reply] = await this.#send([[this.name, ['BF.INFO', this.name]]], true, RAW_REPLIES);
    if (reply instanceof ReplyError) {
      if (reply.text === 'not found') throw new FilterNotFoundError(`no filter named ${JSON.stringify(this.name.toString())}`);
      throw new ServerError(reply.text, this.name);
    }
    this.#layout = this.#layoutFromInfo(infoFields(reply));
    return this.#layout;
  }

  /**
   * BF.INFO of the logical name; also refreshes the layout. Fields: `Partitions`, `Routing
   * seed` (bigint), `Capacity`, `Partition capacity`, `Error rate`, `Expansion rate` (null when
   * NONSCALING or WINDOW), `Window (ms)` (null unless WINDOW), `Partition keys` (Buffers).
   */
  async info() {
    const l = await this.refresh();
    return {
      Partitions: l.partitions,
      'Routing seed': l.routingSeed,
      Capacity: l.capacity,
      'Partition capacity': l.partitionCapacity,
      'Error rate': l.errorRate,
      'Expansion rate': l.expansion,
      'Window (ms)': l.windowMs,
      'Partition keys': l.keys,
    };
  }

  /**
   * Creates the filter: `capacity` items at false-positive rate `errorRate` over `partitions`
   * keys, each a filter of the same kind (scaling with `expansion`, `nonscaling`, or `windowMs`).
   * The partitions are created first, then the descriptor, so that a descriptor implies its
   * partitions; when a step is refused, the partitions this call created are deleted again and
   * a ServerError thrown (`item exists` when the name or a partition is taken). On a cluster
   * choose partitions >= 2 x masters, so that a reshard moves whole partitions.
   */
  async reserve(errorRate, capacity, partitions, { nonscaling = false, expansion, windowMs } = {}) {
    const perPartition = partitionCapacity(capacity, partitions, nonscaling);
    const options = [];
    if (nonscaling) options.push('NONSCALING');
    if (expansion !== undefined && expansion !== null) options.push('EXPANSION', String(expansion));
    if (windowMs !== undefined && windowMs !== null) options.push('WINDOW', String(windowMs));
    const seed = randomBytes(8).readBigUInt64BE().toString();
    const rate = String(errorRate);
    const keys = partitionKeys(this.name, partitions);
    const commands = keys.map((key, i) => [key, ['BF.RESERVE', key, rate, String(perPartition), ...options,
      'PARTITION', String(i), String(partitions), seed]]);
    // Not resent when a reply is lost: a second BF.RESERVE of a created partition is refused.
    const replies = await this.#send(commands, false);
    const created = keys.filter((_, i) => !(replies[i] instanceof ReplyError));
    let failure = replies.findIndex((r) => r instanceof ReplyError);
    let error = failure >= 0 ? new ServerError(replies[failure].text, keys[failure]) : null;
    if (error === null) {
      const [reply] = await this.#send([[this.name, ['BF.RESERVE', this.name, rate, String(capacity),
        'PARTITIONS', String(partitions), seed, ...options]]], false);
      if (reply instanceof ReplyError) error = new ServerError(reply.text, this.name);
    }
    if (error !== null) {
      await this.#send(created.map((key) => [key, ['DEL', key]]), true);
      throw error;
    }
    // Read back what the server recorded (its default expansion, its rounding of the rate).
    return this.refresh();
  }

  /** Adds one item; true when it was new (no false positive said it was there). */
  async add(item) {
    return (await this.madd([item]))[0];
  }

  /**
   * Adds items; one answer per item, in order: true when the item was new. Sent as `BF.INSERT
   * key NOCREATE ITEMS ...`, so a partition that is gone throws PartitionMissingError and is
   * never recreated empty.
   */
  async madd(items) {
    return this.#perPartition(items, ['BF.INSERT', 'NOCREATE', 'ITEMS'], false);
  }

  /**
   * Adds items, first creating the filter when there is none (as BF.INSERT does). Creation needs
   * `partitions`; `errorRate` and `capacity` default to BF.INSERT's 0.01 and 100. With
   * `nocreate` a missing filter throws FilterNotFoundError. When another client creates the same
   * name at the same moment, this one uses its filter.
   */
  async insert(items, { errorRate, capacity, partitions, nonscaling = false, expansion, windowMs, nocreate = false } = {}) {
    if (!nocreate && this.#layout === null) {
      try {
        await this.refresh();
      } catch (e) {
        if (!(e instanceof FilterNotFoundError)) throw e;
        if (partitions === undefined) {
          throw new RangeError(`no filter named ${JSON.stringify(this.name.toString())}: creating it needs partitions`);
        }
        try {
          await this.reserve(errorRate ?? DEFAULT_ERROR_RATE, capacity ?? DEFAULT_CAPACITY, partitions,
            { nonscaling, expansion, windowMs });
        } catch (r) {
          if (!(r instanceof ServerError) || r.message !== 'item exists') throw r;
          await this.refresh();
        }
      }
    }
    return this.madd(items);
  }

  /** True when `item` may have been added (false positives at the error rate). */
  async exists(item) {
    return (await this.mexists([item]))[0];
  }

  /**
   * Looks items up; one answer per item, in order. Each partition's lookup is preceded by `EXISTS
   * key` on the same connection, so a deleted partition throws PartitionMissingError instead of
   * answering "absent".
   */
  async mexists(items) {
    return this.#perPartition(items, ['BF.MEXISTS'], true);
  }

  /**
   * Deletes the filter: the descriptor first (a descriptor implies its partitions), then every
   * partition. Answers how many keys were deleted.
   */
  async drop() {
    const { keys } = await this.layout();
    this.#layout = null;
    let deleted = 0;
    for (const batch of [[this.name], keys]) {
      const replies = await this.#send(batch.map((key) => [key, ['DEL', key]]), true);
      replies.forEach((reply, i) => {
        if (reply instanceof ReplyError) throw new ServerError(reply.text, batch[i]);
        deleted += Number(reply);
      });
    }
    return deleted;
  }

  /**
   * Sends `command key flags... chunk` for each partition's items and puts the answers back in
   * the items' order. A partition's command leaves as soon as it holds CHUNK_ITEMS items, and
   * the routing yields to the event loop every few commands, so that the servers work on the
   * first commands while the client still routes the rest of a big batch.
   */
  async #perPartition(items, command, checkExists) {
    if (!Array.isArray(items)) throw new TypeError('items must be an array');
    if (items.length === 0) return [];
    // Every item checked before any command leaves: a bad item adds nothing.
    const encoded = items.map(itemBytes);
    const layout = await this.layout();
    const deadline = Date.now() + this.#retryForMs;
    // [partition, the item positions it answers or null for EXISTS, the reply's promise]
    const sent = [];
    const send = (part, positions, args) => {
      const reply = this.#sendOne(layout.keys[part], args, true, deadline);
      // Awaited below, in order; marked handled now, so that a command failing while the routing
      // goes on is not an unhandled rejection.
      reply.catch(() => {});
      sent.push([part, positions, reply]);
    };
    const flush = (part, chunk) => send(part, chunk.positions, [command[0], layout.keys[part], ...command.slice(1), ...chunk.items]);
    const open = new Map();
    const seen = new Set();
    for (let position = 0; position < encoded.length; position++) {
      const bytes = encoded[position];
      const part = partitionOf(bytes, layout.routingSeed, layout.partitions);
      if (checkExists && !seen.has(part)) {
        seen.add(part);
        send(part, null, ['EXISTS', layout.keys[part]]);
      }
      let chunk = open.get(part);
      if (chunk === undefined) {
        chunk = { positions: [], items: [] };
        open.set(part, chunk);
      }
      chunk.positions.push(position);
      chunk.items.push(bytes);
      if (chunk.items.length === CHUNK_ITEMS) {
        flush(part, chunk);
        open.delete(part);
        if (sent.length % YIELD_EVERY_COMMANDS === 0) await setImmediate();
      }
    }
    for (const [part, chunk] of open) flush(part, chunk);
    return this.#answers(sent, layout, command[0], items.length);
  }

  /**
   * The answers of a batch's commands, in the items' order; the first failure thrown. A missing
   * partition is thrown first, once every reply is in, with the count of items the other
   * partitions of an add took (they were added: the caller may skip them on a retry).
   */
  async #answers(sent, layout, command, count) {
    const replies = [];
    for (const [, , promise] of sent) replies.push(await promise);
    const gone = sent.findIndex(([, positions], n) => (replies[n] instanceof ReplyError && replies[n].text === 'not found')
      || (positions === null && Number(replies[n]) === 0));
    if (gone >= 0) {
      const isAdd = sent.every(([, positions]) => positions !== null);
      const acknowledged = isAdd
        ? sent.reduce((sum, [, positions], n) => sum + (Array.isArray(replies[n]) ? positions.length : 0), 0)
        : undefined;
      throw new PartitionMissingError(this.name, sent[gone][0], layout.keys[sent[gone][0]], acknowledged);
    }
    const answers = new Array(count).fill(false);
    for (const [n, [part, positions]] of sent.entries()) {
      const reply = replies[n];
      const key = layout.keys[part];
      if (reply instanceof ReplyError) throw new ServerError(reply.text, key);
      if (positions === null) continue;
      if (Array.isArray(reply) && reply.length > 0 && reply.length <= positions.length && reply.at(-1) instanceof Error) {
        // The server stopped at an item it refused: `non scaling filter is full`.
        throw new ServerError(reply.at(-1).message.replace(/^ERR /, ''), key);
      }
      if (!Array.isArray(reply) || reply.length !== positions.length) {
        throw new ServerError(`${command} on ${key} answered ${positions.length} items with ${String(reply)}`, key);
      }
      positions.forEach((position, k) => { answers[position] = itemAnswer(reply[k], command, key); });
    }
    return answers;
  }

  /**
   * Sends every command (node-redis pipelines those in flight together, per node) and answers in
   * their order, error replies as ReplyError values. A command whose reply is lost, or that meets
   * a cluster still healing, is sent again until the deadline when `resendable`; otherwise, and
   * after the deadline, NodeUnavailableError.
   */
  async #send(commands, resendable, options) {
    const deadline = Date.now() + this.#retryForMs;
    return Promise.all(commands.map(([key, args]) => this.#sendOne(key, args, resendable, deadline, options)));
  }

  async #sendOne(key, args, resendable, deadline, options) {
    for (;;) {
      let failure;
      try {
        const sending = this.#cluster
          ? this.#client.sendCommand(key, false, args, options)
          : this.#client.sendCommand(args, options);
        return await settledBy(sending, Math.min(deadline, Date.now() + ATTEMPT_MS));
      } catch (e) {
        if (e instanceof ErrorReply && !TRANSIENT_REPLY.test(e.message)) return new ReplyError(e.message);
        failure = e;
      }
      if (!resendable) {
        throw new NodeUnavailableError(`the reply to ${args[0]} on ${key} was lost and it is not resent: ${failure.message}`, { cause: failure });
      }
      if (Date.now() >= deadline) {
        throw new NodeUnavailableError(`gave up resending ${args[0]} on ${key} after ${this.#retryForMs} ms: ${failure.message}`, { cause: failure });
      }
      await sleep(RESEND_PAUSE_MS);
    }
  }

  #layoutFromInfo(fields) {
    const name = JSON.stringify(this.name.toString());
    if (!fields.has('Partition keys')) throw new DescriptorError(`${name} is not a partitioned filter`);
    const partitions = intField(fields, 'Partitions', false);
    let routingSeed;
    try {
      checkPartitions(partitions);
      routingSeed = checkRoutingSeed(BigInt(String(fields.get('Routing seed'))));
    } catch (e) {
      throw new DescriptorError(`descriptor of ${name}: ${e.message}`);
    }
    const keys = partitionKeys(this.name, partitions);
    const listed = fields.get('Partition keys');
    if (!Array.isArray(listed) || listed.length !== keys.length
        || listed.some((k, i) => !Buffer.from(k).equals(keys[i]))) {
      throw new DescriptorError(`the descriptor of ${name} lists partition keys other than docs/partitions.md gives`);
    }
    const errorRate = Number(String(fields.get('Error rate')));
    if (!Number.isFinite(errorRate)) throw new DescriptorError(`bad error rate in ${name}`);
    return Object.freeze({
      partitions,
      routingSeed,
      capacity: intField(fields, 'Capacity', false),
      partitionCapacity: intField(fields, 'Partition capacity', false),
      errorRate,
      expansion: intField(fields, 'Expansion rate', true),
      windowMs: intField(fields, 'Window (ms)', true),
      keys: Object.freeze(keys),
    });
  }
}

/** Thrown by settledBy when the time is up: the reply counts as lost. */
class NoReplyInTime extends Error {}

/**
 * `promise`'s outcome, or a NoReplyInTime rejection at `until` (ms since the epoch) if it has not
 * settled by then; a late outcome is ignored (an add sent again is harmless).
 */
async function settledBy(promise, until) {
  let timer;
  promise.catch(() => {});
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new NoReplyInTime('no reply in time')), Math.max(0, until - Date.now()));
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * An item's bytes as sent, by the clients' one rule (docs/partitions.md, "One contract"): bytes
 * (a Buffer or Uint8Array) as they are, a string as UTF-8 (node-redis and xxh3 take it so),
 * anything else refused, never coerced.
 */
function itemBytes(item) {
  if (typeof item === 'string' || Buffer.isBuffer(item)) return item;
  if (item instanceof Uint8Array) return Buffer.from(item.buffer, item.byteOffset, item.byteLength);
  throw new TypeError(`an item must be bytes or a string, not ${typeName(item)}`);
}

/** A value's type as the error names it: `null`, `float`, `int`, `bool`, or JavaScript's name. */
function typeName(value) {
  if (value === null) return 'null';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'bigint') return 'int';
  if (typeof value === 'object') return value.constructor?.name ?? 'object';
  return typeof value;
}

function itemAnswer(answer, command, key) {
  if (answer === 1 || answer === true) return true;
  if (answer === 0 || answer === false) return false;
  throw new ServerError(`${command} on ${key} answered ${String(answer)} for an item`, key);
}

/** BF.INFO's answer as a Map of field name to value: a map in RESP3, a flat array in RESP2. */
function infoFields(reply) {
  let pairs;
  if (reply instanceof Map) {
    pairs = [...reply];
  } else if (Array.isArray(reply) && reply.length % 2 === 0) {
    pairs = [];
    for (let i = 0; i < reply.length; i += 2) pairs.push([reply[i], reply[i + 1]]);
  } else if (reply !== null && typeof reply === 'object' && !Buffer.isBuffer(reply)) {
    pairs = Object.entries(reply);
  } else {
    throw new DescriptorError(`BF.INFO answered ${String(reply)}`);
  }
  return new Map(pairs.map(([k, v]) => [String(k), v]));
}

function intField(fields, name, nullable) {
  const value = fields.get(name);
  if (nullable && (value === null || value === undefined)) return null;
  const number = typeof value === 'number' ? value : Number(String(value));
  if (!Number.isSafeInteger(number)) throw new DescriptorError(`BF.INFO field '${name}' is not an integer: ${String(value)}`);
  return number;
}
