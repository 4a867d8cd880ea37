<?php

declare(strict_types=1);

namespace Rustbloom\Exception;

/**
 * The server refused a command (its error text is the message), e.g. `item exists` from a
 * reserve, `non scaling filter is full` from an add, or `item routed to partition j of P, not i`.
 */
final class ServerException extends PartitionedBloomException
{
    public function __construct(string $message, public readonly ?string $key = null)
    {
        parent::__construct($message);
    }
}
