<?php

declare(strict_types=1);

namespace Rustbloom\Exception;

/**
 * The node an item's partition lives on could not be reached, or no master of the cluster serves
 * the partition's slot, within the retry deadline.
 */
final class NodeUnavailableException extends PartitionedBloomException
{
}
