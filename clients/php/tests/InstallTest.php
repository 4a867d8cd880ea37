<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

use PHPUnit\Framework\TestCase;
use Rustbloom\Routing;

/**
 * The two ways to install the README gives, each run as written outside the repository (in a
 * scratch directory, only the README's placeholder path replaced by this checkout's): the classes
 * load and work.
 */
final class InstallTest extends TestCase
{
    private const PLACEHOLDER = '/path/to/rustbloom';

    public function testTheReadmesRequireLineWorksFromOutsideTheRepository(): void
    {
        $readme = (string) file_get_contents(Servers::root() . '/clients/php/README.md');
        $this->assertSame(1, preg_match("~^require '([^']*)/clients/php/autoload\\.php';$~m", $readme, $m),
            'no require line in clients/php/README.md');
        $line = str_replace($m[1], Servers::root(), $m[0]);
        $dir = sys_get_temp_dir() . '/rbphp-install-' . bin2hex(random_bytes(6));
        mkdir($dir, 0700);
        try {
            file_put_contents("{$dir}/check.php", "<?php\n{$line}\n"
                . "echo class_exists(Rustbloom\\PartitionedBloom::class) ? 'loaded ' : 'missing ',\n"
                . "    Rustbloom\\Routing::partitionKeys('x', 2)[1], \"\\n\";\n");
            $out = Servers::run([PHP_BINARY, "{$dir}/check.php"]);
            $this->assertSame(0, $out['status'], $out['output'] . $out['stderr']);
            $this->assertSame("loaded {51781}x/1\n", $out['output']);
        } finally {
            @unlink("{$dir}/check.php");
            @rmdir($dir);
        }
    }

    /**
     * The README's Composer lines, each run by /bin/sh in a new scratch project with no way out
     * to the network and Composer's home (config, cache) in the scratch directory, so that
     * neither Packagist nor this machine's Composer setup can make them pass; then a script that
     * loads the package by the README's `vendor/autoload.php` line alone and uses it on a server.
     */
    public function testTheReadmesComposerLinesInstallThePackageOffline(): void
    {
        $readme = (string) file_get_contents(Servers::root() . '/clients/php/README.md');
        $this->assertSame(1, preg_match('~^```sh\n((?:composer .*\n)+)```$~m', $readme, $block),
            'no block of composer lines in clients/php/README.md');
        $this->assertStringContainsString(self::PLACEHOLDER, $block[1]);
        $this->assertSame(1, preg_match("~`(require __DIR__ \\. '/vendor/autoload\\.php';)`~", $readme, $autoload),
            'no vendor/autoload.php line in clients/php/README.md');
        // Quoted as a user would for the shell: a checkout path may hold spaces (CI's does).
        $lines = explode("\n", rtrim(str_replace(self::PLACEHOLDER, escapeshellarg(Servers::root()), $block[1])));

        $dir = sys_get_temp_dir() . '/rbphp-composer-' . bin2hex(random_bytes(6));
        $project = "{$dir}/app";
        mkdir($project, 0700, true);
        try {
            // COMPOSER_DISABLE_NETWORK is Composer's offline mode, but only its curl downloader
            // reads it; a proxy on a free loopback port, where nothing listens, refuses every
            // request of its PHP-stream one too (used where php-curl is not installed).
            $deadProxy = 'http://127.0.0.1:' . Servers::freePort(false);
            $env = ['COMPOSER_HOME' => "{$dir}/composer-home", 'COMPOSER_CACHE_DIR' => "{$dir}/composer-cache",
                'COMPOSER_DISABLE_NETWORK' => '1', 'http_proxy' => $deadProxy, 'https_proxy' => $deadProxy,
                'no_proxy' => '', 'NO_PROXY' => ''];
            foreach ($lines as $line) {
                $out = Servers::run(['/bin/sh', '-c', $line], '', $env, $project);
                $hint = $out['status'] === 127 ? ' (composer missing: `make client-packages` installs it)' : '';
                $this->assertSame(0, $out['status'], "`{$line}` failed{$hint}:\n{$out['output']}{$out['stderr']}");
            }

            $name = sprintf('php-composer:%d', getmypid());
            file_put_contents("{$project}/check.php", "<?php\n{$autoload[1]}\n" . <<<'PHP'
                $redis = new Redis();
                $redis->connect('127.0.0.1', (int) $argv[1], 5.0);
                $bloom = new Rustbloom\PartitionedBloom($redis, $argv[2]);
                $bloom->reserve(0.01, 1000, 4);
                echo json_encode([
                    'class file' => (new ReflectionClass(Rustbloom\PartitionedBloom::class))->getFileName(),
                    'add a' => $bloom->add('a'),
                    'add a again' => $bloom->add('a'),
                    'exists a' => $bloom->exists('a'),
                    'exists zz' => $bloom->exists('zz'),
                    'keys dropped' => $bloom->drop(),
                ]), "\n";
                PHP);
            $server = Servers::single();
            $out = Servers::run([PHP_BINARY, 'check.php', (string) $server->port, $name], '', [], $project);
            $this->assertSame(0, $out['status'], $out['output'] . $out['stderr']);
            $this->assertSame([
                'class file' => realpath(Servers::root() . '/clients/php/src/PartitionedBloom.php'),
                'add a' => true,
                'add a again' => false,
                'exists a' => true,
                'exists zz' => false,
                'keys dropped' => 5,
            ], json_decode($out['output'], true), $out['output'] . $out['stderr']);
            // Composer linked this checkout's package, and the filter is gone from the server.
            $this->assertTrue(is_link("{$project}/vendor/rustbloom/partitioned"));
            $this->assertSame(realpath(Servers::root() . '/clients/php'),
                realpath("{$project}/vendor/rustbloom/partitioned"));
            $this->assertSame(0, Servers::redis($server)->exists($name, ...Routing::partitionKeys($name, 4)));
        } finally {
            // rm -rf removes vendor/'s symlink to the checkout without following it.
            Servers::run(['rm', '-rf', '--', $dir]);
        }
    }
}
