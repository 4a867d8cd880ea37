// The errors this package throws; every one is a PartitionedBloomError.

/** Base class of the errors this package throws. */
export class PartitionedBloomError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The logical name holds no filter at all. */
export class FilterNotFoundError extends PartitionedBloomError {}

/**
 * BF.INFO of the logical name answered something this client cannot route by: not a partitioned
 * filter, or a descriptor whose keys or fields disagree with docs/partitions.md.
 */
export class DescriptorError extends PartitionedBloomError {}

/**
 * A partition key the descriptor lists is gone: its items can be neither added nor looked up,
 * so the client refuses rather than answer "absent" (adds never recreate it). On an add,
 * `acknowledged` is how many items of that call the other partitions took (undefined on a
 * lookup).
 */
export class PartitionMissingError extends PartitionedBloomError {
  constructor(name, index, key, acknowledged) {
    let message = `partition ${index} of ${JSON.stringify(String(name))} is missing (key ${JSON.stringify(String(key))}): restore it or recreate the filter`;
    if (acknowledged !== undefined) message += `; ${acknowledged} items of this call had been acknowledged`;
    super(message);
    this.filter = name;
    this.index = index;
    this.key = key;
    this.acknowledged = acknowledged;
  }
}

/**
 * The node an item's partition lives on could not be reached (or no master serves its slot)
 * within the retry deadline, or a reply was lost where resending is not harmless.
 */
export class NodeUnavailableError extends PartitionedBloomError {}

/**
 * The server refused a command; the message is its error text without Redis' `ERR ` prefix
 * (`item exists`, `non scaling filter is full`, `item routed to partition j of P, not i`).
 */
export class ServerError extends PartitionedBloomError {
  constructor(message, key) {
    super(message);
    this.key = key;
  }
}
