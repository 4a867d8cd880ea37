<?php

declare(strict_types=1);

namespace Rustbloom\Exception;

/** Base class of every error this package throws. */
class PartitionedBloomException extends \RuntimeException
{
}
