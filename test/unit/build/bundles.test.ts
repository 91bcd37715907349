// The bundles build, and the extension bundle carries no server-only code: the Kubernetes
// client, the bundle codec, the local runtime and the companion server stay in the server bundles.
// The CLI loads only what a command needs: dist/server.js (the dispatcher) requires one command's
// bundle, dist/cli/<module>.js, on demand — so `--help` and the gateway daemon never load the
// Kubernetes client, pg, gRPC or the codec's workers (checked on the import graph, and for real).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureGateway, stopGateway } from '../../../server/gateway/daemonClient';

interface Metafile {
  inputs: Record<string, unknown>;
  outputs: Record<string, { imports: { path: string; external?: boolean }[]; inputs: Record<string, unknown>; entryPoint?: string }>;
}
interface BuildResult {
  metafile: Metafile;
}
interface EsbuildModule {
  buildAll(options: { outdir: string; metafile: boolean; write: boolean }): Promise<{ extension: BuildResult; server: BuildResult; commands: BuildResult; daemon: BuildResult }>;
}

const SERVER_ONLY = [/^server\//, /node_modules\/@kubernetes\/client-node\//, /node_modules\/@modelcontextprotocol\//, /node_modules\/pg\//, /node_modules\/@grpc\//, /node_modules\/protobufjs\//];
/** `ws` (the era-D Session connection, in both bundles) tries these native accelerators in a try/catch and runs without them. */
const WS_OPTIONAL = new Set(['bufferutil', 'utf-8-validate']);
/** What only some commands need: the Kubernetes client, pg, gRPC (and protobufjs), and the codec's worker threads. */
const HEAVY = [/node_modules\/@kubernetes\/client-node\//, /node_modules\/pg\//, /node_modules\/@grpc\//, /node_modules\/protobufjs\//, /^server\/bundle\/(threadPool|codecThreads)\.ts$/];
const REPO_ROOT = path.resolve(__dirname, '../../..');

describe('build: esbuild bundles', function () {
  this.timeout(60_000);
  let built: { extension: BuildResult; server: BuildResult; commands: BuildResult; daemon: BuildResult };
  let outdir: string;

  before(async () => {
    const esbuildConfig = (await import(path.resolve(REPO_ROOT, 'esbuild.mjs'))) as EsbuildModule;
    outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-build-test-'));
    built = await esbuildConfig.buildAll({ outdir, metafile: true, write: true });
  });

  after(() => fs.rmSync(outdir, { recursive: true, force: true }));

  /** The repo-relative inputs bundled into the output file `file` (relative to outdir). */
  function inputsOf(file: string): string[] {
    const outputs = { ...built.server.metafile.outputs, ...built.commands.metafile.outputs, ...built.daemon.metafile.outputs };
    const key = Object.keys(outputs).find((o) => path.resolve(REPO_ROOT, o) === path.join(outdir, file));
    assert.ok(key, `no output ${file} among ${Object.keys(outputs).join(', ')}`);
    return Object.keys(outputs[key]!.inputs);
  }

  it('keeps server-only modules out of the extension bundle', () => {
    const inputs = Object.keys(built.extension.metafile.inputs);
    assert.ok(inputs.includes('extension/extension.ts'), `extension entry missing from ${inputs.join(', ')}`);
    const leaked = inputs.filter((i) => SERVER_ONLY.some((re) => re.test(i)));
    assert.deepEqual(leaked, [], `server-only code in the extension bundle: ${leaked.join(', ')}`);
  });

  it('leaves only vscode, Node built-ins and ws\'s optional accelerators external in the extension bundle', () => {
    const externals = Object.values(built.extension.metafile.outputs)
      .flatMap((o) => o.imports)
      .filter((i) => i.external)
      .map((i) => i.path);
    const unexpected = externals.filter((p) => p !== 'vscode' && !p.startsWith('node:') && !isBuiltin(p) && !WS_OPTIONAL.has(p));
    assert.deepEqual(unexpected, []);
  });

  it('bundles ws into the extension (the era-D Session connection runs in the extension host)', () => {
    assert.ok(Object.keys(built.extension.metafile.inputs).some((i) => /node_modules\/ws\/lib\/websocket\.js$/.test(i)));
  });

  it('bundles the CLI entry point into dist/server.js, which loads only the command bundles it builds (by path, at run time)', () => {
    assert.ok(inputsOf('server.js').includes('server/main.ts'));
    // A long-lived command's bundle is a plain external require; a short-lived one's goes through a loader
    // stub, requireCommandBundle of that path (its warm code cache).
    const externals = Object.values(built.server.metafile.outputs)
      .flatMap((o) => o.imports)
      .filter((i) => i.external && !i.path.startsWith('node:') && !isBuiltin(i.path))
      .map((i) => i.path);
    const warm = inputsOf('server.js').flatMap((i) => /^sandbox-sessions-command:(\.\/cli\/[\w-]+\.js)$/.exec(i)?.[1] ?? []);
    assert.deepEqual([...externals].sort(), ['./cli/gateway.js', './cli/mcpCommand.js', './cli/serverCommand.js']);
    assert.ok(warm.length >= 5 && warm.includes('./cli/sandbox.js'), `command bundles loaded warm by server.js: ${warm.join(', ')}`);
    const text = fs.readFileSync(path.join(outdir, 'server.js'), 'utf8');
    for (const p of warm) assert.ok(text.includes(`.requireCommandBundle(require("node:path").join(__dirname, ${JSON.stringify(p)}))`), `server.js does not load ${p}`);
    for (const p of [...externals, ...warm]) assert.ok(fs.existsSync(path.join(outdir, p)), `server.js loads ${p}, which the build did not write`);
  });

  it('bundles each command with no externals but built-ins', () => {
    // pg's optional native binding is required inside a try/catch only by `pg.native`, which this
    // project never uses (no native add-ons); esbuild leaves such guarded requires external. `ws`
    // likewise tries its optional native accelerators and falls back to JavaScript without them.
    const optional = new Set(['pg-native', ...WS_OPTIONAL]);
    const externals = Object.values(built.commands.metafile.outputs)
      .flatMap((o) => o.imports)
      .filter((i) => i.external && !i.path.startsWith('node:') && !isBuiltin(i.path) && !optional.has(i.path));
    assert.deepEqual(externals, []);
    // The gateway daemon's bundle also requires its on-demand bundles (daemonStartLoad.test.ts), which the build writes.
    const daemonExternals = new Set(
      Object.values(built.daemon.metafile.outputs)
        .flatMap((o) => o.imports)
        .filter((i) => i.external && !i.path.startsWith('node:') && !isBuiltin(i.path) && !optional.has(i.path))
        .map((i) => i.path),
    );
    assert.deepEqual([...daemonExternals].sort(), ['./gateway-opensandbox.js', './gateway-ws.js']);
    for (const p of daemonExternals) assert.ok(fs.existsSync(path.join(outdir, 'cli', p)), `the daemon requires ${p}, which the build did not write`);
  });

  it('import graph: the dispatcher and the gateway daemon\'s bundle hold no Kubernetes client, pg, gRPC or codec workers; the commands that need them do', () => {
    const heavyIn = (file: string) => inputsOf(file).filter((i) => HEAVY.some((re) => re.test(i)));
    assert.deepEqual(heavyIn('server.js'), []);
    assert.deepEqual(
      inputsOf('server.js').filter((i) => i.startsWith('server/') && !['server/main.ts', 'server/cli/args.ts', 'server/cli/compileCache.ts', 'server/cli/warmCodeCache.ts', 'server/cli/zodJitless.ts', 'server/version.ts'].includes(i)),
      [],
      'dist/server.js bundles command code: it must only dispatch',
    );
    assert.deepEqual(heavyIn('cli/gateway.js'), []);
    assert.deepEqual(heavyIn('cli/sandbox.js'), []);
    // The check above can see them: the commands that use them bundle them.
    assert.ok(heavyIn('cli/kruntimes.js').some((i) => i.includes('@kubernetes/client-node')));
    assert.ok(heavyIn('cli/serverCommand.js').some((i) => i.includes('node_modules/pg/')));
    assert.ok(heavyIn('cli/bundle.js').includes('server/bundle/threadPool.ts'));
  });

  it('for real: `--help` loads only dist/server.js, `bundle --help` adds only its bundle, and a running gateway daemon loads only its own', async function () {
    this.timeout(60_000);
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'lazy-load-'));
    // Preloaded into each process: on exit, it writes every module file that process loaded.
    const preload = path.join(work, 'record-loaded.cjs');
    fs.writeFileSync(
      preload,
      `process.on('exit', () => require('node:fs').writeFileSync(process.env.LOADED_OUT + '.' + process.pid, JSON.stringify(Object.keys(require.cache).filter((f) => f !== __filename))));\n`,
    );
    const loadedFiles = (prefix: string): string[] => {
      const files = fs.readdirSync(work).filter((f) => f.startsWith(`${prefix}.`));
      assert.equal(files.length, 1, `one recording for ${prefix}: ${files.join(', ')}`);
      return (JSON.parse(fs.readFileSync(path.join(work, files[0]!), 'utf8')) as string[]).map((f) => path.relative(outdir, f)).sort();
    };
    const server = path.join(outdir, 'server.js');
    try {
      for (const [prefix, argv] of [['help', ['--help']], ['bundle-help', ['bundle', '--help']]] as const) {
        const env = { ...process.env, LOADED_OUT: path.join(work, prefix) };
        const child = spawn(process.execPath, ['--require', preload, server, ...argv], { env, stdio: ['ignore', 'pipe', 'inherit'] });
        let stdout = '';
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        assert.equal(await new Promise((resolve) => child.on('close', resolve)), 0);
        assert.match(stdout, /sandbox-sessions/);
      }
      assert.deepEqual(loadedFiles('help'), ['server.js']);
      assert.deepEqual(loadedFiles('bundle-help'), ['cli/bundle.js', 'server.js']);

      const stateDir = path.join(work, 'state');
      try {
        // `env` execs node (same pid): the daemon is started exactly as the CLI starts it, plus the preload.
        await ensureGateway({ stateDir, command: ['env', `LOADED_OUT=${path.join(work, 'daemon')}`, process.execPath, '--require', preload, server, 'gateway'] });
      } finally {
        assert.equal(await stopGateway({ stateDir }), true, 'the daemon was running');
      }
      const daemonFiles = loadedFiles('daemon');
      assert.deepEqual(daemonFiles, ['cli/gateway.js', 'server.js']);
      const heavy = daemonFiles.flatMap(inputsOf).filter((i) => HEAVY.some((re) => re.test(i)));
      assert.deepEqual(heavy, [], 'what the daemon loaded bundles Kubernetes, pg, gRPC or the codec workers');
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  });

  it('for real: inside a command\'s bundle, a verb evaluates only what it runs: `bundle cleanup` no zod schemas, HTTP client or codec workers, `sandbox --help` no HTTP client, `sandbox exec` and `list` no undici; short-lived commands parse without generated code, the daemon with it', async function () {
    this.timeout(60_000);
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'lazy-verbs-'));
    // Preloaded: on exit, what the process evaluated — zod (its global registry, made when zod loads), an HTTP
    // client (undici's global dispatcher, npm's or Node's own, set when it loads) and worker_threads (the codec's pool) —
    // and whether zod's generated parsers were off (server/cli/zodJitless.ts).
    const preload = path.join(work, 'record-evaluated.cjs');
    fs.writeFileSync(
      preload,
      `process.on('exit', () => require('node:fs').writeFileSync(process.env.EVALUATED_OUT, JSON.stringify({
        zod: globalThis.__zod_globalRegistry !== undefined,
        undici: globalThis[Symbol.for('undici.globalDispatcher.1')] !== undefined,
        workerThreads: process.moduleLoadList.some((m) => /\\bworker_threads$/.test(m)),
        jitless: globalThis.__zod_globalConfig?.jitless === true,
      })));\n`,
    );
    type Evaluated = { zod: boolean; undici: boolean; workerThreads: boolean; jitless: boolean };
    const evaluated = async (argv: string[]): Promise<Evaluated> => {
      const out = path.join(work, `evaluated-${argv.join('-').replace(/[^\w-]/g, '_')}.json`);
      const env = { ...process.env, EVALUATED_OUT: out, XDG_CACHE_HOME: path.join(work, 'cache') };
      const child = spawn(process.execPath, ['--require', preload, path.join(outdir, 'server.js'), ...argv], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      assert.equal(await new Promise((resolve) => child.on('close', resolve)), 0, stderr);
      return JSON.parse(fs.readFileSync(out, 'utf8')) as Evaluated;
    };
    try {
      const empty = path.join(work, 'empty');
      fs.mkdirSync(empty);
      assert.deepEqual(await evaluated(['bundle', 'cleanup', empty]), { zod: false, undici: false, workerThreads: false, jitless: true });
      assert.equal((await evaluated(['sandbox', '--help'])).undici, false, '`sandbox --help` loaded the gateway client');
      // The verbs that reach the local daemon (plain http on loopback) go through node:http, not undici (~0.1 s a call).
      const stateDir = path.join(work, 'state');
      const server = path.join(outdir, 'server.js');
      try {
        // `env` execs node (same pid): the daemon started as the CLI starts it, plus the preload.
        const daemonOut = path.join(work, 'evaluated-daemon.json');
        await ensureGateway({ stateDir, command: ['env', `EVALUATED_OUT=${daemonOut}`, process.execPath, '--require', preload, server, 'gateway'] });
        await evaluated(['sandbox', 'create', '--name', 'probe', '--runtime', 'process', '--state-dir', stateDir]);
        const exec = await evaluated(['sandbox', 'exec', 'probe', '--state-dir', stateDir, '--', 'true']);
        assert.equal(exec.undici, false, '`sandbox exec` loaded undici');
        assert.equal(exec.jitless, true, '`sandbox exec` parsed with generated code');
        assert.equal((await evaluated(['sandbox', 'list', '--state-dir', stateDir])).undici, false, '`sandbox list` loaded undici');
        // Each short-lived command's bundle left its warm code cache (server/cli/warmCodeCache.ts) for the next call.
        const warm = fs.readdirSync(path.join(work, 'cache', 'sandbox-sessions', 'compile-cache', 'warm')).map((f) => f.split('-')[0]).sort();
        assert.deepEqual(warm, ['bundle', 'sandbox']);
        assert.equal(await stopGateway({ stateDir }), true);
        const daemon = JSON.parse(fs.readFileSync(daemonOut, 'utf8')) as Evaluated;
        assert.equal(daemon.zod, true);
        assert.equal(daemon.jitless, false, 'the daemon parses all day: it keeps zod\'s generated parsers');
      } finally {
        await stopGateway({ stateDir });
      }
      // The probes can see them: `kruntimes` (the Kubernetes client, undici, its schemas) evaluates all three at load.
      assert.deepEqual(await evaluated(['kruntimes', '--help']), { zod: true, undici: true, workerThreads: true, jitless: true });
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  });
});

function isBuiltin(name: string): boolean {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('node:module') as typeof import('node:module')).isBuiltin(name);
}
