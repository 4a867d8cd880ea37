<?php

declare(strict_types=1);

namespace Rustbloom\Transport;

/** One server (phpredis Redis): every key on the same node, one pipeline per batch. */
final class SingleServer extends Transport
{
    private const NODE = 'server';

    public function __construct(private readonly \Redis $redis, float $retryForSeconds)
    {
        parent::__construct($retryForSeconds);
    }

    protected function client(): \Redis
    {
        return $this->redis;
    }

    protected function groupByNode(array $commands, array $indices): array
    {
        return [self::NODE => $indices];
    }

    protected function runOnNode(string $node, array $commands): array
    {
        return self::pipelineOn($this->redis, $commands, fn (string $key, array $argv) => $this->single($key, $argv));
    }

    protected function forgetNode(string $node): void
    {
        // phpredis reconnects a Redis object by itself at its next command.
    }

    protected function single(string $key, array $argv): mixed
    {
        $this->redis->clearLastError();
        $reply = $this->redis->rawCommand(...$argv);
        $error = $this->redis->getLastError();
        return ($reply === false && $error !== null) ? new ReplyError($error) : $reply;
    }
}
