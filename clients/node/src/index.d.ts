// Types of the rustbloom package (src/index.js, src/routing.js, src/errors.js).

/**
 * A connected node-redis client or cluster (createClient / createCluster), node-redis 5 or 6, any
 * modules or RESP: typed by what the package calls on it, since `RedisClusterType<any, ...>` of
 * one major does not accept the other's clusters (node-redis 6's is not even assignable to its own
 * `RedisClusterType<any, ...>`).
 */
export type Client = SingleClient | ClusterClient;
/** node-redis' createClient(): commands by `sendCommand(args, options)`. */
export interface SingleClient {
  sendCommand(args: ReadonlyArray<string | Buffer>, options?: object): Promise<unknown>;
}
/** node-redis' createCluster(): its masters, and commands by `sendCommand(key, readonly, args, options)`. */
export interface ClusterClient {
  readonly masters: ReadonlyArray<unknown>;
  sendCommand(firstKey: string | Buffer | undefined, isReadonly: boolean | undefined, args: Array<string | Buffer>, options?: object): Promise<unknown>;
}
/** An item: bytes as they are, a string as UTF-8; nothing else (docs/partitions.md, "One contract"). */
export type Item = string | Buffer | Uint8Array;

/** What BF.INFO of the logical name says: all a client needs to route items. */
export interface Layout {
  readonly partitions: number;
  readonly routingSeed: bigint;
  readonly capacity: number;
  readonly partitionCapacity: number;
  readonly errorRate: number;
  /** null when NONSCALING or WINDOW. */
  readonly expansion: number | null;
  /** null unless WINDOW. */
  readonly windowMs: number | null;
  readonly keys: readonly Buffer[];
}

export interface Info {
  Partitions: number;
  'Routing seed': bigint;
  Capacity: number;
  'Partition capacity': number;
  'Error rate': number;
  'Expansion rate': number | null;
  'Window (ms)': number | null;
  'Partition keys': readonly Buffer[];
}

export interface ReserveOptions {
  nonscaling?: boolean;
  expansion?: number;
  windowMs?: number;
}

export interface InsertOptions extends ReserveOptions {
  errorRate?: number;
  capacity?: number;
  partitions?: number;
  nocreate?: boolean;
}

export interface PartitionedBloomOptions {
  /** How long a lookup's or an add's command whose reply was lost is sent again (default 30000). */
  retryForMs?: number;
}

export declare const CHUNK_ITEMS: number;
export declare const DEFAULT_ERROR_RATE: number;
export declare const DEFAULT_CAPACITY: number;

/** One Bloom filter over P partition keys, for the rustbloom module (docs/partitions.md). */
export declare class PartitionedBloom {
  constructor(client: Client, name: string | Buffer, options?: PartitionedBloomOptions);
  readonly name: Buffer;
  layout(): Promise<Layout>;
  partitionKeys(): Promise<readonly Buffer[]>;
  partitionOf(item: Item): Promise<number>;
  refresh(): Promise<Layout>;
  info(): Promise<Info>;
  reserve(errorRate: number, capacity: number, partitions: number, options?: ReserveOptions): Promise<Layout>;
  add(item: Item): Promise<boolean>;
  madd(items: readonly Item[]): Promise<boolean[]>;
  insert(items: readonly Item[], options?: InsertOptions): Promise<boolean[]>;
  exists(item: Item): Promise<boolean>;
  mexists(items: readonly Item[]): Promise<boolean[]>;
  drop(): Promise<number>;
}

export declare class PartitionedBloomError extends Error {}
export declare class FilterNotFoundError extends PartitionedBloomError {}
export declare class DescriptorError extends PartitionedBloomError {}
export declare class NodeUnavailableError extends PartitionedBloomError {}
export declare class PartitionMissingError extends PartitionedBloomError {
  readonly filter: Buffer;
  readonly index: number;
  readonly key: Buffer;
  /** On an add, the items of that call the other partitions took; undefined on a lookup. */
  readonly acknowledged: number | undefined;
}
export declare class ServerError extends PartitionedBloomError {
  readonly key: Buffer;
}

export declare const SLOTS: number;
export declare const MAX_PARTITIONS: number;
export declare function checkPartitions(partitions: number): number;
export declare function checkRoutingSeed(seed: bigint): bigint;
export declare function routingHash(item: string | Uint8Array, routingSeed: bigint): bigint;
export declare function partitionOf(item: string | Uint8Array, routingSeed: bigint, partitions: number): number;
export declare function keySlot(key: string | Buffer): number;
export declare function slotTags(): readonly string[];
export declare function partitionSlots(name: string | Buffer, partitions: number): number[];
export declare function partitionKeys(name: string | Buffer, partitions: number): Buffer[];
export declare function partitionCapacity(items: number, partitions: number, nonscaling: boolean): number;
