<?php

declare(strict_types=1);

namespace Rustbloom;

use Rustbloom\Exception\DescriptorException;
use Rustbloom\Exception\FilterNotFoundException;
use Rustbloom\Exception\NodeUnavailableException;
use Rustbloom\Exception\PartitionMissingException;
use Rustbloom\Exception\ServerException;
use Rustbloom\Transport\ClusterNodes;
use Rustbloom\Transport\ReplyError;
use Rustbloom\Transport\SingleServer;
use Rustbloom\Transport\Transport;

/**
 * One Bloom filter over P partition keys, for the rustbloom module (docs/partitions.md).
 *
 * Each item goes to the one partition a seeded hash of it picks, so an add or a lookup touches
 * one key, and the partitions sit on evenly spaced cluster slots so that a cluster's masters share
 * them. Batches are grouped per partition and pipelined (per master on a cluster); answers come
 * back in the order of the items. Items are strings (bytes), routed by their bytes; anything else
 * is a TypeError (never coerced).
 *
 * The layout (partition count, routing seed, keys) is read from `BF.INFO name` on first use and
 * kept; call refresh() after the filter is deleted and recreated under the same name.
 *
 * Options: `retry_for` (seconds, default 30): how long a batch of lookups or adds whose reply was
 * lost is sent again (re-adding an item leaves the filter as it was, but the "new" answers of a
 * resent add may undercount); `connect` (cluster only): fn(string $host, int $port): \Redis that
 * opens a connection to a master, for passwords or timeouts. Each attempt waits at most
 * Transport::ATTEMPT_SECONDS (5 s) for a reply (a shorter read timeout of the connection kept),
 * so that a master that hangs does not hold a batch past the deadline.
 */
final class PartitionedBloom
{
    /** Items per BF.INSERT / BF.MEXISTS command; a bigger batch becomes several, all pipelined. */
    public const CHUNK_ITEMS = 1000;
    /** BF.INSERT's defaults when it creates a filter, as in RedisBloom. */
    public const DEFAULT_ERROR_RATE = 0.01;
    public const DEFAULT_CAPACITY = 100;

    private readonly Transport $transport;
    private ?Layout $layout = null;
    private int $seedBits = 0;

    /** @param array{retry_for?: float, connect?: callable(string, int): \Redis} $options */
    public function __construct(\Redis|\RedisCluster $client, public readonly string $name, array $options = [])
    {
        $retryFor = (float) ($options['retry_for'] ?? 30.0);
        $this->transport = $client instanceof \RedisCluster
            ? new ClusterNodes($client, $retryFor, $options['connect'] ?? null)
            : new SingleServer($client, $retryFor);
    }

    /** The filter's layout, read from the server on first use. */
    public function layout(): Layout
    {
        return $this->layout ?? $this->refresh();
    }

    /** @return list<string> the P partition keys, in partition order */
    public function partitionKeys(): array
    {
        return $this->layout()->keys;
    }

    /** The partition that holds $item. */
    public function partitionOf(mixed $item): int
    {
        $layout = $this->layout();
        return Routing::partitionOf(self::itemBytes($item), $this->seedBits, $layout->partitions);
    }

    /** Reads the layout again from `BF.INFO name` (one round trip). */
    public function refresh(): Layout
    {
        $reply = $this->transport->literalCommand($this->name, ['BF.INFO', $this->name], true);
        if ($reply instanceof ReplyError) {
            if ($reply->message() === 'not found') {
                throw new FilterNotFoundException('no filter named ' . self::quote($this->name));
            }
            throw new ServerException($reply->message(), $this->name);
        }
        $this->layout = $this->layoutFromInfo(self::infoFields($reply));
        $this->seedBits = Routing::u64FromDecimal($this->layout->routingSeed);
        return $this->layout;
    }

    /**
     * BF.INFO of the logical name; also refreshes the layout. Keys: `Partitions`, `Routing seed`
     * (decimal string), `Capacity`, `Partition capacity`, `Error rate`, `Expansion rate` (null
     * when NONSCALING or WINDOW), `Window (ms)` (null unless WINDOW), `Partition keys`.
     *
     * @return array<string, mixed>
     */
    public function info(): array
    {
        $layout = $this->refresh();
        return [
            'Partitions' => $layout->partitions,
            'Routing seed' => $layout->routingSeed,
            'Capacity' => $layout->capacity,
            'Partition capacity' => $layout->partitionCapacity,
            'Error rate' => $layout->errorRate,
            'Expansion rate' => $layout->expansion,
            'Window (ms)' => $layout->windowMs,
            'Partition keys' => $layout->keys,
        ];
    }

    /**
     * Creates the filter: $capacity items at false-positive rate $error over $partitions keys,
     * each a filter of the same kind (scaling with $expansion, NONSCALING, or WINDOW $windowMs).
     *
     * The partitions are created first, then the descriptor, so that a descriptor implies its
     * partitions. When a step is refused, the partitions this call created are deleted again and
     * the server's error is thrown (`item exists` when the name or a partition is taken). On a
     * cluster choose $partitions ≥ 2 × masters, so that a reshard moves whole partitions.
     */
    public function reserve(
        float $error,
        int $capacity,
        int $partitions,
        bool $nonscaling = false,
        ?int $expansion = null,
        ?int $windowMs = null,
    ): Layout {
        $perPartition = Routing::partitionCapacity($capacity, $partitions, $nonscaling);
        $options = [];
        if ($nonscaling) {
            $options[] = 'NONSCALING';
        }
        if ($expansion !== null) {
            array_push($options, 'EXPANSION', (string) $expansion);
        }
        if ($windowMs !== null) {
            array_push($options, 'WINDOW', (string) $windowMs);
        }
        $seed = Routing::u64ToDecimal(random_int(PHP_INT_MIN, PHP_INT_MAX));
        $rate = json_encode($error);
        $commands = [];
        foreach (Routing::partitionKeys($this->name, $partitions) as $i => $key) {
            $commands[] = [$key, ['BF.RESERVE', $key, $rate, (string) $perPartition, ...$options,
                'PARTITION', (string) $i, (string) $partitions, $seed]];
        }
        // Not resent when a reply is lost: a second BF.RESERVE of a created partition is refused.
        $replies = $this->transport->pipeline($commands, false);
        $created = [];
        $failure = null;
        foreach ($replies as $n => $reply) {
            if ($reply instanceof ReplyError) {
                $failure ??= new ServerException($reply->message(), $commands[$n][0]);
            } else {
                $created[] = $commands[$n][0];
            }
        }
        if ($failure === null) {
            // Not resent either: a lost reply is a NodeUnavailableException, after the cleanup.
            try {
                $reply = $this->transport->literalCommand($this->name, ['BF.RESERVE', $this->name, $rate,
                    (string) $capacity, 'PARTITIONS', (string) $partitions, $seed, ...$options], false);
                if ($reply instanceof ReplyError) {
                    $failure = new ServerException($reply->message(), $this->name);
                }
            } catch (NodeUnavailableException $e) {
                $failure = $e;
            }
        }
        if ($failure !== null) {
            $this->transport->pipeline(array_map(fn ($k) => [$k, ['DEL', $k]], $created), true);
            throw $failure;
        }
        // Read back what the server recorded (its default expansion, its rounding of ε).
        return $this->refresh();
    }

    /** Adds one item; true when it was new (no false positive said it was there). */
    public function add(mixed $item): bool
    {
        return $this->madd([$item])[0];
    }

    /**
     * Adds items; one answer per item, in order: true when the item was new. Sent as
     * `BF.INSERT key NOCREATE ITEMS ...`, so a partition that is gone throws
     * PartitionMissingException and is never recreated empty.
     *
     * @param list<string> $items
     * @return list<bool>
     */
    public function madd(array $items): array
    {
        return $this->perPartition($items, ['BF.INSERT', 'NOCREATE', 'ITEMS'], false);
    }

    /**
     * Adds items, first creating the filter when there is none (as BF.INSERT does). Creation
     * needs $partitions; $error and $capacity default to BF.INSERT's 0.01 and 100. With $nocreate
     * a missing filter throws FilterNotFoundException. When another client creates the same name
     * at the same moment, this one uses its filter.
     *
     * @param list<string> $items
     * @return list<bool>
     */
    public function insert(
        array $items,
        ?float $error = null,
        ?int $capacity = null,
        ?int $partitions = null,
        bool $nonscaling = false,
        ?int $expansion = null,
        ?int $windowMs = null,
        bool $nocreate = false,
    ): array {
        if (!$nocreate && $this->layout === null) {
            try {
                $this->refresh();
            } catch (FilterNotFoundException) {
                if ($partitions === null) {
                    throw new \InvalidArgumentException(
                        'no filter named ' . self::quote($this->name) . ': creating it needs $partitions'
                    );
                }
                try {
                    $this->reserve($error ?? self::DEFAULT_ERROR_RATE, $capacity ?? self::DEFAULT_CAPACITY,
                        $partitions, $nonscaling, $expansion, $windowMs);
                } catch (ServerException $e) {
                    if ($e->getMessage() !== 'item exists') {
                        throw $e;
                    }
                    $this->refresh();
                }
            }
        }
        return $this->madd($items);
    }

    /** True when $item may have been added (false positives at the error rate). */
    public function exists(mixed $item): bool
    {
        return $this->mexists([$item])[0];
    }

    /**
     * Looks items up; one answer per item, in order. Each partition's lookup is preceded by
     * `EXISTS key` in the same pipeline, so a deleted partition throws PartitionMissingException
     * instead of answering "absent".
     *
     * @param list<string> $items
     * @return list<bool>
     */
    public function mexists(array $items): array
    {
        return $this->perPartition($items, ['BF.MEXISTS'], true);
    }

    /**
     * Deletes the filter: the descriptor first (a descriptor implies its partitions), then every
     * partition. Returns how many keys were deleted.
     */
    public function drop(): int
    {
        $keys = $this->layout()->keys;
        $this->layout = null;
        $deleted = 0;
        foreach ([[$this->name], $keys] as $batch) {
            foreach ($this->transport->pipeline(array_map(fn ($k) => [$k, ['DEL', $k]], $batch), true) as $n => $reply) {
                if ($reply instanceof ReplyError) {
                    throw new ServerException($reply->message(), $batch[$n]);
                }
                $deleted += (int) $reply;
            }
        }
        return $deleted;
    }

    /**
     * Sends `command key flags... chunk` for each partition's items, all pipelined, and puts the
     * answers back in the items' order.
     *
     * @param array<string> $items
     * @param list<string> $command the command and the flags before the items
     * @return array<bool> one answer per item, under the item's own index
     */
    private function perPartition(array $items, array $command, bool $checkExists): array
    {
        if ($items === []) {
            return [];
        }
        $layout = $this->layout();
        [$commands, $plan] = $this->commandsFor($layout, $this->route($layout, $items), $command, $checkExists);
        $answers = array_fill_keys(array_keys($items), false);
        $replies = $this->transport->pipeline($commands, true);
        $this->throwIfAPartitionIsMissing($layout, $plan, $replies, $checkExists);
        foreach ($replies as $n => $reply) {
            [$part, $answered] = $plan[$n];
            $key = $layout->keys[$part];
            if ($reply instanceof ReplyError) {
                throw new ServerException($reply->message(), $key);
            }
            if ($answered === null) {
                continue;
            }
            if (is_array($reply) && $reply !== [] && count($reply) <= count($answered) && end($reply) instanceof ReplyError) {
                // The server stopped at an item it refused: `non scaling filter is full`.
                throw new ServerException(end($reply)->message(), $key);
            }
            if (!is_array($reply) || count($reply) !== count($answered)) {
                throw new ServerException(sprintf('%s on %s answered %d items with %s',
                    $command[0], self::quote($key), count($answered), json_encode($reply)), $key);
            }
            foreach ($answered as $k => $position) {
                if ($reply[$k] !== 0 && $reply[$k] !== 1) {
                    throw new ServerException(sprintf('%s on %s answered %s for an item',
                        $command[0], self::quote($key), json_encode($reply[$k])), $key);
                }
                $answers[$position] = $reply[$k] === 1;
            }
        }
        return $answers;
    }

    /**
     * A partition that is gone (an add's `not found`, a lookup's `EXISTS` 0) throws, with the
     * count of items the other partitions of an add took (they were added: the caller may skip
     * them on a retry).
     *
     * @param list<array{0: int, 1: ?list<int|string>}> $plan
     * @param array<int, mixed> $replies
     */
    private function throwIfAPartitionIsMissing(Layout $layout, array $plan, array $replies, bool $checkExists): void
    {
        foreach ($replies as $n => $reply) {
            [$part, $answered] = $plan[$n];
            $gone = ($reply instanceof ReplyError && $reply->message() === 'not found')
                || ($answered === null && $reply === 0);
            if (!$gone) {
                continue;
            }
            $acknowledged = null;
            if (!$checkExists) {
                $acknowledged = 0;
                foreach ($replies as $m => $other) {
                    if ($plan[$m][1] !== null && is_array($other)) {
                        $acknowledged += count($plan[$m][1]);
                    }
                }
            }
            throw new PartitionMissingException($this->name, $part, $layout->keys[$part], $acknowledged);
        }
    }

    /**
     * Each item's partition: partition => [item positions, items as sent]. Routing::partitionOf
     * inlined, since this loop is the client's share of a bulk load.
     *
     * @param array<string> $items
     * @return array<int, array{0: list<int|string>, 1: list<string>}>
     */
    private function route(Layout $layout, array $items): array
    {
        $partitions = $layout->partitions;
        $hashOptions = ['seed' => $this->seedBits];
        $routed = [];
        foreach ($items as $position => $item) {
            $item = self::itemBytes($item);
            $h = unpack('J', hash('xxh3', $item, true, $hashOptions))[1];
            $part = ((($h >> 32) & 0xFFFFFFFF) * $partitions + ((($h & 0xFFFFFFFF) * $partitions) >> 32)) >> 32;
            $routed[$part][0][] = $position;
            $routed[$part][1][] = $item;
        }
        return $routed;
    }

    /**
     * The commands of a batch, and for each one the partition it goes to and the item positions
     * it answers (null for the EXISTS that precedes a partition's lookups).
     *
     * @param array<int, array{0: list<int|string>, 1: list<string>}> $routed
     * @param list<string> $command
     * @return array{0: list<array{0: string, 1: list<string>}>, 1: list<array{0: int, 1: list<int|string>|null}>}
     */
    private function commandsFor(Layout $layout, array $routed, array $command, bool $checkExists): array
    {
        $commands = [];
        $plan = [];
        foreach ($routed as $part => [$positions, $texts]) {
            $key = $layout->keys[$part];
            if ($checkExists) {
                $commands[] = [$key, ['EXISTS', $key]];
                $plan[] = [$part, null];
            }
            $head = [$command[0], $key, ...array_slice($command, 1)];
            for ($start = 0, $count = count($positions); $start < $count; $start += self::CHUNK_ITEMS) {
                $commands[] = [$key, [...$head, ...array_slice($texts, $start, self::CHUNK_ITEMS)]];
                $plan[] = [$part, array_slice($positions, $start, self::CHUNK_ITEMS)];
            }
        }
        return [$commands, $plan];
    }

    /**
     * BF.INFO's answer (read with OPT_REPLY_LITERAL) as name => value.
     *
     * @return array<string, mixed>
     */
    private static function infoFields(mixed $reply): array
    {
        if (!is_array($reply) || count($reply) % 2 !== 0) {
            throw new DescriptorException('BF.INFO answered ' . json_encode($reply));
        }
        $fields = [];
        for ($i = 0; $i < count($reply); $i += 2) {
            $fields[(string) $reply[$i]] = $reply[$i + 1];
        }
        return $fields;
    }

    /** @param array<string, mixed> $fields */
    private function layoutFromInfo(array $fields): Layout
    {
        if (!array_key_exists('Partition keys', $fields)) {
            throw new DescriptorException(self::quote($this->name) . ' is not a partitioned filter');
        }
        $partitions = self::intField($fields, 'Partitions', false);
        $seed = (string) ($fields['Routing seed'] ?? '');
        try {
            Routing::checkPartitions($partitions);
            Routing::u64FromDecimal($seed);
        } catch (\InvalidArgumentException $e) {
            throw new DescriptorException('descriptor of ' . self::quote($this->name) . ': ' . $e->getMessage());
        }
        $keys = Routing::partitionKeys($this->name, $partitions);
        $listed = $fields['Partition keys'];
        if (!is_array($listed) || array_map('strval', $listed) !== $keys) {
            throw new DescriptorException('the descriptor of ' . self::quote($this->name)
                . ' lists partition keys other than docs/partitions.md gives');
        }
        $rate = $fields['Error rate'] ?? null;
        if (!is_numeric($rate)) {
            throw new DescriptorException('bad error rate in ' . self::quote($this->name));
        }
        return new Layout(
            $partitions,
            $seed,
            self::intField($fields, 'Capacity', false),
            self::intField($fields, 'Partition capacity', false),
            (float) $rate,
            self::intField($fields, 'Expansion rate', true),
            self::intField($fields, 'Window (ms)', true),
            $keys,
        );
    }

    /** @param array<string, mixed> $fields */
    private static function intField(array $fields, string $name, bool $nullable): ?int
    {
        $value = $fields[$name] ?? null;
        // phpredis reads a nil reply as false.
        if ($nullable && ($value === false || $value === null)) {
            return null;
        }
        if (is_int($value)) {
            return $value;
        }
        if (is_string($value) && preg_match('/^-?[0-9]{1,18}$/D', $value)) {
            return (int) $value;
        }
        throw new DescriptorException("BF.INFO field '{$name}' is not an integer: " . json_encode($value));
    }

    /**
     * An item's bytes by the clients' one rule (docs/partitions.md, "One contract"): a PHP string
     * is the item's bytes; anything else (int, float, bool, null, ...) is refused, never coerced.
     * The parameters that take items are `mixed` so that a caller without strict_types gets this
     * error rather than PHP's silent conversion (1.5 to "1.5", true to "1").
     */
    private static function itemBytes(mixed $item): string
    {
        if (!is_string($item)) {
            throw new \TypeError('an item must be bytes or a string, not ' . get_debug_type($item));
        }
        return $item;
    }

    private static function quote(string $bytes): string
    {
        return (string) json_encode($bytes, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES);
    }
}
