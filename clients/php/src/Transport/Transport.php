<?php

declare(strict_types=1);

namespace Rustbloom\Transport;

use Rustbloom\Exception\NodeUnavailableException;

/**
 * Sends commands to the node that holds each one's key, pipelined per node, and answers in the
 * commands' order with error replies as ReplyError values.
 *
 * A node whose reply is lost (connection dropped, failover) gets its commands again until the
 * deadline, but only when the caller says resending them is harmless; otherwise, and after the
 * deadline, NodeUnavailableException.
 */
abstract class Transport
{
    private const RESEND_PAUSE_MICROS = 100_000;
    /**
     * The longest one attempt waits for a reply before it counts as lost (as in the Node
     * package): a master that hangs rather than dies would otherwise hold a batch for phpredis'
     * read timeout (default_socket_timeout, 60 s), past the deadline.
     */
    public const ATTEMPT_SECONDS = 5.0;
    // The shortest read timeout an attempt gets, close to the deadline (phpredis reads 0 as none).
    private const MIN_ATTEMPT_SECONDS = 0.1;

    public function __construct(private readonly float $retryForSeconds)
    {
    }

    /**
     * @param list<array{0: string, 1: list<string>}> $commands [key, [command, args...]]
     * @return list<mixed> one answer per command; an error reply as a ReplyError
     */
    public function pipeline(array $commands, bool $resendable): array
    {
        $answers = [];
        $pending = array_keys($commands);
        $deadline = microtime(true) + $this->retryForSeconds;
        while ($pending !== []) {
            $lost = [];
            $failure = null;
            try {
                $groups = $this->groupByNode($commands, $pending, self::attemptSeconds($deadline));
            } catch (NodeUnavailableException $e) {
                // No slot map, or a slot without a master: nothing was sent, so whatever the
                // commands they are tried again until the deadline.
                if (microtime(true) > $deadline) {
                    throw new NodeUnavailableException(
                        'gave up resending after ' . $this->retryForSeconds . 's: ' . $e->getMessage(), 0, $e);
                }
                usleep(self::RESEND_PAUSE_MICROS);
                continue;
            }
            foreach ($groups as $node => $indices) {
                try {
                    $replies = $this->runOnNode($node, array_map(fn ($i) => $commands[$i], $indices),
                        self::attemptSeconds($deadline));
                    foreach ($indices as $n => $i) {
                        $answers[$i] = $replies[$n];
                    }
                } catch (\RedisException|\RedisClusterException|NodeUnavailableException $e) {
                    $this->forgetNode($node);
                    array_push($lost, ...$indices);
                    $failure = $e;
                }
            }
            if ($lost !== [] && (!$resendable || microtime(true) > $deadline)) {
                throw new NodeUnavailableException(
                    ($resendable ? 'gave up resending after ' . $this->retryForSeconds . 's: '
                        : 'the reply was lost and the command is not resent: ') . $failure->getMessage(),
                    0,
                    $failure,
                );
            }
            if ($lost !== []) {
                usleep(self::RESEND_PAUSE_MICROS);
            }
            $pending = $lost;
        }
        ksort($answers);
        return $answers;
    }

    /** How long the next attempt may wait for a reply: ATTEMPT_SECONDS, less near the deadline. */
    private static function attemptSeconds(float $deadline): float
    {
        return max(self::MIN_ATTEMPT_SECONDS, min(self::ATTEMPT_SECONDS, $deadline - microtime(true)));
    }

    /**
     * Runs $run with $redis' read timeout at most $seconds (a shorter one of the caller's kept),
     * and restores the caller's afterwards.
     *
     * @template T
     * @param callable(): T $run
     * @return T
     */
    protected static function withReadTimeout(\Redis $redis, float $seconds, callable $run): mixed
    {
        $before = (float) $redis->getOption(\Redis::OPT_READ_TIMEOUT);
        $redis->setOption(\Redis::OPT_READ_TIMEOUT, $before > 0 ? min($before, $seconds) : $seconds);
        try {
            return $run();
        } finally {
            // A connection that broke mid-command is reconnected by phpredis at its next use,
            // with the options set on it.
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, self::restoredReadTimeout($before));
        }
    }

    /**
     * The read timeout that gives back a connection's reads as they were: 0 is phpredis' "none
     * set" (a Redis connected without one), whose reads wait default_socket_timeout; set again,
     * 0 would make every later read on it fail at once ("socket error on read socket").
     */
    private static function restoredReadTimeout(float $before): float
    {
        return $before == 0.0 ? (float) ini_get('default_socket_timeout') : $before;
    }

    /**
     * One command, its reply decoded literally (status replies as their text, not true: BF.INFO's
     * field names are status replies), an error reply as a ReplyError. A lost reply is sent again
     * until the deadline when $resendable, as pipeline() does; otherwise, and after the deadline,
     * NodeUnavailableException (never phpredis' own exception).
     *
     * @param list<string> $argv
     */
    public function literalCommand(string $key, array $argv, bool $resendable): mixed
    {
        $deadline = microtime(true) + $this->retryForSeconds;
        while (true) {
            try {
                return $this->literalOnce($key, $argv, self::attemptSeconds($deadline));
            } catch (\RedisException|\RedisClusterException|NodeUnavailableException $e) {
                if (!$resendable || microtime(true) > $deadline) {
                    throw new NodeUnavailableException(
                        ($resendable ? 'gave up resending after ' . $this->retryForSeconds . 's: '
                            : 'the reply was lost and the command is not resent: ') . $e->getMessage(),
                        0,
                        $e,
                    );
                }
                usleep(self::RESEND_PAUSE_MICROS);
            }
        }
    }

    /**
     * One attempt of literalCommand(): through the user's phpredis object.
     *
     * @param list<string> $argv
     * @param float $attemptSeconds the longest a read of the reply may wait, where the transport
     *                              bounds it
     */
    protected function literalOnce(string $key, array $argv, float $attemptSeconds): mixed
    {
        return self::withLiteralReplies($this->client(), fn () => $this->single($key, $argv));
    }

    /**
     * $run's result with $redis decoding status replies as their text (phpredis does so outside
     * pipelines only), the option as it was afterwards.
     *
     * @template T
     * @param callable(): T $run
     * @return T
     */
    protected static function withLiteralReplies(\Redis|\RedisCluster $redis, callable $run): mixed
    {
        $before = $redis->getOption(\Redis::OPT_REPLY_LITERAL);
        $redis->setOption(\Redis::OPT_REPLY_LITERAL, true);
        try {
            return $run();
        } finally {
            $redis->setOption(\Redis::OPT_REPLY_LITERAL, $before);
        }
    }

    /** The phpredis object given by the user. */
    abstract protected function client(): \Redis|\RedisCluster;

    /**
     * One command through the user's phpredis object; an error reply as a ReplyError.
     *
     * @param list<string> $argv
     */
    abstract protected function single(string $key, array $argv): mixed;

    /**
     * @param list<array{0: string, 1: list<string>}> $commands
     * @param list<int> $indices
     * @param float $attemptSeconds the longest a read of the cluster's slot map may wait
     * @return array<string, list<int>> node => indices of its commands
     */
    abstract protected function groupByNode(array $commands, array $indices, float $attemptSeconds): array;

    /**
     * @param list<array{0: string, 1: list<string>}> $commands
     * @param float $attemptSeconds the longest a read of a reply may wait
     * @return list<mixed>
     */
    abstract protected function runOnNode(string $node, array $commands, float $attemptSeconds): array;

    abstract protected function forgetNode(string $node): void;

    /**
     * Runs commands in one phpredis pipeline. phpredis answers false for an error reply in a
     * pipeline and keeps only the last error's text, so each failed command is sent once more on
     * its own through $resend to learn its answer or error: harmless for every command sent here,
     * since a refused command changed nothing and re-adding an item leaves the filter as it was.
     *
     * @param list<array{0: string, 1: list<string>}> $commands
     * @param callable(string, list<string>): mixed $resend
     * @return list<mixed>
     */
    protected static function pipelineOn(\Redis $redis, array $commands, callable $resend): array
    {
        $redis->clearLastError();
        $redis->multi(\Redis::PIPELINE);
        foreach ($commands as [, $argv]) {
            $redis->rawCommand(...$argv);
        }
        $replies = $redis->exec();
        if (!is_array($replies) || count($replies) !== count($commands)) {
            throw new \RedisException('the pipeline was not answered whole');
        }
        // An answer array that ends at an item the server refused (BF.INSERT into a full
        // NONSCALING filter stops there) holds false for it; the error's text is the last one.
        $lastError = $redis->getLastError();
        foreach ($replies as $n => $reply) {
            if (is_array($reply) && $reply !== [] && end($reply) === false) {
                $replies[$n][count($reply) - 1] = new ReplyError($lastError ?? 'the server refused an item');
            }
        }
        foreach ($replies as $n => $reply) {
            if ($reply === false) {
                $replies[$n] = $resend($commands[$n][0], $commands[$n][1]);
            }
        }
        return $replies;
    }
}
