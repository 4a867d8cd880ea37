<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

/** One server process in its own temporary directory. */
final class ServerNode
{
    /** @var resource|null */
    private $proc = null;

    private function __construct(public readonly string $dir, public int $port = 0)
    {
    }

    public static function start(bool $cluster): self
    {
        $dir = sys_get_temp_dir() . '/rbphp-' . bin2hex(random_bytes(6));
        mkdir($dir, 0700);
        $node = new self($dir);
        for ($attempt = 0; $attempt < 8; $attempt++) {
            $node->port = Servers::freePort($cluster);
            $node->spawn($cluster);
            if ($node->waitPing()) {
                return $node;
            }
            $node->kill();
        }
        $node->stop();
        throw new \RuntimeException(Servers::serverBinary() . " did not start (log in {$dir})");
    }

    private function spawn(bool $cluster): void
    {
        $argv = [Servers::serverBinary(), '--port', (string) $this->port, '--bind', '127.0.0.1',
            '--dir', $this->dir, '--logfile', 'server.log', '--save', '', '--appendonly', 'no',
            '--loadmodule', Servers::modulePath()];
        if ($cluster) {
            array_push($argv, '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
                '--cluster-node-timeout', '2000');
        }
        $null = ['file', '/dev/null', 'r+'];
        $this->proc = proc_open($argv, [0 => $null, 1 => $null, 2 => $null], $pipes, $this->dir) ?: null;
    }

    private function waitPing(): bool
    {
        $deadline = microtime(true) + Servers::startDeadline();
        while (microtime(true) < $deadline) {
            if ($this->proc === null || !proc_get_status($this->proc)['running']) {
                return false;
            }
            try {
                $redis = new \Redis();
                if (@$redis->connect('127.0.0.1', $this->port, 2.0) && $redis->ping()) {
                    $redis->close();
                    return true;
                }
            } catch (\RedisException) {
                // Not listening yet.
            }
            usleep(50_000);
        }
        return false;
    }

    /**
     * Stops the server without closing its connections (SIGSTOP), as a hung machine would: it
     * accepts connections (the kernel does) and answers nothing. stop() still ends it.
     */
    public function hang(): void
    {
        if ($this->proc !== null && proc_get_status($this->proc)['running']) {
            proc_terminate($this->proc, SIGSTOP);
        }
    }

    /** Kills the server at once (SIGKILL), as a crash would; its directory stays until stop(). */
    public function kill(): void
    {
        if ($this->proc !== null) {
            if (proc_get_status($this->proc)['running']) {
                proc_terminate($this->proc, 9);
            }
            proc_close($this->proc);
            $this->proc = null;
        }
    }

    public function stop(): void
    {
        $this->kill();
        if (is_dir($this->dir)) {
            foreach (scandir($this->dir) ?: [] as $entry) {
                if ($entry !== '.' && $entry !== '..') {
                    @unlink("{$this->dir}/{$entry}");
                }
            }
            @rmdir($this->dir);
        }
    }
}
