<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

use Rustbloom\PartitionedBloom;
use Rustbloom\Routing;

/**
 * bfctl (target/release/bfctl, or $RUSTBLOOM_BFCTL) and the Python package (in the interpreter
 * $RUSTBLOOM_PYTHON, default target/python-client/venv/bin/python) share partitioned filters with
 * this package: what one writes the others read.
 */
final class InteropTest extends ServerTestCase
{
    // Reserves (argv "write") or looks up (argv "read") items read from stdin, one per line, with
    // the Python package; prints 1 or 0 per item for a lookup.
    private const PYTHON_PEER = <<<'PY'
        import sys, redis
        from redis.cluster import RedisCluster
        from rustbloom import PartitionedBloom
        mode, port, cluster, name = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
        client = (RedisCluster if cluster else redis.Redis)(host="127.0.0.1", port=port)
        items = sys.stdin.buffer.read().split(b"\n")[:-1]
        bloom = PartitionedBloom(client, name)
        if mode == "write":
            bloom.reserve(0.01, len(items), partitions=6)
            bloom.madd(items)
        else:
            sys.stdout.write("".join("1\n" if a else "0\n" for a in bloom.mexists(items)))
        PY;

    /** @dataProvider targets */
    public function testBfctlWritesPhpReads(string $target): void
    {
        $name = self::freshName('bfctl-writes');
        $members = self::items('from-bfctl', 3000);
        self::bfctl($target, ['reserve', $name, '0.01', '3000', '--partitions', '6']);
        self::bfctl($target, ['load', $name], self::lines($members));

        $bloom = new PartitionedBloom(self::client($target), $name);
        $info = $bloom->info();
        $this->assertSame(6, $info['Partitions']);
        $this->assertSame(Routing::partitionKeys($name, 6), $info['Partition keys']);
        $this->assertNotContains(false, $bloom->mexists($members));
        $this->assertLessThan(3000 * 0.02, count(array_filter($bloom->mexists(self::items('never', 3000)))));
    }

    /** @dataProvider targets */
    public function testPhpWritesBfctlReads(string $target): void
    {
        $name = self::freshName('php-writes');
        $bloom = new PartitionedBloom(self::client($target), $name);
        $bloom->reserve(0.01, 3000, 6);
        $members = self::items('from-php', 3000);
        $bloom->madd($members);
        $probes = [...$members, ...self::items('never', 3000)];

        $answers = self::bfctl($target, ['exists', $name], self::lines($probes));
        // bfctl prints 1 or 0 per input line, in order: the same answers as this package's.
        $this->assertSame(self::lines(array_map(fn ($a) => $a ? '1' : '0', $bloom->mexists($probes))), $answers);
        $this->assertSame(str_repeat("1\n", 3000), substr($answers, 0, 6000));
    }

    /** @dataProvider targets */
    public function testPythonWritesPhpReads(string $target): void
    {
        $name = self::freshName('python-writes');
        $members = self::items('from-python', 3000);
        self::python($target, 'write', $name, $members);

        $bloom = new PartitionedBloom(self::client($target), $name);
        $this->assertSame(6, $bloom->layout()->partitions);
        $this->assertNotContains(false, $bloom->mexists($members));
        $this->assertLessThan(3000 * 0.02, count(array_filter($bloom->mexists(self::items('never', 3000)))));
    }

    /** @dataProvider targets */
    public function testPhpWritesPythonReads(string $target): void
    {
        $name = self::freshName('php-writes-py');
        $bloom = new PartitionedBloom(self::client($target), $name);
        $bloom->reserve(0.01, 3000, 6);
        $members = self::items('from-php', 3000);
        $bloom->madd($members);
        $probes = [...$members, ...self::items('never', 3000)];

        $answers = self::python($target, 'read', $name, $probes);
        $this->assertSame(self::lines(array_map(fn ($a) => $a ? '1' : '0', $bloom->mexists($probes))), $answers);
        $this->assertSame(str_repeat("1\n", 3000), substr($answers, 0, 6000));
    }

    /** @return list<string> */
    private static function items(string $prefix, int $count): array
    {
        return array_map(fn ($i) => "{$prefix}:{$i}", range(0, $count - 1));
    }

    /** @param list<string> $items */
    private static function lines(array $items): string
    {
        return implode('', array_map(fn ($i) => "{$i}\n", $items));
    }

    /** @param list<string> $args */
    private static function bfctl(string $target, array $args, string $stdin = ''): string
    {
        $binary = getenv('RUSTBLOOM_BFCTL') ?: Servers::root() . '/target/release/bfctl';
        self::assertFileExists($binary, 'bfctl not found: run `make build` or set RUSTBLOOM_BFCTL');
        $done = Servers::run([$binary, '--quiet', ...$args], $stdin,
            ['BFCTL_URL' => 'redis://127.0.0.1:' . self::port($target)]);
        self::assertSame(0, $done['status'], $done['stderr']);
        return $done['output'];
    }

    /** @param list<string> $items */
    private static function python(string $target, string $mode, string $name, array $items): string
    {
        $python = getenv('RUSTBLOOM_PYTHON') ?: Servers::root() . '/target/python-client/venv/bin/python';
        self::assertFileExists($python, 'no Python with the rustbloom package: run `make client-packages` or set RUSTBLOOM_PYTHON');
        $done = Servers::run([$python, '-c', self::PYTHON_PEER, $mode, (string) self::port($target),
            $target === 'cluster' ? '1' : '0', $name], self::lines($items));
        self::assertSame(0, $done['status'], $done['stderr']);
        return $done['output'];
    }
}
