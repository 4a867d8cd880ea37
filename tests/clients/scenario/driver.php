<?php

// The scenario's driver for the PHP package (clients/php): reads one JSON request a line on
// stdin, runs it with Rustbloom\PartitionedBloom over phpredis' RedisCluster, and writes one JSON
// answer a line on stdout (the protocol is described in test_scenario.py).
//
// Usage: php driver.php PORT (any node of the cluster).

declare(strict_types=1);

use Rustbloom\Exception\PartitionedBloomException;
use Rustbloom\PartitionedBloom;

// The package's PSR-4 mapping, as its README tells a user without Composer to set up.
spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Rustbloom\\')) {
        $file = __DIR__ . '/../../../clients/php/src/' . str_replace('\\', '/', substr($class, 10)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

/** The item a request describes, as a PHP user would pass it. */
function item(array $spec): mixed
{
    $kind = array_key_first($spec);
    return match ($kind) {
        'text' => $spec['text'],
        'hex' => hex2bin($spec['hex']),
        'float' => (float) $spec['float'],
        'bool' => $spec['bool'],
        'null' => null,
        default => throw new \InvalidArgumentException("unknown item kind {$kind}"),
    };
}

/**
 * The contract's class name: FilterNotFound, PartitionMissing, Descriptor, NodeUnavailable,
 * Server (the package's *Exception classes without the suffix), or TypeError; any other
 * exception by its own class name (a difference the scenario shows).
 */
function failure(\Throwable $e): array
{
    $class = get_class($e);
    if ($e instanceof PartitionedBloomException) {
        $class = preg_replace('/Exception$/', '', substr(strrchr($class, '\\'), 1));
    }
    return ['error' => ['class' => $class, 'message' => $e->getMessage()]];
}

function say(array $answer): void
{
    fwrite(STDOUT, json_encode($answer, JSON_THROW_ON_ERROR | JSON_UNESCAPED_UNICODE) . "\n");
    fflush(STDOUT);
}

/**
 * Adds `count` items `prefix<i>` in batches; after `pause_after` batches says how many were
 * acknowledged and waits for the go-ahead. Answers how many were acknowledged in all.
 */
function load(PartitionedBloom $bloom, array $request): array
{
    $acknowledged = 0;
    for ($start = 0, $batch = 0; $start < $request['count']; $start += $request['batch'], $batch++) {
        if ($batch === $request['pause_after']) {
            say(['paused' => $acknowledged]);
            fgets(STDIN);
        }
        $end = min($start + $request['batch'], $request['count']);
        $items = array_map(fn (int $i) => $request['prefix'] . $i, range($start, $end - 1));
        try {
            $bloom->madd($items);
        } catch (\Throwable $e) {
            return failure($e) + ['acknowledged' => $acknowledged];
        }
        $acknowledged += $end - $start;
    }
    return ['ok' => ['acknowledged' => $acknowledged]];
}

function run(\RedisCluster $client, array $request): array
{
    $bloom = new PartitionedBloom($client, $request['name'], ['retry_for' => (float) ($request['retry_for'] ?? 30)]);
    return match ($request['op']) {
        'reserve' => (function () use ($bloom, $request) {
            $bloom->reserve((float) $request['error_rate'], $request['capacity'], $request['partitions']);
            return ['ok' => null];
        })(),
        'add' => ['ok' => $bloom->madd(array_map('item', $request['items']))],
        'exists' => ['ok' => $bloom->mexists(array_map('item', $request['items']))],
        'drop' => ['ok' => $bloom->drop()],
        'load' => load($bloom, $request),
        default => throw new \InvalidArgumentException("unknown op {$request['op']}"),
    };
}

$client = new \RedisCluster(null, ["127.0.0.1:{$argv[1]}"], 5.0, 5.0);
while (($line = fgets(STDIN)) !== false) {
    $request = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
    try {
        $answer = run($client, $request);
    } catch (\Throwable $e) {
        $answer = failure($e);
    }
    say($answer);
}
