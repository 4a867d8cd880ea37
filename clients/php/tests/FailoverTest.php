<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

use PHPUnit\Framework\TestCase;
use Rustbloom\Exception\NodeUnavailableException;
use Rustbloom\PartitionedBloom;

/**
 * The clients' bounded wait (docs/partitions.md, "One contract"): a load in progress when a master
 * dies goes on once its replica took over, or fails with NodeUnavailableException by its deadline;
 * every item acknowledged is there afterwards; where no node serves a partition any more (its
 * replica gone, its master hung) the call fails with NodeUnavailableException by its deadline.
 * Never a hang. Each test has a cluster of its own, since it kills nodes.
 */
final class FailoverTest extends TestCase
{
    public function testALoadThroughAMastersFailoverGoesOnOrFailsByItsDeadline(): void
    {
        $nodes = Servers::startCluster();
        try {
            // The default deadline: a failover on a busy machine may take longer than usual, and
            // phpredis is expected to see it through.
            $retryFor = 30.0;
            $bloom = new PartitionedBloom(self::clientOf($nodes), 'failover', ['retry_for' => $retryFor]);
            $bloom->reserve(0.001, 200_000, 6);
            Servers::waitReplicasSynced($nodes);
            [$victim] = self::masterAndReplica($nodes);
            $items = array_map(fn (int $i) => "f:{$i}", range(0, 59_999));
            $acknowledged = [];
            $failure = null;
            $failedAfter = 0.0;
            foreach (array_chunk($items, 1000) as $n => $chunk) {
                if ($n === 6) {
                    // A tenth of the way in, once the replica has every write acknowledged so far
                    // (replication is asynchronous; losing those would be the server's doing).
                    Servers::waitReplicaCaughtUp($victim);
                    $victim->kill();
                }
                $started = microtime(true);
                try {
                    $bloom->madd($chunk);
                } catch (NodeUnavailableException $e) {
                    [$failure, $failedAfter] = [$e, microtime(true) - $started];
                    break;
                }
                array_push($acknowledged, ...$chunk);
            }
            if ($failure !== null) {
                $this->assertGreaterThanOrEqual($retryFor, $failedAfter, $failure->getMessage());
                $this->assertLessThan($retryFor + 10, $failedAfter, $failure->getMessage());
            }
            // phpredis follows the failover: the load goes on once the replica took over.
            $this->assertNull($failure, $failure?->getMessage() ?? '');
            $reader = new PartitionedBloom(self::clientOf($nodes), 'failover');
            $found = $reader->mexists($acknowledged);
            $this->assertSame([], array_keys($found, false, true), 'acknowledged items missing after the failover');
        } finally {
            foreach ($nodes as $node) {
                $node->stop();
            }
        }
    }

    /**
     * The master hangs rather than dies (its connections stay open, unanswered): phpredis would
     * wait its read timeout (60 s) on it; each attempt is bounded instead, so the deadline holds.
     */
    public function testAPartitionNoNodeServesFailsByTheDeadlineEvenWhenItsMasterHangs(): void
    {
        $nodes = Servers::startCluster();
        try {
            $bloom = new PartitionedBloom(self::clientOf($nodes), 'orphaned', ['retry_for' => 3.0]);
            $bloom->reserve(0.01, 10_000, 6);
            Servers::waitReplicasSynced($nodes);
            [$master, $replica] = self::masterAndReplica($nodes);
            $this->assertNotNull($replica, 'no replica found for the master');
            $replica->kill();
            $master->hang();
            $items = array_map(fn (int $i) => "after:{$i}", range(0, 1999));
            $started = microtime(true);
            try {
                $bloom->madd($items);
                $this->fail('an add to a partition no node serves succeeded');
            } catch (NodeUnavailableException $e) {
                $took = microtime(true) - $started;
                $this->assertStringContainsString('gave up resending', $e->getMessage());
                $this->assertGreaterThanOrEqual(3.0, $took);
                $this->assertLessThan(30.0, $took);
            }
        } finally {
            foreach ($nodes as $node) {
                $node->stop();
            }
        }
    }

    /** A cluster client that starts from every node, as users configure one. */
    private static function clientOf(array $nodes): \RedisCluster
    {
        return new \RedisCluster(null, array_map(fn (ServerNode $n) => "127.0.0.1:{$n->port}", $nodes), 5.0, 60.0);
    }

    /**
     * A master other than the first node, and its replica (null when none is found).
     *
     * @param list<ServerNode> $nodes
     * @return array{0: ServerNode, 1: ?ServerNode}
     */
    private static function masterAndReplica(array $nodes): array
    {
        $master = null;
        foreach (array_slice($nodes, 1) as $node) {
            if (Servers::redis($node)->info('replication')['role'] === 'master') {
                $master = $node;
                break;
            }
        }
        if ($master === null) {
            throw new \RuntimeException('no master among the nodes after the first');
        }
        foreach ($nodes as $node) {
            $info = Servers::redis($node)->info('replication');
            if ($info['role'] === 'slave' && (int) $info['master_port'] === $master->port) {
                return [$master, $node];
            }
        }
        return [$master, null];
    }
}
