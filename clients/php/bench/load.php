<?php

// Loads N items (default 1,000,000) into a 16-partition filter on a fresh 3+3 cluster, with
// bfctl (`bfctl load`, its default batches: 1000 items per command, 16 commands per round trip)
// and with this package (madd of BATCH items at a time, default 16,000: the same per round
// trip), ROUNDS times (default 3) alternately, and prints the median rates in items/s:
// wall-clock time of the load only (reserve excluded).
//
// Usage: php clients/php/bench/load.php   env: N, BATCH, ROUNDS, RUSTBLOOM_SERVER, RUSTBLOOM_MODULE

declare(strict_types=1);

require __DIR__ . '/../tests/bootstrap.php';

use Rustbloom\PartitionedBloom;
use Rustbloom\Tests\Servers;

$n = (int) (getenv('N') ?: 1_000_000);
$batch = (int) (getenv('BATCH') ?: 16_000);
$partitions = 16;
$items = [];
for ($i = 0; $i < $n; $i++) {
    $items[] = sprintf('%016x', crc32("a{$i}") << 32 | crc32("b{$i}"));
}

$rounds = (int) (getenv('ROUNDS') ?: 3);

/** @param list<float> $values */
function median(array $values): float
{
    sort($values);
    return $values[intdiv(count($values), 2)];
}

try {
    $port = Servers::cluster()[0]->port;
    $bfctl = getenv('RUSTBLOOM_BFCTL') ?: Servers::root() . '/target/release/bfctl';
    $url = ['BFCTL_URL' => "redis://127.0.0.1:{$port}"];
    $input = implode("\n", $items) . "\n";
    $client = Servers::clusterClient();
    $bfctlSeconds = [];
    $phpSeconds = [];
    // Alternating rounds, each into fresh filters, so that both meet the same machine load.
    for ($round = 0; $round < $rounds; $round++) {
        Servers::run([$bfctl, '--quiet', 'reserve', "bench-bfctl-{$round}", '0.0000001', (string) $n,
            '--partitions', (string) $partitions], '', $url);
        $start = hrtime(true);
        $done = Servers::run([$bfctl, '--quiet', 'load', "bench-bfctl-{$round}"], $input, $url);
        $bfctlSeconds[] = (hrtime(true) - $start) / 1e9;
        if ($done['status'] !== 0) {
            throw new RuntimeException("bfctl load failed: {$done['stderr']}");
        }

        $bloom = new PartitionedBloom($client, "bench-php-{$round}");
        $bloom->reserve(0.0000001, $n, $partitions);
        $start = hrtime(true);
        foreach (array_chunk($items, $batch) as $chunk) {
            $bloom->madd($chunk);
        }
        $phpSeconds[] = (hrtime(true) - $start) / 1e9;
        printf("round %d: bfctl %.3f s, php %.3f s\n", $round + 1, end($bfctlSeconds), end($phpSeconds));
    }
    $b = median($bfctlSeconds);
    $p = median($phpSeconds);
    printf("items %d, partitions %d, 3+3 cluster on %s, median of %d rounds\n", $n, $partitions, Servers::serverBinary(), $rounds);
    printf("bfctl load: %.3f s, %.0f items/s\n", $b, $n / $b);
    printf("php madd (batches of %d): %.3f s, %.0f items/s = %.2fx bfctl\n", $batch, $p, $n / $p, $b / $p);
} finally {
    Servers::stopAll();
}
