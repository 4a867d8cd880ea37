<?php

declare(strict_types=1);

namespace Rustbloom\Transport;

use Rustbloom\Exception\NodeUnavailableException;
use Rustbloom\Routing;

/**
 * A cluster (phpredis RedisCluster). phpredis' RedisCluster has no pipelines, so the commands of a
 * batch are grouped per master by the cluster's slot map (CLUSTER SLOTS) and pipelined on a
 * connection of our own to each master; a command that meets MOVED or ASK there is sent again
 * through the RedisCluster, which follows the redirection, and the slot map is read again before
 * the next batch.
 */
final class ClusterNodes extends Transport
{
    /** @var array<int, string> slot => "host:port" of its master */
    private array $slotOwners = [];
    private bool $stale = true;
    /** @var array<string, \Redis> */
    private array $connections = [];
    /** @var array<string, true> masters whose connection failed: asked for the slot map last */
    private array $failed = [];
    /** @var callable(string, int): \Redis */
    private $connect;

    /** @param null|callable(string, int): \Redis $connect opens a connection to one master */
    public function __construct(private readonly \RedisCluster $cluster, float $retryForSeconds, ?callable $connect)
    {
        parent::__construct($retryForSeconds);
        $this->connect = $connect ?? static function (string $host, int $port): \Redis {
            $redis = new \Redis();
            $redis->connect($host, $port, self::ATTEMPT_SECONDS);
            return $redis;
        };
    }

    protected function client(): \RedisCluster
    {
        return $this->cluster;
    }

    protected function groupByNode(array $commands, array $indices, float $attemptSeconds): array
    {
        if ($this->stale) {
            $this->readSlotMap($attemptSeconds);
        }
        $groups = [];
        foreach ($indices as $i) {
            $slot = Routing::keySlot($commands[$i][0]);
            $node = $this->slotOwners[$slot] ?? null;
            if ($node === null) {
                $this->stale = true;
                throw new NodeUnavailableException("no master serves slot {$slot} (key {$commands[$i][0]})");
            }
            $groups[$node][] = $i;
        }
        return $groups;
    }

    protected function runOnNode(string $node, array $commands, float $attemptSeconds): array
    {
        $redis = $this->connections[$node] ??= $this->open($node);
        return self::withReadTimeout($redis, $attemptSeconds, fn () => self::pipelineOn($redis, $commands,
            function (string $key, array $argv): mixed {
                // MOVED or ASK, or a refusal: the cluster object follows redirections.
                $this->stale = true;
                return $this->single($key, $argv);
            }));
    }

    protected function forgetNode(string $node): void
    {
        if (isset($this->connections[$node])) {
            try {
                $this->connections[$node]->close();
            } catch (\RedisException) {
                // Already closed: nothing to release.
            }
            unset($this->connections[$node]);
        }
        $this->failed[$node] = true;
        $this->stale = true;
    }

    protected function single(string $key, array $argv): mixed
    {
        $this->cluster->clearLastError();
        $reply = $this->cluster->rawCommand($key, ...$argv);
        $error = $this->cluster->getLastError();
        return ($reply === false && $error !== null) ? new ReplyError($error) : $reply;
    }

    /**
     * On the package's own connection to the key's master, as batches go, not through the
     * RedisCluster: phpredis keeps its connection to a master that died broken ("Unable to send
     * command to the specified node"), even once the cluster is whole again. MOVED or ASK there
     * is followed through the RedisCluster.
     */
    protected function literalOnce(string $key, array $argv, float $attemptSeconds): mixed
    {
        $node = (string) array_key_first($this->groupByNode([[$key, $argv]], [0], $attemptSeconds));
        $redis = $this->connections[$node] ??= $this->open($node);
        try {
            $reply = self::withReadTimeout($redis, $attemptSeconds, fn () => self::withLiteralReplies($redis, function () use ($redis, $argv): mixed {
                $redis->clearLastError();
                $reply = $redis->rawCommand(...$argv);
                $error = $redis->getLastError();
                return ($reply === false && $error !== null) ? new ReplyError($error) : $reply;
            }));
        } catch (\RedisException $e) {
            $this->forgetNode($node);
            throw $e;
        }
        if ($reply instanceof ReplyError && preg_match('/^(MOVED|ASK) /', $reply->text) === 1) {
            $this->stale = true;
            return parent::literalOnce($key, $argv, $attemptSeconds);
        }
        return $reply;
    }

    private function open(string $node): \Redis
    {
        $colon = strrpos($node, ':');
        return ($this->connect)(substr($node, 0, $colon), (int) substr($node, $colon + 1));
    }

    /**
     * The slot map, from the first master that answers CLUSTER SLOTS on a connection of our own,
     * so that a master that hangs holds it for one attempt at most.
     */
    private function readSlotMap(float $attemptSeconds): void
    {
        $last = null;
        $masters = $this->cluster->_masters();
        // Those whose connection failed last: a master that hangs would hold every read.
        usort($masters, fn (array $a, array $b) => isset($this->failed["{$a[0]}:{$a[1]}"]) <=> isset($this->failed["{$b[0]}:{$b[1]}"]));
        foreach ($masters as $master) {
            $node = $master[0] . ':' . $master[1];
            try {
                $redis = $this->connections[$node] ??= $this->open($node);
                $reply = self::withReadTimeout($redis, $attemptSeconds, fn () => $redis->rawCommand('CLUSTER', 'SLOTS'));
            } catch (\RedisException $e) {
                $this->forgetNode($node);
                $last = $e;
                continue;
            }
            if (is_array($reply)) {
                unset($this->failed[$node]);
                $this->slotOwners = self::slotOwners($reply, (string) $master[0]);
                $this->stale = false;
                return;
            }
        }
        throw new NodeUnavailableException(
            'no master answered CLUSTER SLOTS' . ($last ? ': ' . $last->getMessage() : ''),
            0,
            $last,
        );
    }

    /**
     * @param array<mixed> $reply CLUSTER SLOTS: [start, end, [host, port, ...], replicas...]...
     * @return array<int, string>
     */
    private static function slotOwners(array $reply, string $askedHost): array
    {
        $owners = [];
        foreach ($reply as $range) {
            if (!is_array($range) || count($range) < 3 || !is_array($range[2]) || count($range[2]) < 2) {
                continue;
            }
            [$start, $end, [$host, $port]] = $range;
            // An empty host means "the address you reached me at".
            $node = (($host === '' || $host === '?') ? $askedHost : $host) . ':' . $port;
            for ($slot = (int) $start; $slot <= (int) $end && $slot < Routing::SLOTS; $slot++) {
                $owners[$slot] = $node;
            }
        }
        return $owners;
    }
}
