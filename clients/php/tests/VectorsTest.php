<?php

declare(strict_types=1);

namespace Rustbloom\Tests;

use PHPUnit\Framework\TestCase;
use Rustbloom\Routing;

/** The shared vectors of docs/partitions.md (tests/fixtures/partitioning-vectors.json). */
final class VectorsTest extends TestCase
{
    /** @return array<string, mixed> */
    private static function vectors(string $section): array
    {
        $json = json_decode((string) file_get_contents(Servers::root() . '/tests/fixtures/partitioning-vectors.json'), true);
        return array_map(fn ($v) => [$v], $json[$section]);
    }

    public static function routingVectors(): array
    {
        return self::vectors('routing');
    }

    public static function keyVectors(): array
    {
        return self::vectors('keys');
    }

    public static function capacityVectors(): array
    {
        return self::vectors('capacity');
    }

    public static function slotTagVectors(): array
    {
        return self::vectors('slot_tags');
    }

    /** @dataProvider routingVectors */
    public function testRouting(array $v): void
    {
        $item = (string) hex2bin($v['item_hex']);
        $this->assertSame($v['xxh3_64'], Routing::routingHash($item, $v['routing_seed']));
        $seed = Routing::u64FromDecimal($v['routing_seed']);
        $this->assertSame($v['partition'], Routing::partitionOf($item, $seed, $v['partitions']));
    }

    /** @dataProvider keyVectors */
    public function testKeysAndSlots(array $v): void
    {
        $this->assertSame($v['name_slot'], Routing::keySlot($v['name']));
        $keys = Routing::partitionKeys($v['name'], $v['partitions']);
        $this->assertSame($v['keys'], $keys);
        $this->assertSame($v['slots'], Routing::partitionSlots($v['name'], $v['partitions']));
        // The tag leads each key, so the key's slot is the partition's target slot.
        $this->assertSame($v['slots'], array_map([Routing::class, 'keySlot'], $keys));
    }

    /** @dataProvider capacityVectors */
    public function testCapacity(array $v): void
    {
        $this->assertSame($v['partition_capacity'], Routing::partitionCapacity($v['items'], $v['partitions'], $v['nonscaling']));
    }

    /** @dataProvider slotTagVectors */
    public function testSlotTags(array $v): void
    {
        $this->assertSame($v['tag'], Routing::slotTags()[$v['slot']]);
    }

    public function testEverySlotHasTheSmallestTag(): void
    {
        $tags = Routing::slotTags();
        foreach ($tags as $slot => $tag) {
            $this->assertSame($slot, Routing::keySlot($tag));
        }
        foreach ([0, 1, 2515, 11058, 16383] as $slot) {
            for ($m = 0; $m < (int) $tags[$slot]; $m++) {
                $this->assertNotSame($slot, Routing::keySlot((string) $m));
            }
        }
        $this->assertLessThan(110_000, max(array_map('intval', $tags)));
    }

    public function testRedisDocsSlots(): void
    {
        $this->assertSame(11058, Routing::keySlot('somekey'));
        $this->assertSame(2515, Routing::keySlot('foo{hash_tag}'));
        $this->assertSame(2515, Routing::keySlot('hash_tag'));
        // An empty tag is no tag: the whole key is hashed.
        $this->assertNotSame(Routing::keySlot(''), Routing::keySlot('foo{}bar'));
    }

    public function testUnsignedSeedsRoundTrip(): void
    {
        foreach (['0', '1', '9223372036854775807', '9223372036854775808', '18446744073709551615'] as $text) {
            $this->assertSame($text, Routing::u64ToDecimal(Routing::u64FromDecimal($text)));
        }
        foreach (['18446744073709551616', '-1', '', '1e3', '99999999999999999999'] as $bad) {
            try {
                Routing::u64FromDecimal($bad);
                $this->fail("accepted {$bad}");
            } catch (\InvalidArgumentException) {
                $this->addToAssertionCount(1);
            }
        }
    }

    public function testPartitionCountIsChecked(): void
    {
        foreach ([0, 4097, -1] as $bad) {
            try {
                Routing::partitionKeys('f', $bad);
                $this->fail("accepted {$bad} partitions");
            } catch (\InvalidArgumentException) {
                $this->addToAssertionCount(1);
            }
        }
    }

    public function testRoutingSpreadsItemsEvenly(): void
    {
        $counts = array_fill(0, 16, 0);
        $seed = Routing::u64FromDecimal('12345');
        for ($i = 0; $i < 16_000; $i++) {
            $counts[Routing::partitionOf((string) $i, $seed, 16)]++;
        }
        // Binomial(16000, 1/16): mean 1000, sd 31.
        $this->assertGreaterThan(850, min($counts));
        $this->assertLessThan(1150, max($counts));
    }
}
