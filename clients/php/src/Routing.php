<?php

declare(strict_types=1);

namespace Rustbloom;

/**
 * The partitioning rules of docs/partitions.md: which partition an item goes to, the keys of the
 * partitions, their slots, and how big each one is made. Pure computation, checked against the
 * shared vectors (tests/fixtures/partitioning-vectors.json).
 *
 * Unsigned 64-bit values (hashes, routing seeds) travel as decimal strings, since PHP's integers
 * are signed; inside, they are PHP ints holding the same 64 bits.
 */
final class Routing
{
    /** Redis Cluster's number of hash slots. */
    public const SLOTS = 16384;
    /** The largest number of partitions a filter may have. */
    public const MAX_PARTITIONS = 4096;
    /** The module's largest filter capacity (BF.RESERVE's range). */
    public const MAX_CAPACITY = 1073741824;

    private const U64_MAX = '18446744073709551615';

    /** @var list<string>|null */
    private static ?array $slotTags = null;
    /** @var list<int>|null */
    private static ?array $crcTable = null;

    /** XXH3 64-bit of the item's bytes under the routing seed, as an unsigned decimal string. */
    public static function routingHash(string $item, string $routingSeed): string
    {
        return sprintf('%u', self::hashBits($item, self::u64FromDecimal($routingSeed)));
    }

    /**
     * The partition (0-based) that holds $item: the top 64 bits of hash × partitions.
     * $seedBits is the routing seed's 64 bits as a PHP int (see u64FromDecimal).
     */
    public static function partitionOf(string $item, int $seedBits, int $partitions): int
    {
        $h = hash('xxh3', $item, true, ['seed' => $seedBits]);
        // Big-endian halves: h = hi·2^32 + lo, so h·P = hi·P·2^32 + lo·P, and each product fits in
        // 44 bits (P ≤ 4096); the top 64 bits of the 128-bit product are the partition.
        ['hi' => $hi, 'lo' => $lo] = unpack('Nhi/Nlo', $h);
        return ($hi * $partitions + (($lo * $partitions) >> 32)) >> 32;
    }

    /** The 64 bits of a hash as a PHP int (signed view of the unsigned value). */
    private static function hashBits(string $item, int $seedBits): int
    {
        ['hi' => $hi, 'lo' => $lo] = unpack('Nhi/Nlo', hash('xxh3', $item, true, ['seed' => $seedBits]));
        return ($hi << 32) | $lo;
    }

    /** An unsigned 64-bit decimal string as the PHP int with the same 64 bits. */
    public static function u64FromDecimal(string $text): int
    {
        if (!preg_match('/^[0-9]{1,20}$/D', $text)
            || (strlen($text) === 20 && strcmp($text, self::U64_MAX) > 0)) {
            throw new \InvalidArgumentException("not an unsigned 64-bit integer: {$text}");
        }
        // Base-10 digits into two 32-bit halves, so no step overflows a signed 64-bit int.
        $hi = 0;
        $lo = 0;
        foreach (str_split($text) as $digit) {
            $lo = $lo * 10 + (int) $digit;
            $hi = $hi * 10 + ($lo >> 32);
            $lo &= 0xFFFFFFFF;
        }
        return ($hi << 32) | $lo;
    }

    /** The unsigned decimal text of a PHP int's 64 bits. */
    public static function u64ToDecimal(int $bits): string
    {
        return sprintf('%u', $bits);
    }

    /** Returns $partitions when it lies in 1..4096, else throws InvalidArgumentException. */
    public static function checkPartitions(int $partitions): int
    {
        if ($partitions < 1 || $partitions > self::MAX_PARTITIONS) {
            throw new \InvalidArgumentException(
                'partitions must be between 1 and ' . self::MAX_PARTITIONS . ", not {$partitions}"
            );
        }
        return $partitions;
    }

    /** CRC16-XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses. */
    public static function crc16(string $data): int
    {
        $table = self::$crcTable ??= self::buildCrcTable();
        $crc = 0;
        $n = strlen($data);
        for ($i = 0; $i < $n; $i++) {
            $crc = (($crc << 8) & 0xFF00) ^ $table[(($crc >> 8) ^ ord($data[$i])) & 0xFF];
        }
        return $crc;
    }

    /** @return list<int> */
    private static function buildCrcTable(): array
    {
        $table = [];
        for ($byte = 0; $byte < 256; $byte++) {
            $crc = $byte << 8;
            for ($bit = 0; $bit < 8; $bit++) {
                $crc = ($crc & 0x8000) ? (($crc << 1) ^ 0x1021) : ($crc << 1);
            }
            $table[] = $crc & 0xFFFF;
        }
        return $table;
    }

    /**
     * The cluster slot of $key, honouring its hash tag (the bytes between the first `{` and the
     * next `}`, when there is at least one).
     */
    public static function keySlot(string $key): int
    {
        $start = strpos($key, '{');
        if ($start !== false) {
            $end = strpos($key, '}', $start + 1);
            if ($end !== false && $end > $start + 1) {
                $key = substr($key, $start + 1, $end - $start - 1);
            }
        }
        return self::crc16($key) % self::SLOTS;
    }

    /**
     * For every slot s, the decimal string of the smallest n ≥ 0 whose CRC16 lands in s. Built once
     * per process (about 110,000 CRCs).
     *
     * @return list<string>
     */
    public static function slotTags(): array
    {
        if (self::$slotTags === null) {
            $tags = array_fill(0, self::SLOTS, null);
            $missing = self::SLOTS;
            for ($n = 0; $missing > 0; $n++) {
                $tag = (string) $n;
                $slot = self::crc16($tag) % self::SLOTS;
                if ($tags[$slot] === null) {
                    $tags[$slot] = $tag;
                    $missing--;
                }
            }
            self::$slotTags = $tags;
        }
        return self::$slotTags;
    }

    /**
     * The slots of the partitions of filter $name: evenly spaced from the name's own slot.
     *
     * @return list<int>
     */
    public static function partitionSlots(string $name, int $partitions): array
    {
        self::checkPartitions($partitions);
        $base = self::keySlot($name);
        $slots = [];
        for ($i = 0; $i < $partitions; $i++) {
            $slots[] = ($base + intdiv($i * self::SLOTS, $partitions)) % self::SLOTS;
        }
        return $slots;
    }

    /**
     * The keys `{T_i}NAME/i` of the partitions of filter $name, in partition order.
     *
     * @return list<string>
     */
    public static function partitionKeys(string $name, int $partitions): array
    {
        $tags = self::slotTags();
        $keys = [];
        foreach (self::partitionSlots($name, $partitions) as $i => $slot) {
            $keys[] = '{' . $tags[$slot] . '}' . $name . '/' . $i;
        }
        return $keys;
    }

    /**
     * The capacity each partition is reserved with, for $items items over $partitions. A
     * NONSCALING partition also holds six standard deviations of the binomial spread of items per
     * partition (plus one), so that loading $items random items never fills one of them first.
     */
    public static function partitionCapacity(int $items, int $partitions, bool $nonscaling): int
    {
        self::checkPartitions($partitions);
        if ($items < 1) {
            throw new \InvalidArgumentException("capacity must be a positive integer, not {$items}");
        }
        if (!$nonscaling) {
            return intdiv($items - 1, $partitions) + 1;
        }
        $share = 1 / $partitions;
        $capacity = (int) ceil($items / $partitions + 6 * sqrt($items * $share * (1 - $share))) + 1;
        // No partition receives more than all the items: past the module's capacity cap the
        // spread is dropped where N itself fits (one NONSCALING partition of 2^30 items).
        return $capacity > self::MAX_CAPACITY ? min($capacity, $items) : $capacity;
    }
}
