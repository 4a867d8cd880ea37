<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

/**
 * The servers of the tests: one server, and a cluster of 3 masters + 3 replicas, each with the
 * rustbloom module loaded, on free ports and in temporary directories of their own. Each is
 * started on first use and stopped when the test process ends, also when a test fails.
 *
 * The server binary is $RUSTBLOOM_SERVER (default: redis-server), the module $RUSTBLOOM_MODULE
 * (default: target/release/librustbloom.so of this repository).
 */
final class Servers
{
    // The cluster bus listens on port + 10000, which must stay below 65536.
    private const MAX_NODE_PORT = 55535;
    private const START_DEADLINE_SECONDS = 30;
    private const CLUSTER_DEADLINE_SECONDS = 60;

    private static ?ServerNode $single = null;
    /** @var list<ServerNode>|null */
    private static ?array $cluster = null;
    private static bool $stopRegistered = false;

    public static function root(): string
    {
        return dirname(__DIR__, 3);
    }

    public static function single(): ServerNode
    {
        self::registerStop();
        return self::$single ??= ServerNode::start(false);
    }

    /** @return list<ServerNode> the cluster's six nodes, started and joined on first use */
    public static function cluster(): array
    {
        self::registerStop();
        if (self::$cluster === null) {
            $nodes = [];
            // Registered before the nodes start, so a failed start still stops the ones that run.
            self::$cluster = &$nodes;
            self::startClusterInto($nodes);
            unset($nodes);
        }
        return self::$cluster;
    }

    /**
     * A 3+3 cluster of its own, for a test that kills nodes: the caller stops its nodes (a start
     * that fails stops the ones it started).
     *
     * @return list<ServerNode>
     */
    public static function startCluster(): array
    {
        $nodes = [];
        try {
            self::startClusterInto($nodes);
        } catch (\Throwable $e) {
            foreach ($nodes as $node) {
                $node->stop();
            }
            throw $e;
        }
        return $nodes;
    }

    /** Until every replica's link to its master is up (a replica that never synced does not take over). */
    public static function waitReplicasSynced(array $nodes): void
    {
        $deadline = microtime(true) + self::CLUSTER_DEADLINE_SECONDS;
        while (microtime(true) < $deadline) {
            $links = [];
            foreach ($nodes as $node) {
                $info = self::redis($node)->info('replication');
                if (($info['role'] ?? '') === 'slave') {
                    $links[] = $info['master_link_status'] ?? '';
                }
            }
            if (count($links) === intdiv(count($nodes), 2) && array_unique($links) === ['up']) {
                return;
            }
            usleep(100_000);
        }
        throw new \RuntimeException('the replicas did not sync');
    }

    /**
     * Until $master's replica has every write the master has (replication is asynchronous: a
     * write acknowledged just before a master dies may not have reached it).
     */
    public static function waitReplicaCaughtUp(ServerNode $master): void
    {
        $deadline = microtime(true) + self::CLUSTER_DEADLINE_SECONDS;
        while (microtime(true) < $deadline) {
            $info = self::redis($master)->info('replication');
            $offset = (string) ($info['master_repl_offset'] ?? '');
            if (preg_match('/offset=(\d+)/', (string) ($info['slave0'] ?? ''), $m) && $m[1] === $offset) {
                return;
            }
            usleep(50_000);
        }
        throw new \RuntimeException("the replica of 127.0.0.1:{$master->port} did not catch up");
    }

    /** @param list<ServerNode> $nodes filled as they start */
    private static function startClusterInto(array &$nodes): void
    {
        for ($i = 0; $i < 6; $i++) {
            $nodes[] = ServerNode::start(true);
        }
        $addresses = array_map(fn (ServerNode $n) => "127.0.0.1:{$n->port}", $nodes);
        $out = self::run(array_merge(['redis-cli', '--cluster', 'create'], $addresses,
            ['--cluster-replicas', '1', '--cluster-yes']));
        if ($out['status'] !== 0) {
            throw new \RuntimeException("redis-cli --cluster create failed: {$out['output']}");
        }
        self::waitClusterOk($nodes);
    }

    public static function redis(ServerNode $node): \Redis
    {
        $redis = new \Redis();
        $redis->connect('127.0.0.1', $node->port, 5.0);
        $redis->setOption(\Redis::OPT_READ_TIMEOUT, 60);
        return $redis;
    }

    public static function clusterClient(): \RedisCluster
    {
        $nodes = self::cluster();
        return new \RedisCluster(null, ["127.0.0.1:{$nodes[0]->port}"], 5.0, 60.0);
    }

    public static function modulePath(): string
    {
        $path = getenv('RUSTBLOOM_MODULE') ?: self::root() . '/target/release/librustbloom.so';
        if (!is_file($path)) {
            throw new \RuntimeException("module not found at {$path}: run `make build` or set RUSTBLOOM_MODULE");
        }
        return (string) realpath($path);
    }

    public static function serverBinary(): string
    {
        return getenv('RUSTBLOOM_SERVER') ?: 'redis-server';
    }

    /** A free loopback port; for a cluster node one ≤ 55535 whose bus port (+10000) is free. */
    public static function freePort(bool $clusterBus): int
    {
        for ($attempt = 0; $attempt < 200; $attempt++) {
            $socket = stream_socket_server('tcp://127.0.0.1:0');
            $port = (int) substr((string) stream_socket_get_name($socket, false), strlen('127.0.0.1:'));
            fclose($socket);
            if (!$clusterBus) {
                return $port;
            }
            $bus = @stream_socket_server('tcp://127.0.0.1:' . ($port + 10000));
            if ($port <= self::MAX_NODE_PORT && $bus !== false) {
                fclose($bus);
                return $port;
            }
        }
        throw new \RuntimeException('no free port pair (p, p + 10000) on loopback');
    }

    /**
     * @param list<string> $argv
     * @param ?string $cwd the directory it runs in (default: the test process's)
     * @return array{status: int, output: string, stderr: string}
     */
    public static function run(array $argv, string $stdin = '', array $env = [], ?string $cwd = null): array
    {
        $proc = proc_open($argv, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, $cwd,
            $env === [] ? null : array_merge(getenv(), $env));
        if ($proc === false) {
            throw new \RuntimeException('cannot run ' . $argv[0]);
        }
        // Written in full before reading: the tools read all their input before answering much.
        $stdout = '';
        stream_set_blocking($pipes[1], false);
        $offset = 0;
        while ($offset < strlen($stdin)) {
            $written = fwrite($pipes[0], substr($stdin, $offset, 65536));
            if ($written === false) {
                break;
            }
            $offset += $written;
            $stdout .= (string) stream_get_contents($pipes[1]);
        }
        fclose($pipes[0]);
        stream_set_blocking($pipes[1], true);
        $stdout .= (string) stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        return ['status' => proc_close($proc), 'output' => $stdout, 'stderr' => $stderr];
    }

    /** @param list<ServerNode> $nodes */
    private static function waitClusterOk(array $nodes): void
    {
        $deadline = microtime(true) + self::CLUSTER_DEADLINE_SECONDS;
        $last = '';
        while (microtime(true) < $deadline) {
            $ok = true;
            foreach ($nodes as $node) {
                $info = (string) self::redis($node)->rawCommand('CLUSTER', 'INFO');
                $last = $info;
                if (!str_contains($info, 'cluster_state:ok')
                    || !preg_match('/cluster_known_nodes:' . count($nodes) . '\b/', $info)) {
                    $ok = false;
                    break;
                }
            }
            if ($ok) {
                return;
            }
            usleep(100_000);
        }
        throw new \RuntimeException("the cluster did not reach cluster_state:ok: {$last}");
    }

    private static function registerStop(): void
    {
        if (!self::$stopRegistered) {
            self::$stopRegistered = true;
            register_shutdown_function([self::class, 'stopAll']);
        }
    }

    public static function stopAll(): void
    {
        self::$single?->stop();
        foreach (self::$cluster ?? [] as $node) {
            $node->stop();
        }
        self::$single = null;
        self::$cluster = null;
    }

    public static function startDeadline(): int
    {
        return self::START_DEADLINE_SECONDS;
    }
}
