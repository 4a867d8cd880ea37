<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

use PHPUnit\Framework\TestCase;

/**
 * The install line the README gives, run in a script outside the repository (its directory a
 * scratch one, only the README's placeholder path replaced by this checkout's): the classes load
 * and route as the spec says.
 */
final class InstallTest extends TestCase
{
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
}
