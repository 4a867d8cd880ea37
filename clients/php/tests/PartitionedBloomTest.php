<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

use Rustbloom\Exception\DescriptorException;
use Rustbloom\Exception\FilterNotFoundException;
use Rustbloom\Exception\NodeUnavailableException;
use Rustbloom\Exception\PartitionMissingException;
use Rustbloom\Exception\ServerException;
use Rustbloom\PartitionedBloom;
use Rustbloom\Routing;

/** PartitionedBloom against a real server and a real 3+3 cluster, each with the module. */
final class PartitionedBloomTest extends ServerTestCase
{
    /** @dataProvider targets */
    public function testReserveWritesDescriptorAndPartitions(string $target): void
    {
        $client = self::client($target);
        $name = self::freshName('reserve');
        $layout = (new PartitionedBloom($client, $name))->reserve(0.01, 60_000, 6);
        $this->assertSame(Routing::partitionKeys($name, 6), $layout->keys);

        // Another client discovers the same layout in one BF.INFO.
        $info = (new PartitionedBloom($client, $name))->info();
        $this->assertSame(6, $info['Partitions']);
        $this->assertSame($layout->routingSeed, $info['Routing seed']);
        $this->assertSame(60_000, $info['Capacity']);
        $this->assertSame(10_000, $info['Partition capacity']);
        $this->assertEqualsWithDelta(0.01, $info['Error rate'], 1e-12);
        $this->assertSame(2, $info['Expansion rate']);
        $this->assertNull($info['Window (ms)']);

        $perNode = [];
        foreach ($layout->keys as $i => $key) {
            $part = self::infoOf($client, $key);
            $this->assertSame($i, $part['Partition']);
            $this->assertSame(6, $part['Partitions']);
            $this->assertSame($layout->routingSeed, (string) $part['Routing seed']);
            $this->assertSame(10_000, $part['Capacity']);
            $node = $client instanceof \RedisCluster ? self::masterOf($client, $key) : 'single';
            $perNode[$node] = ($perNode[$node] ?? 0) + 1;
        }
        // Six partitions over three masters: two on each (one server: all six on it).
        sort($perNode);
        $this->assertSame($target === 'single' ? [6] : [2, 2, 2], $perNode);
    }

    /** @dataProvider targets */
    public function testNonscalingPartitionsAreSizedWithMargin(string $target): void
    {
        $client = self::client($target);
        $name = self::freshName('nonscaling');
        (new PartitionedBloom($client, $name))->reserve(0.001, 60_000, 6, nonscaling: true);
        $info = (new PartitionedBloom($client, $name))->info();
        $this->assertSame(10_549, $info['Partition capacity']);
        $this->assertNull($info['Expansion rate']);
        $this->assertSame(10_549, self::infoOf($client, $info['Partition keys'][0])['Capacity']);
    }

    /** @dataProvider targets */
    public function testReserveRefusesATakenNameAndLeavesNothingBehind(string $target): void
    {
        $client = self::client($target);
        $name = self::freshName('taken');
        $bloom = new PartitionedBloom($client, $name);
        $bloom->reserve(0.01, 1000, 4);
        $bloom->madd(['kept']);
        try {
            (new PartitionedBloom($client, $name))->reserve(0.01, 1000, 4);
            $this->fail('a taken name was reserved again');
        } catch (ServerException $e) {
            $this->assertSame('item exists', $e->getMessage());
        }
        $this->assertTrue($bloom->exists('kept'));

        // One partition key already holds something else: nothing of the new filter remains.
        $other = self::freshName('blocked');
        $keys = Routing::partitionKeys($other, 4);
        $client->set($keys[2], 'in the way');
        try {
            (new PartitionedBloom($client, $other))->reserve(0.01, 1000, 4);
            $this->fail('reserved over a key in the way');
        } catch (ServerException $e) {
            $this->assertStringContainsString('WRONGTYPE', $e->getMessage());
        }
        $this->assertSame([0, 0, 1, 0, 0], array_map(fn ($k) => (int) $client->exists($k), [...$keys, $other]));
    }

    /** @dataProvider targets */
    public function testThirtyThousandItemsAllPresentAndFalsePositivesWithinTheErrorRate(string $target): void
    {
        $client = self::client($target);
        $n = 30_000;
        $bloom = new PartitionedBloom($client, self::freshName('load'));
        $bloom->reserve(0.01, $n, 6, nonscaling: true);
        $members = array_map(fn ($i) => "member:{$i}", range(0, $n - 1));
        $added = [];
        foreach (array_chunk($members, 10_000) as $chunk) {
            array_push($added, ...$bloom->madd($chunk));
        }
        $this->assertCount($n, $added);
        $newCount = count(array_filter($added));
        // An add answers false only for a false positive, at most about ε of them.
        $this->assertGreaterThanOrEqual($n * 0.99, $newCount);

        // Every partition received its share, and the items it counts are the adds answered true.
        $counts = array_map(fn ($k) => self::infoOf($client, $k)['Number of items inserted'], $bloom->partitionKeys());
        $this->assertSame($newCount, array_sum($counts));
        $this->assertGreaterThan($n / 6 * 0.9, min($counts));
        $this->assertLessThan($n / 6 * 1.1, max($counts));

        $this->assertNotContains(false, $bloom->mexists($members));
        $positives = count(array_filter($bloom->mexists(array_map(fn ($i) => "other:{$i}", range(0, 4 * $n - 1)))));
        // 120,000 trials at ε = 1%: mean ≤ 1,200, sd ~ 35.
        $this->assertLessThanOrEqual(0.011 * 4 * $n, $positives);
    }

    /** @dataProvider targets */
    public function testAnswersKeepTheOrderOfTheItems(string $target): void
    {
        $bloom = new PartitionedBloom(self::client($target), self::freshName('order'));
        $bloom->reserve(0.001, 10_000, 8);
        $this->assertSame([true, true, true, false, true, true], $bloom->madd(['a', 'b', '17', 'a', "\x00\xff", '']));
        $this->assertTrue($bloom->add('c'));
        $this->assertFalse($bloom->add('c'));
        $this->assertTrue($bloom->exists('17'));
        $this->assertSame([true, false, true, false, true, true, true],
            $bloom->mexists(["\x00\xff", 'absent-1', 'a', 'absent-2', 'b', 'c', '']));
        $this->assertSame([], $bloom->mexists([]));
        // The clients' one contract (docs/partitions.md): never coerced, not even by PHP's own
        // scalar conversion (1.5 to "1.5", true to "1").
        foreach ([[17, 'int'], [1.5, 'float'], [true, 'bool'], [null, 'null']] as [$bad, $type]) {
            foreach ([fn () => $bloom->mexists([$bad]), fn () => $bloom->add($bad), fn () => $bloom->madd(['before', $bad])] as $call) {
                try {
                    $call();
                    $this->fail('an item of type ' . $type . ' was taken');
                } catch (\TypeError $e) {
                    $this->assertSame('an item must be bytes or a string, not ' . $type, $e->getMessage());
                }
            }
        }
        $this->assertSame([false], $bloom->mexists(['before']));
    }

    /** @dataProvider targets */
    public function testAMisroutedItemIsRefusedByTheServer(string $target): void
    {
        $client = self::client($target);
        $bloom = new PartitionedBloom($client, self::freshName('misrouted'));
        $bloom->reserve(0.01, 1000, 4);
        $keys = $bloom->partitionKeys();
        $right = $bloom->partitionOf('somewhere');
        $wrong = ($right + 1) % 4;
        $this->assertSame("error: ERR item routed to partition {$right} of 4, not {$wrong}",
            self::raw($client, 'BF.ADD', $keys[$wrong], 'somewhere'));
        $belongs = null;
        for ($i = 0; $belongs === null; $i++) {
            if ($bloom->partitionOf("own:{$i}") === $wrong) {
                $belongs = "own:{$i}";
            }
        }
        // A batch holding one misrouted item is refused whole, before it adds anything.
        $this->assertStringContainsString('item routed to partition', (string) self::raw($client, 'BF.MADD', $keys[$wrong], $belongs, 'somewhere'));
        $this->assertSame([false, false], $bloom->mexists(['somewhere', $belongs]));
    }

    /** @dataProvider targets */
    public function testTheLogicalNameRefusesPlainCommands(string $target): void
    {
        $client = self::client($target);
        $name = self::freshName('logical');
        (new PartitionedBloom($client, $name))->reserve(0.01, 1000, 4);
        $this->assertStringContainsString('is a partitioned filter', (string) self::raw($client, 'BF.ADD', $name, 'x'));
        $this->assertStringContainsString('is a partitioned filter', (string) self::raw($client, 'BF.EXISTS', $name, 'x'));
    }

    /** @dataProvider targets */
    public function testADeletedPartitionIsAnErrorNeverAbsent(string $target): void
    {
        $client = self::client($target);
        $bloom = new PartitionedBloom($client, self::freshName('deleted'));
        $bloom->reserve(0.01, 1000, 4);
        $items = array_map(fn ($i) => "item:{$i}", range(0, 199));
        $bloom->madd($items);
        $gone = 1;
        $client->del($bloom->partitionKeys()[$gone]);
        $inGone = array_values(array_filter($items, fn ($i) => $bloom->partitionOf($i) === $gone));
        $elsewhere = array_values(array_filter($items, fn ($i) => $bloom->partitionOf($i) !== $gone));
        $this->assertNotEmpty($inGone);

        foreach ([fn () => $bloom->exists($inGone[0]), fn () => $bloom->mexists($items), fn () => $bloom->add($inGone[0])] as $call) {
            try {
                $call();
                $this->fail('a missing partition answered');
            } catch (PartitionMissingException $e) {
                $this->assertSame($gone, $e->index);
            }
        }
        // The add did not recreate it, and the partitions that are there still answer.
        $this->assertSame(0, (int) $client->exists($bloom->partitionKeys()[$gone]));
        $this->assertNotContains(false, $bloom->mexists($elsewhere));

        // An add names what the other partitions took (the clients' one contract); a lookup does not.
        $later = array_map(fn ($i) => "later:{$i}", range(0, 199));
        $laterElsewhere = array_filter($later, fn ($i) => $bloom->partitionOf($i) !== $gone);
        try {
            $bloom->madd($later);
            $this->fail('an add to a missing partition answered');
        } catch (PartitionMissingException $e) {
            $this->assertSame(count($laterElsewhere), $e->acknowledged);
            $this->assertStringEndsWith(sprintf('; %d items of this call had been acknowledged', count($laterElsewhere)), $e->getMessage());
        }
        try {
            $bloom->mexists($later);
            $this->fail('a lookup on a missing partition answered');
        } catch (PartitionMissingException $e) {
            $this->assertNull($e->acknowledged);
            $this->assertSame(sprintf('partition %d of "%s" is missing (key "%s"): restore it or recreate the filter',
                $gone, $bloom->name, $bloom->partitionKeys()[$gone]), $e->getMessage());
        }
    }

    /** @dataProvider targets */
    public function testMissingFilterPlainFilterAndInsert(string $target): void
    {
        $client = self::client($target);
        $name = self::freshName('insert');
        try {
            (new PartitionedBloom($client, $name))->exists('x');
            $this->fail('a missing filter answered');
        } catch (FilterNotFoundException) {
            $this->addToAssertionCount(1);
        }
        try {
            (new PartitionedBloom($client, $name))->insert(['x'], nocreate: true);
            $this->fail('insert NOCREATE created a filter');
        } catch (FilterNotFoundException) {
            $this->addToAssertionCount(1);
        }
        $this->assertSame([true, true], (new PartitionedBloom($client, $name))->insert(['x', 'y'], 0.001, 500, 4));
        $info = (new PartitionedBloom($client, $name))->info();
        $this->assertSame([4, 500, 0.001], [$info['Partitions'], $info['Capacity'], $info['Error rate']]);
        // Filter there already: the creation options are not used again.
        $this->assertSame([false, true], (new PartitionedBloom($client, $name))->insert(['y', 'z'], partitions: 9));

        $plain = self::freshName('plain');
        self::raw($client, 'BF.RESERVE', $plain, '0.01', '100');
        $this->expectException(DescriptorException::class);
        $this->expectExceptionMessage('not a partitioned filter');
        (new PartitionedBloom($client, $plain))->exists('x');
    }

    /** @dataProvider targets */
    public function testAFullNonscalingPartitionIsAnErrorWithTheServersText(string $target): void
    {
        $bloom = new PartitionedBloom(self::client($target), self::freshName('full'));
        $bloom->reserve(0.01, 5, 1, nonscaling: true);
        try {
            $bloom->madd(array_map(fn ($i) => "item:{$i}", range(0, 99)));
            $this->fail('100 items went into a partition for 7');
        } catch (ServerException $e) {
            $this->assertSame('non scaling filter is full', $e->getMessage());
        }
    }

    /** @dataProvider targets */
    public function testDropDeletesTheDescriptorAndEveryPartition(string $target): void
    {
        $client = self::client($target);
        $name = self::freshName('drop');
        $bloom = new PartitionedBloom($client, $name);
        $keys = $bloom->reserve(0.01, 1000, 5)->keys;
        $bloom->madd(['a', 'b']);
        $this->assertSame(6, $bloom->drop());
        $this->assertSame([0, 0, 0, 0, 0, 0], array_map(fn ($k) => (int) $client->exists($k), [$name, ...$keys]));
        $this->expectException(FilterNotFoundException::class);
        $bloom->exists('a');
    }

    /**
     * A Redis connected with phpredis' defaults (no read timeout set, as the README's example
     * connects) works through every call, and stays usable for the caller's own commands.
     */
    public function testARedisConnectedWithoutReadTimeoutStaysUsable(): void
    {
        $redis = new \Redis();
        $redis->connect('127.0.0.1', Servers::single()->port);
        $bloom = new PartitionedBloom($redis, self::freshName('default-timeout'));
        $bloom->reserve(0.01, 1000, 4);
        $this->assertSame([true, true], $bloom->madd(['a', 'b']));
        $this->assertSame([true, false], $bloom->mexists(['a', 'zz']));
        $this->assertSame(4, $bloom->info()['Partitions']);
        $this->assertTrue($redis->set('php-own-command', 'x'));
        $this->assertSame(5, $bloom->drop());
        $this->assertSame(1, $redis->del('php-own-command'));
    }

    public function testAnUnreachableMasterIsAnErrorNeverAbsent(): void
    {
        $client = self::client('cluster');
        $name = self::freshName('unreachable');
        (new PartitionedBloom($client, $name))->reserve(0.01, 1000, 6);
        $dead = Servers::freePort(false);
        $first = self::masterOf($client, Routing::partitionKeys($name, 6)[0]);
        // Every connection to the master of partition 0 goes to a port where nothing listens.
        $bloom = new PartitionedBloom($client, $name, ['retry_for' => 0.3, 'connect' => function (string $host, int $port) use ($first, $dead) {
            $redis = new \Redis();
            $redis->connect($host, "{$host}:{$port}" === $first ? $dead : $port, 1.0);
            return $redis;
        }]);
        $items = array_map(fn ($i) => "item:{$i}", range(0, 99));
        foreach ([fn () => $bloom->mexists($items), fn () => $bloom->madd($items)] as $call) {
            try {
                $call();
                $this->fail('items on an unreachable master answered');
            } catch (NodeUnavailableException $e) {
                $this->assertStringContainsString('gave up resending', $e->getMessage());
            }
        }
    }

    /** @dataProvider targets */
    public function testABatchWhoseConnectionDroppedIsResent(string $target): void
    {
        $client = self::client($target);
        $bloom = new PartitionedBloom($client, self::freshName('dropped'));
        $bloom->reserve(0.01, 1000, 6);
        $items = array_map(fn ($i) => "item:{$i}", range(0, 299));
        $this->assertNotContains(false, $bloom->madd($items));
        // Every client connection of every node is closed under the package's feet.
        foreach ($target === 'single' ? [Servers::single()] : Servers::cluster() as $node) {
            Servers::redis($node)->rawCommand('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
        }
        $this->assertNotContains(false, $bloom->mexists($items));
    }

    private static function masterOf(\RedisCluster $client, string $key): string
    {
        $slot = Routing::keySlot($key);
        foreach ($client->rawCommand($client->_masters()[0], 'CLUSTER', 'SLOTS') as [$start, $end, [$host, $port]]) {
            if ($slot >= $start && $slot <= $end) {
                return "{$host}:{$port}";
            }
        }
        throw new \RuntimeException("no master for slot {$slot}");
    }
}
