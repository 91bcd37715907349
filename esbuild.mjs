// Builds the two bundles: dist/extension.js (the VS Code face; CommonJS, `vscode` external) and
// dist/server.js (the companion server and the `sandbox-sessions` CLI, for Node >= 22.15).
// `node esbuild.mjs [--watch] [--minify]`; tests call buildAll() to inspect the metafiles.
import * as esbuild from 'esbuild';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(fileURLToPath(import.meta.url));

/** @param {{outdir?: string, minify?: boolean, metafile?: boolean, write?: boolean}} options */
export function buildOptions(options = {}) {
  const outdir = options.outdir ?? path.join(root, 'dist');
  const common = {
    bundle: true,
    platform: 'node',
    format: 'cjs',
    sourcemap: true,
    minify: options.minify ?? false,
    metafile: options.metafile ?? false,
    write: options.write ?? true,
    logLevel: 'warning',
    absWorkingDir: root,
  };
  return {
    extension: {
      ...common,
      entryPoints: [path.join(root, 'extension/extension.ts')],
      outfile: path.join(outdir, 'extension.js'),
      target: 'node20',
      external: ['vscode'],
    },
    server: {
      ...common,
      entryPoints: [path.join(root, 'server/main.ts')],
      outfile: path.join(outdir, 'server.js'),
      target: 'node22',
      banner: { js: '#!/usr/bin/env node' },
    },
  };
}

/** Builds both bundles; resolves to their esbuild results (with metafiles when asked). */
export async function buildAll(options = {}) {
  const opts = buildOptions(options);
  const [extension, server] = await Promise.all([esbuild.build(opts.extension), esbuild.build(opts.server)]);
  return { extension, server };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const minify = process.argv.includes('--minify');
  if (process.argv.includes('--watch')) {
    const opts = buildOptions({ minify });
    const contexts = await Promise.all([esbuild.context(opts.extension), esbuild.context(opts.server)]);
    await Promise.all(contexts.map((c) => c.watch()));
    console.log('watching for changes…');
  } else {
    await buildAll({ minify });
    const fs = await import('node:fs');
    fs.chmodSync(path.join(root, 'dist/server.js'), 0o755);
    console.log('built dist/extension.js and dist/server.js');
  }
}
