// Builds the bundles: dist/extension.js (the VS Code face; CommonJS, `vscode` external),
// dist/server.js (the `sandbox-sessions` dispatcher: the command table and help, for Node >= 22.15)
// and one bundle per command, dist/cli/<module>.js, which the dispatcher requires only for the
// command it runs — so `--help` or a trivial command does not load Kubernetes, gRPC or pg, and
// neither does the gateway daemon. Several CommonJS entries rather than ESM code splitting: the
// format, the bundled CommonJS dependencies and `require.main` stay as they were, at the price of
// code shared by two commands being in both of their bundles (on disk only; a process loads one).
// `node esbuild.mjs [--watch] [--minify]`; tests call buildAll() to inspect the metafiles.
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(fileURLToPath(import.meta.url));
const MAIN = path.join(root, 'server/main.ts');
/** How server/main.ts loads a command: `import('./cli/<module>.js')`, a literal path (TypeScript's NodeNext wants the `.js`). */
const COMMAND_IMPORT = /\bimport\(\s*'\.\/cli\/([A-Za-z0-9_-]+)\.js'\s*\)/g;

/** The command modules server/main.ts loads on demand (its `import('./cli/….js')` calls). */
export function commandModules() {
  const source = fs.readFileSync(MAIN, 'utf8');
  return [...new Set([...source.matchAll(COMMAND_IMPORT)].map((m) => m[1]))].sort();
}

/**
 * In the dispatcher bundle, each `import('./cli/<module>.js')` of server/main.ts stays a run-time
 * load of dist/cli/<module>.js (its own bundle) instead of being bundled in; any other dynamic
 * import there fails the build, since no bundle would exist for it.
 * @param {string[]} modules
 */
function commandsExternal(modules) {
  return {
    name: 'sandbox-sessions-commands-external',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.importer !== MAIN || args.kind !== 'dynamic-import') return undefined;
        const name = /^\.\/cli\/([A-Za-z0-9_-]+)\.js$/.exec(args.path)?.[1];
        if (!name || !modules.includes(name)) {
          return { errors: [{ text: `server/main.ts may load commands only as import('./cli/<module>.js') with a literal path; got import('${args.path}')` }] };
        }
        return { path: `./cli/${name}.js`, external: true };
      });
    },
  };
}

/** @param {{outdir?: string, minify?: boolean, metafile?: boolean, write?: boolean}} options */
export function buildOptions(options = {}) {
  const outdir = options.outdir ?? path.join(root, 'dist');
  const modules = commandModules();
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
      entryPoints: [MAIN],
      outfile: path.join(outdir, 'server.js'),
      target: 'node22',
      banner: { js: '#!/usr/bin/env node' },
      // `import()` of a command bundle becomes a plain `require` (no ESM loader for a CommonJS file).
      supported: { 'dynamic-import': false },
      plugins: [commandsExternal(modules)],
    },
    commands: {
      ...common,
      entryPoints: Object.fromEntries(modules.map((m) => [`cli/${m}`, path.join(root, 'server/cli', `${m}.ts`)])),
      outdir,
      target: 'node22',
    },
  };
}

/**
 * V8 keeps a script's source on the heap at one byte a character only if every character is Latin-1: a
 * single `’` left in a comment (esbuild escapes non-ASCII only in code) doubles it, and made the gateway
 * daemon's 2.4 MB bundle 4.9 MB of its heap (issue 25). Every UTF-16 unit above U+00FF becomes `\uXXXX`,
 * which means the same character wherever esbuild leaves one raw (a comment, a regular expression).
 * @param {string} file
 */
export function latin1Source(file) {
  const text = fs.readFileSync(file, 'utf8');
  if (/[\u0100-\uffff]/.test(text)) fs.writeFileSync(file, text.replace(/[\u0100-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

/** Builds every bundle; resolves to their esbuild results (with metafiles when asked). */
export async function buildAll(options = {}) {
  const opts = buildOptions(options);
  const [extension, server, commands] = await Promise.all([esbuild.build(opts.extension), esbuild.build(opts.server), esbuild.build(opts.commands)]);
  if (options.write ?? true) {
    const outdir = options.outdir ?? path.join(root, 'dist');
    for (const file of ['extension.js', 'server.js', ...commandModules().map((m) => `cli/${m}.js`)]) latin1Source(path.join(outdir, file));
  }
  return { extension, server, commands };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const minify = process.argv.includes('--minify');
  if (process.argv.includes('--watch')) {
    const opts = buildOptions({ minify });
    const contexts = await Promise.all([esbuild.context(opts.extension), esbuild.context(opts.server), esbuild.context(opts.commands)]);
    await Promise.all(contexts.map((c) => c.watch()));
    console.log('watching for changes…');
  } else {
    await buildAll({ minify });
    const fs = await import('node:fs');
    fs.chmodSync(path.join(root, 'dist/server.js'), 0o755);
    console.log('built dist/extension.js, dist/server.js and dist/cli/*.js');
  }
}
