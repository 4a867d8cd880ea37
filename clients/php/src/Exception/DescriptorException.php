<?php

declare(strict_types=1);

namespace Rustbloom\Exception;

/**
 * BF.INFO of the logical name answered something this client cannot route by: not a partitioned
 * filter, or a descriptor whose keys or fields disagree with docs/partitions.md.
 */
final class DescriptorException extends PartitionedBloomException
{
}
