<?php

declare(strict_types=1);

// Composer's autoloader when `composer install` ran; otherwise the package's own autoload.php and
// the tests' namespace mapped by hand, so that Debian's phpunit runs the tests without Composer.
if (is_file(__DIR__ . '/../vendor/autoload.php')) {
    require __DIR__ . '/../vendor/autoload.php';
} else {
    require __DIR__ . '/../autoload.php';
    spl_autoload_register(static function (string $class): void {
        if (str_starts_with($class, 'Rustbloom\\Tests\\')) {
            $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, strlen('Rustbloom\\Tests\\'))) . '.php';
            if (is_file($file)) {
                require $file;
            }
        }
    });
}
