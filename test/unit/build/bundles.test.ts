// The two bundles build, and the extension bundle carries no server-only code: the Kubernetes
// client, the bundle codec, the local runtime and the companion server stay in dist/server.js.
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';

interface Metafile {
  inputs: Record<string, unknown>;
  outputs: Record<string, { imports: { path: string; external?: boolean }[] }>;
}
interface BuildResult {
  metafile: Metafile;
}
interface EsbuildModule {
  buildAll(options: { outdir: string; metafile: boolean; write: boolean }): Promise<{ extension: BuildResult; server: BuildResult }>;
}

const SERVER_ONLY = [/^server\//, /node_modules\/@kubernetes\/client-node\//, /node_modules\/pg\//, /node_modules\/@grpc\//, /node_modules\/protobufjs\//];
/** `ws` (the era-D Session connection, in both bundles) tries these native accelerators in a try/catch and runs without them. */
const WS_OPTIONAL = new Set(['bufferutil', 'utf-8-validate']);

describe('build: esbuild bundles', function () {
  this.timeout(60_000);
  let built: { extension: BuildResult; server: BuildResult };

  before(async () => {
    const esbuildConfig = (await import(path.resolve(__dirname, '../../../esbuild.mjs'))) as EsbuildModule;
    built = await esbuildConfig.buildAll({ outdir: path.join(os.tmpdir(), 'sandbox-sessions-build-test'), metafile: true, write: false });
  });

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

  it('bundles the CLI entry point into the server bundle with no externals but built-ins', () => {
    const inputs = Object.keys(built.server.metafile.inputs);
    assert.ok(inputs.includes('server/main.ts'));
    // pg's optional native binding is required inside a try/catch only by `pg.native`, which this
    // project never uses (no native add-ons); esbuild leaves such guarded requires external. `ws`
    // likewise tries its optional native accelerators and falls back to JavaScript without them.
    const optional = new Set(['pg-native', ...WS_OPTIONAL]);
    const externals = Object.values(built.server.metafile.outputs)
      .flatMap((o) => o.imports)
      .filter((i) => i.external && !i.path.startsWith('node:') && !isBuiltin(i.path) && !optional.has(i.path));
    assert.deepEqual(externals, []);
  });
});

function isBuiltin(name: string): boolean {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('node:module') as typeof import('node:module')).isBuiltin(name);
}
