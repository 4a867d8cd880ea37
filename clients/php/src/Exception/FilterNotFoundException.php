<?php

declare(strict_types=1);

namespace Rustbloom\Exception;

/** The logical name holds no filter at all. */
final class FilterNotFoundException extends PartitionedBloomException
{
}
