<?php

declare(strict_types=1);

namespace Rustbloom\Transport;

/** An error reply, kept as a value in a pipeline's answers. */
final class ReplyError
{
    public function __construct(public readonly string $text)
    {
    }

    /** The text without Redis' generic `ERR ` prefix, as the module wrote it. */
    public function message(): string
    {
        return str_starts_with($this->text, 'ERR ') ? substr($this->text, 4) : $this->text;
    }
}
