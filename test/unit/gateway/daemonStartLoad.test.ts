// What the gateway daemon loads at start (issue 25: an idle daemon at most 60 MB RSS). A daemon whose sandboxes
// are process/bubblewrap ones never needs the OpenSandbox SDK (with the undici and openapi-fetch it brings), nor
// `ws` (which loads Node's tls and https), until an OpenSandbox sandbox or a WebSocket asks for them: those are
// bundles of their own (dist/cli/gateway-ws.js, gateway-opensandbox.js), since V8 keeps a loaded script's whole
// source on the heap. Of zod, the daemon's bundle holds only what our schemas use (no locales but English).
// Checked on the bundles the daemon runs, built here into a temp dir: what each output holds and its start-up
// import graph (esbuild's metafile, static imports only), the built-in modules the running daemon has loaded when
// idle and after its first `operations:ws`, the on-demand OpenSandbox bundle giving what our code imports from the
// SDK, and the source being Latin-1 (V8 keeps it at one byte a character, not two).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Metafile } from 'esbuild';
import { SessionConnection } from '../../../protocol/kruntimes/sessionConnection';
import { DAEMON_NODE_FLAGS, startDetachedGateway, stopGateway } from '../../../server/gateway/daemonClient';
import { LocalGatewayClient } from '../../../server/gateway/localClient';

const ROOT = path.resolve(__dirname, '../../..');
const ENTRY = 'server/cli/gateway.ts';
/** Loaded only on demand, each from its own bundle: the OpenSandbox SDK and what it brings, and `ws`. */
const ON_DEMAND: [RegExp, string][] = [
  [/node_modules\/@alibaba-group\/opensandbox\//, 'cli/gateway-opensandbox.js'],
  [/node_modules\/undici\//, 'cli/gateway-opensandbox.js'],
  [/node_modules\/openapi-fetch\//, 'cli/gateway-opensandbox.js'],
  [/node_modules\/ws\//, 'cli/gateway-ws.js'],
];

interface Built {
  outdir: string;
  metafile: Metafile;
}

async function build(): Promise<Built> {
  const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'daemon-start-load-'));
  const { buildAll } = (await import(path.join(ROOT, 'esbuild.mjs'))) as { buildAll(o: object): Promise<{ daemon: { metafile: Metafile } }> };
  const { daemon } = await buildAll({ outdir, metafile: true });
  return { outdir, metafile: daemon.metafile };
}

/** The inputs bundled into the output `file` (relative to the output directory). */
function inputsOf(built: Built, file: string): string[] {
  const key = Object.keys(built.metafile.outputs).find((o) => path.resolve(ROOT, o) === path.join(built.outdir, file));
  assert.ok(key, `no output ${file}`);
  return Object.keys(built.metafile.outputs[key]!.inputs);
}

/** The inputs of the bundle reachable from `entry` through `import` statements and `require` calls (not `import()`). */
function loadedAtStart(metafile: Metafile, entry: string): Set<string> {
  const seen = new Set([entry]);
  const queue = [entry];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    for (const imp of metafile.inputs[file]?.imports ?? []) {
      if (imp.kind === 'dynamic-import' || imp.external || seen.has(imp.path)) continue;
      seen.add(imp.path);
      queue.push(imp.path);
    }
  }
  return seen;
}

/** Built-in modules (as `process.moduleLoadList` names them) the daemon has loaded, asked through its preload. */
async function builtinsLoaded(pid: number, out: string): Promise<string[]> {
  fs.rmSync(out, { force: true });
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 10_000;
  while (!fs.existsSync(out)) {
    if (Date.now() > deadline) throw new Error('the daemon did not write its loaded modules');
    await new Promise((r) => setTimeout(r, 20)); // polling for the file the daemon writes on the signal
  }
  return JSON.parse(fs.readFileSync(out, 'utf8')) as string[];
}

describe('gateway daemon: what it loads at start', function () {
  this.timeout(180_000);
  let built: Built;

  before(async () => {
    built = await build();
  });

  after(() => fs.rmSync(built.outdir, { recursive: true, force: true }));

  it('its bundle holds neither the OpenSandbox SDK, undici, openapi-fetch nor ws: their own bundles do, required on demand', () => {
    const daemon = inputsOf(built, 'cli/gateway.js');
    const atStart = [...loadedAtStart(built.metafile, ENTRY)];
    assert.ok(atStart.includes('server/local/localRuntime.ts') && atStart.includes('server/sandboxes/opensandbox/opensandboxBackend.ts'), 'the walk follows static imports');
    for (const [re, bundle] of ON_DEMAND) {
      assert.ok(inputsOf(built, bundle).some((i) => re.test(i)), `${re} is in ${bundle} (for when it is needed)`);
      assert.deepEqual(daemon.filter((i) => re.test(i)), [], `${re} is in the daemon's own bundle`);
      assert.deepEqual(atStart.filter((i) => re.test(i)), [], `${re} is imported at start`);
    }
    const source = fs.readFileSync(path.join(built.outdir, 'cli/gateway.js'), 'utf8');
    const required = [...source.matchAll(/\brequire\("(\.\/[^"]+)"\)/g)].map((m) => m[1]);
    assert.deepEqual([...new Set(required)].sort(), ['./gateway-opensandbox.js', './gateway-ws.js'], 'the daemon requires its on-demand bundles, and nothing else of dist/');
  });

  it('of zod, its bundle holds what our schemas use: English messages only, no JSON Schema import', () => {
    const zod = inputsOf(built, 'cli/gateway.js').filter((i) => i.includes('node_modules/zod/'));
    assert.ok(zod.includes('node_modules/zod/v4/classic/schemas.js'), 'zod is in the bundle');
    assert.deepEqual(zod.filter((i) => /\/locales\/(?!en\.js$|index\.js$)/.test(i) || i.endsWith('/from-json-schema.js')), []);
  });

  it('its on-demand OpenSandbox bundle gives what our code imports from the SDK', () => {
    // The values (not types) our modules import from the SDK, as written in their import statements.
    const imported = new Set<string>();
    for (const file of Object.keys(built.metafile.inputs).filter((i) => i.startsWith('server/'))) {
      for (const m of fs.readFileSync(path.join(ROOT, file), 'utf8').matchAll(/^import \{([^}]*)\} from '@alibaba-group\/opensandbox';$/gm)) {
        for (const name of m[1]!.split(',').map((n) => n.trim())) if (name && !name.startsWith('type ')) imported.add(name);
      }
    }
    assert.ok(imported.has('SandboxManager'), `found the SDK's imports: ${[...imported].join(', ')}`);
    const sdk = require(path.join(built.outdir, 'cli/gateway-opensandbox.js')) as Record<string, unknown>; // eslint-disable-line @typescript-eslint/no-require-imports
    assert.deepEqual([...imported].filter((name) => typeof sdk[name] !== 'function'), []);
  });

  it('a running daemon has not loaded tls when idle; its first operations:ws loads ws and works', async () => {
    const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'daemon-start-load-state-'));
    const out = path.join(stateDir, 'builtins.json');
    const preload = path.join(stateDir, 'record-builtins.cjs');
    fs.writeFileSync(
      preload,
      // Written then renamed: the test polls for the file, and must never read it half written.
      `process.on('SIGUSR2', () => { const fs = require('node:fs'); fs.writeFileSync(${JSON.stringify(out + '.tmp')},
        JSON.stringify(process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13)))); fs.renameSync(${JSON.stringify(out + '.tmp')}, ${JSON.stringify(out)}); });\n`,
    );
    const command = [process.execPath, ...DAEMON_NODE_FLAGS, '--require', preload, path.join(built.outdir, 'server.js'), 'gateway'];
    let socket: SessionConnection | undefined;
    try {
      const gw = await startDetachedGateway({ stateDir, command, args: ['--state-dir', stateDir], timeoutMs: 60_000 });
      const local = new LocalGatewayClient(gw.url, gw.token);
      const created = await local.createRun('default', { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'idle' }, spec: { runtime: 'process', mode: { session: {} } } });
      const run = await local.waitPhase('default', created.metadata.name ?? '', ['Ready']);
      const idle = await builtinsLoaded(gw.pid, out);
      assert.ok(idle.includes('http') && idle.includes('child_process'), `the probe sees built-ins: ${idle.join(' ')}`);
      assert.equal(idle.includes('tls'), false, 'an idle daemon with a process sandbox loaded tls (ws or an HTTP client)');

      socket = new SessionConnection({ endpointUrl: run.status?.endpoint?.url ?? '', token: gw.token });
      let stdout = '';
      let exitCode: number | undefined;
      for await (const event of socket.operate({ command: { argv: ['echo', 'over ws'] } })) {
        if (event.type === 'output' && event.output.data) stdout += Buffer.from(event.output.data, 'base64').toString();
        if (event.type === 'completed') exitCode = event.completed.command?.exitCode;
      }
      assert.deepEqual({ stdout, exitCode }, { stdout: 'over ws\n', exitCode: 0 });
      assert.ok((await builtinsLoaded(gw.pid, out)).includes('tls'), 'ws, loaded for the socket, brings tls: the probe would see it at start');
    } finally {
      socket?.close();
      await stopGateway({ stateDir });
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('its source is Latin-1, and making it so keeps what the code means', async () => {
    const bundle = fs.readFileSync(path.join(built.outdir, 'cli/gateway.js'), 'utf8');
    assert.equal(/[\u0100-\uffff]/.exec(bundle)?.[0], undefined, 'a character above U+00FF doubles the source on the heap');
    const { latin1Source } = (await import(path.join(ROOT, 'esbuild.mjs'))) as { latin1Source(file: string): void };
    const file = path.join(built.outdir, 'sample.js');
    fs.writeFileSync(file, "// it’s a comment — with “quotes”\nmodule.exports = { quote: /’(\\w+)”/.exec('x’word”')?.[1], emoji: /😀/u.test('a😀') };\n");
    latin1Source(file);
    assert.equal(/[\u0100-\uffff]/.test(fs.readFileSync(file, 'utf8')), false);
    assert.deepEqual(((await import(pathToFileURL(file).href)) as { default: unknown }).default, { quote: 'word', emoji: true });
  });
});
