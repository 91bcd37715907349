// Builds the bundles: dist/extension.js (the VS Code face; CommonJS, `vscode` external),
// dist/server.js (the `sandbox-sessions` dispatcher: the command table and help, for Node >= 22.15)
// and one bundle per command, dist/cli/<module>.js, which the dispatcher requires only for the
// command it runs — so `--help` or a trivial command does not load Kubernetes, gRPC or pg, and
// neither does the gateway daemon. Several CommonJS entries rather than ESM code splitting: the
// format, the bundled CommonJS dependencies and `require.main` stay as they were, at the price of
// code shared by two commands being in both of their bundles (on disk only; a process loads one).
// The gateway daemon's bundle leaves a few packages to bundles of their own, required on first use.
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

/** Loads a command bundle with the code cache of its earlier runs (server/cli/warmCodeCache.ts). */
const WARM_LOADER = path.join(root, 'server/cli/warmCodeCache.ts');
/** Turns zod's generated parsers off for a short-lived command (server/cli/zodJitless.ts). */
const ZOD_JITLESS = path.join(root, 'server/cli/zodJitless.ts');
/**
 * The commands that run for long — the gateway daemon, the companion server, the MCP server — are required
 * plainly (Node's compile cache): their start is paid once, and the warm cache would give them the bytecode
 * of everything an earlier process ran, where the daemon's idle memory is what counts (issue 25).
 */
const LONG_LIVED = new Set(['gateway', 'serverCommand', 'mcpCommand']);

/**
 * In the dispatcher bundle, each `import('./cli/<module>.js')` of server/main.ts stays a run-time
 * load of dist/cli/<module>.js (its own bundle) instead of being bundled in — a short-lived command's
 * through requireCommandBundle, which compiles it with its warm code cache (and with zod's generated
 * parsers off: server/cli/zodJitless.ts); any other dynamic import there fails the build, since no bundle
 * would exist for it.
 * @param {string[]} modules
 */
function commandsExternal(modules) {
  const namespace = 'sandbox-sessions-command';
  return {
    name: 'sandbox-sessions-commands-external',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.importer !== MAIN || args.kind !== 'dynamic-import') return undefined;
        const name = /^\.\/cli\/([A-Za-z0-9_-]+)\.js$/.exec(args.path)?.[1];
        if (!name || !modules.includes(name)) {
          return { errors: [{ text: `server/main.ts may load commands only as import('./cli/<module>.js') with a literal path; got import('${args.path}')` }] };
        }
        return LONG_LIVED.has(name) ? { path: `./cli/${name}.js`, external: true } : { path: `./cli/${name}.js`, namespace };
      });
      build.onLoad({ filter: /.*/, namespace }, (args) => ({
        // `__dirname` is dist/, where dist/server.js runs.
        contents: `require(${JSON.stringify(ZOD_JITLESS)}).parseSchemasWithoutJit(); module.exports = require(${JSON.stringify(WARM_LOADER)}).requireCommandBundle(require('node:path').join(__dirname, ${JSON.stringify(args.path)})).exports;`,
        resolveDir: root,
        loader: 'js',
      }));
    },
  };
}

/**
 * Packages the gateway daemon loads only on first use (an OpenSandbox sandbox; `ws` for an `operations:ws`
 * connection or a terminal), each its own bundle dist/cli/<name>.js that the daemon's bundle requires when
 * that code first runs: V8 keeps a loaded script's whole source on the heap, and theirs (1.4 MB, undici
 * mostly) would sit in every idle daemon (issue 25). Only third-party packages that import no module of
 * ours, so none of our modules (error classes, schemas) is ever instantiated twice.
 */
export const DAEMON_ON_DEMAND = { ws: 'gateway-ws', '@alibaba-group/opensandbox': 'gateway-opensandbox' };

/** In the daemon's bundle, an import of an on-demand package becomes a `require` of its own bundle. */
function onDemandExternal() {
  const filter = new RegExp(`^(${Object.keys(DAEMON_ON_DEMAND).map((p) => p.replace(/[/.]/g, '\\$&')).join('|')})$`);
  return {
    name: 'sandbox-sessions-daemon-on-demand',
    setup(build) {
      build.onResolve({ filter }, (args) => (args.kind === 'entry-point' ? undefined : { path: `./${DAEMON_ON_DEMAND[args.path]}.js`, external: true }));
    },
  };
}

/**
 * Our modules' `import { z } from 'zod'` read, for the daemon, as `import * as z` of zod's namespace module: zod
 * exports `z` as a value, so esbuild keeps every part of it (its 50 locales, JSON Schema conversion, every schema
 * kind) and evaluates them all at start; through a namespace import, each `z.object` is a direct reference, and
 * what no module references is left out. The same module file either way: one zod, with the same behaviour.
 */
function zodNamespaceImport() {
  const IMPORT = /^import \{ z \} from 'zod';$/m;
  const external = path.join(root, 'node_modules/zod/v4/classic/external.js');
  return {
    name: 'sandbox-sessions-zod-namespace-import',
    setup(build) {
      build.onLoad({ filter: /[\\/](protocol|server)[\\/].*\.ts$/ }, async (args) => {
        if (!['protocol', 'server'].some((dir) => args.path.startsWith(path.join(root, dir) + path.sep))) return undefined;
        const source = await fs.promises.readFile(args.path, 'utf8');
        if (!IMPORT.test(source)) return undefined;
        return { contents: source.replace(IMPORT, `import * as z from ${JSON.stringify(external)};`), loader: 'ts' };
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
      entryPoints: Object.fromEntries(modules.filter((m) => m !== 'gateway').map((m) => [`cli/${m}`, path.join(root, 'server/cli', `${m}.ts`)])),
      outdir,
      target: 'node22',
      plugins: [zodNamespaceImport()],
    },
    // The gateway command (the daemon) and the bundles it loads on demand.
    daemon: {
      ...common,
      entryPoints: { 'cli/gateway': path.join(root, 'server/cli/gateway.ts'), ...Object.fromEntries(Object.entries(DAEMON_ON_DEMAND).map(([pkg, name]) => [`cli/${name}`, pkg])) },
      outdir,
      target: 'node22',
      // `import('ws')` becomes a plain `require` of its bundle (no ESM loader for a CommonJS file).
      supported: { 'dynamic-import': false },
      plugins: [onDemandExternal(), zodNamespaceImport()],
    },
  };
}

/** Every .js file buildAll writes, relative to the output directory. */
export function bundleFiles() {
  return ['extension.js', 'server.js', ...commandModules().map((m) => `cli/${m}.js`), ...Object.values(DAEMON_ON_DEMAND).map((n) => `cli/${n}.js`)];
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
  const [extension, server, commands, daemon] = await Promise.all([opts.extension, opts.server, opts.commands, opts.daemon].map((o) => esbuild.build(o)));
  if (options.write ?? true) {
    const outdir = options.outdir ?? path.join(root, 'dist');
    for (const file of bundleFiles()) latin1Source(path.join(outdir, file));
  }
  return { extension, server, commands, daemon };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const minify = process.argv.includes('--minify');
  if (process.argv.includes('--watch')) {
    const opts = buildOptions({ minify });
    const contexts = await Promise.all([opts.extension, opts.server, opts.commands, opts.daemon].map((o) => esbuild.context(o)));
    await Promise.all(contexts.map((c) => c.watch()));
    console.log('watching for changes…');
  } else {
    await buildAll({ minify });
    const fs = await import('node:fs');
    fs.chmodSync(path.join(root, 'dist/server.js'), 0o755);
    console.log('built dist/extension.js, dist/server.js and dist/cli/*.js');
  }
}
