<?php

declare(strict_types=1);

// Composer's autoloader when `composer install` ran; otherwise the same PSR-4 mapping by hand, so
// that Debian's phpunit runs the tests without Composer.
if (is_file(__DIR__ . '/../vendor/autoload.php')) {
    require __DIR__ . '/../vendor/autoload.php';
} else {
    spl_autoload_register(static function (string $class): void {
        foreach (['Rustbloom\\Tests\\' => __DIR__ . '/', 'Rustbloom\\' => __DIR__ . '/../src/'] as $prefix => $dir) {
            if (str_starts_with($class, $prefix)) {
                $file = $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
                if (is_file($file)) {
                    require $file;
                }
                return;
            }
        }
    });
}
