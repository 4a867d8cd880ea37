<?php

declare(strict_types=1);

namespace Rustbloom\Exception;

/**
 * A partition key the descriptor lists is gone: its items can be neither added nor looked up, so
 * the client refuses rather than answer "absent" (adds never recreate it).
 */
final class PartitionMissingException extends PartitionedBloomException
{
    public function __construct(
        public readonly string $name,
        public readonly int $index,
        public readonly string $key,
    ) {
        parent::__construct(sprintf(
            'partition %d of %s is missing (key %s): restore it or recreate the filter',
            $index,
            json_encode($name, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES),
            json_encode($key, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES),
        ));
    }
}
