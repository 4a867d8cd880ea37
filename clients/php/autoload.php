<?php

declare(strict_types=1);

// The package's classes without Composer: `require '<checkout>/clients/php/autoload.php';` maps
// the namespace Rustbloom\ to src/ (PSR-4, as composer.json declares it).
spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Rustbloom\\')) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen('Rustbloom\\'))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
