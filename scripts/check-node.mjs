// Fails loudly when the Node running the tests has no built-in zstd.
// The project installs Node 24 from the npm registry (devDependency `node`), and npm
// scripts put node_modules/.bin first on PATH, so this only fails when that install is missing.
import zlib from 'node:zlib';

if (typeof zlib.createZstdCompress !== 'function' || typeof zlib.createZstdDecompress !== 'function') {
  console.error(
    `error: Node ${process.version} at ${process.execPath} has no built-in zstd (needs >= 22.15).\n` +
      'Run `npm install` (it installs Node 24 from the npm registry into node_modules/.bin) and use the npm scripts.',
  );
  process.exit(1);
}
