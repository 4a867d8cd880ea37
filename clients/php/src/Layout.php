<?php

declare(strict_types=1);

namespace Rustbloom;

/** What BF.INFO of the logical name says: all a client needs to route items. */
final class Layout
{
    /** @param list<string> $keys */
    public function __construct(
        public readonly int $partitions,
        /** The routing seed, an unsigned 64-bit decimal string. */
        public readonly string $routingSeed,
        public readonly int $capacity,
        public readonly int $partitionCapacity,
        public readonly float $errorRate,
        /** Null when NONSCALING or WINDOW. */
        public readonly ?int $expansion,
        /** Null unless WINDOW. */
        public readonly ?int $windowMs,
        public readonly array $keys,
    ) {
    }
}
