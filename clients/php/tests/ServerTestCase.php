<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

use PHPUnit\Framework\TestCase;

/** Tests that run once on one server and once on the 3+3 cluster (data provider `targets`). */
abstract class ServerTestCase extends TestCase
{
    private static int $names = 0;

    public static function targets(): array
    {
        return ['single' => ['single'], 'cluster' => ['cluster']];
    }

    protected static function client(string $target): \Redis|\RedisCluster
    {
        return $target === 'single' ? Servers::redis(Servers::single()) : Servers::clusterClient();
    }

    /** The address a tool (bfctl, Python) reaches the same target at. */
    protected static function port(string $target): int
    {
        return $target === 'single' ? Servers::single()->port : Servers::cluster()[0]->port;
    }

    protected static function freshName(string $prefix): string
    {
        return sprintf('php-%s:%d:%d', $prefix, getmypid(), self::$names++);
    }

    /** BF.INFO of a key as name => value (status replies read as text). */
    protected static function infoOf(\Redis|\RedisCluster $client, string $key): array
    {
        $client->setOption(\Redis::OPT_REPLY_LITERAL, true);
        try {
            $reply = $client instanceof \RedisCluster
                ? $client->rawCommand($key, 'BF.INFO', $key)
                : $client->rawCommand('BF.INFO', $key);
        } finally {
            $client->setOption(\Redis::OPT_REPLY_LITERAL, false);
        }
        $fields = [];
        for ($i = 0; $i < count($reply); $i += 2) {
            $fields[$reply[$i]] = $reply[$i + 1];
        }
        return $fields;
    }

    /** Sends one command; an error reply comes back as its text, prefixed with "error: ". */
    protected static function raw(\Redis|\RedisCluster $client, string ...$argv): mixed
    {
        $client->clearLastError();
        $reply = $client instanceof \RedisCluster
            ? $client->rawCommand($argv[1], ...$argv)
            : $client->rawCommand(...$argv);
        $error = $client->getLastError();
        return ($reply === false && $error !== null) ? "error: {$error}" : $reply;
    }
}
