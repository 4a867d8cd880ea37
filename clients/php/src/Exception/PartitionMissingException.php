<?php

declare(strict_types=1);

namespace Rustbloom\Exception;

/**
 * A partition key the descriptor lists is gone: its items can be neither added nor looked up, so
 * the client refuses rather than answer "absent" (adds never recreate it). On an add,
 * `acknowledged` is how many items of that call the other partitions took.
 */
final class PartitionMissingException extends PartitionedBloomException
{
    /**
     * @param ?int $acknowledged on an add, how many items of that call the other partitions took
     *                           and answered (null on a lookup)
     */
    public function __construct(
        public readonly string $name,
        public readonly int $index,
        public readonly string $key,
        public readonly ?int $acknowledged = null,
    ) {
        $message = sprintf(
            'partition %d of %s is missing (key %s): restore it or recreate the filter',
            $index,
            json_encode($name, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE),
            json_encode($key, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE),
        );
        if ($acknowledged !== null) {
            $message .= sprintf('; %d items of this call had been acknowledged', $acknowledged);
        }
        parent::__construct($message);
    }
}
