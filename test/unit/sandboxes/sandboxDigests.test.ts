// Hashing files inside a sandbox: what a sandbox answers is not trusted. A real `sha256sum -z` (GNU) and a real
// BusyBox `sha256sum` (no `-z`: a line per file, as in Alpine) through a real local gateway for the ordinary answers;
// a client playing a sandbox for the answers no honest sha256sum gives.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { GatewayClient, type CommandOutput } from '../../../protocol/kruntimes/gatewayClient';
import { sha256InSandbox } from '../../../server/sandboxes/sandboxDigests';
import { createActivationWorld, type ActivationWorld } from '../../fixtures/activation/harness';
import { ImageClient } from '../../fixtures/sandboxes/imageClient';

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** A sandbox whose every command answers `answer(argv)`. */
function playing(answer: (argv: string[]) => Partial<CommandOutput>): GatewayClient {
  const client = Object.create(GatewayClient.prototype) as GatewayClient;
  client.runCommand = async (command) => ({ exitCode: 0, stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), timedOut: false, truncated: false, ...answer(command.argv ?? []) }) as CommandOutput;
  return client;
}

describe('SHA-256 computed in a sandbox', function () {
  this.timeout(60_000);
  let world: ActivationWorld;
  let root: string;
  let client: GatewayClient;
  let busybox: ImageClient;

  before(async () => {
    world = await createActivationWorld();
    const sandbox = await world.provider.create({ provider: 'local', runtime: 'process', namespace: 'default' }, { waitForReady: true });
    root = (await world.provider.hostDirectory(sandbox.ref)) as string;
    const connection = await world.provider.open(sandbox.ref);
    client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
    busybox = new ImageClient({ endpoint: connection.endpoint, token: connection.token });
    busybox.tools = 'busybox';
  });

  after(async () => {
    await client?.close();
    await busybox?.close();
    await world?.dispose();
  });

  it('hashes 450 files in several commands, names with spaces, quotes, a leading dash and a newline included', async () => {
    const names = ['-n', 'a  b', "it's", 'new\nline', '深/好', ...Array.from({ length: 445 }, (_, i) => `many/f${i}.txt`)];
    fs.mkdirSync(path.join(root, '深'));
    fs.mkdirSync(path.join(root, 'many'));
    for (const n of names) fs.writeFileSync(path.join(root, n), `content of ${n}`);
    const digests = await sha256InSandbox(client, [...names, 'gone.txt', 'many']);
    assert.ok(digests !== undefined);
    assert.equal(digests.size, names.length, 'a path that is gone or a directory is left out');
    for (const n of names) assert.equal(digests.get(n), sha(`content of ${n}`), n);

    // BusyBox's sha256sum has no -z: one line per file, so the names a line cannot hold (and a backslash, which GNU's
    // would escape there) are left for the caller to read.
    fs.writeFileSync(path.join(root, 'back\\slash'), 'content of back\\slash');
    const commands = busybox.commands.length;
    const lines = await sha256InSandbox(busybox, [...names, 'back\\slash', 'gone.txt', 'many']);
    assert.ok(lines !== undefined);
    assert.deepEqual([...lines.keys()].sort(), names.filter((n) => n !== 'new\nline').sort(), 'all but the names with a newline or a backslash');
    for (const [n, digest] of lines) assert.equal(digest, sha(`content of ${n}`), n);
    const run = busybox.commands.slice(commands);
    assert.deepEqual(run[0]?.slice(0, 2), ['sha256sum', '-z'], 'asked with -z first');
    assert.ok(run.slice(1).every((argv) => !argv.includes('-z') && !argv.includes('./new\nline') && !argv.includes('./back\\slash')), 'then by lines, never about those two');
    // Asked again (a comparison repeats while the sandbox changes): by lines at once.
    const again = busybox.commands.length;
    assert.deepEqual(await sha256InSandbox(busybox, ['-n', "it's"]), new Map([['-n', sha('content of -n')], ["it's", sha("content of it's")]]));
    assert.deepEqual(busybox.commands.slice(again).map((argv) => argv.includes('-z')), [false], 'one command, without -z');
  });

  it('answers undefined when the sandbox cannot hash: no sha256sum, or one that refuses what it is asked', async () => {
    assert.equal(await sha256InSandbox(playing(() => ({ exitCode: 127, stderr: Buffer.from('sh: sha256sum: not found') })), ['a']), undefined);
    assert.equal(await sha256InSandbox(playing(() => ({ exitCode: 1, stderr: Buffer.from('sha256sum: unrecognized option: z') })), ['a']), undefined);
  });

  it('distrusts an answer that names a file it was not asked about, or is not a digest', async () => {
    const lying = (stdout: string) => sha256InSandbox(playing(() => ({ stdout: Buffer.from(stdout) })), ['a.txt']);
    assert.equal(await lying(`${sha('x')}  ./b.txt\0`), undefined, 'another file');
    assert.equal(await lying(`${sha('x')}  ./../a.txt\0`), undefined, 'a path out of the workspace');
    assert.equal(await lying(`${sha('x').toUpperCase()}  ./a.txt\0`), undefined, 'not lowercase hex');
    assert.equal(await lying(`${sha('x').slice(0, 60)}  ./a.txt\0`), undefined, 'too short');
    assert.deepEqual(await lying(`${sha('x')}  ./a.txt\0`), new Map([['a.txt', sha('x')]]));
    assert.deepEqual(await lying(`${sha('x')} *./a.txt\0`), new Map([['a.txt', sha('x')]]), 'binary mode marker');

    // A sha256sum without -z, answering lines: the same distrust.
    const byLines = (stdout: string, asked = ['a.txt']) =>
      sha256InSandbox(playing((argv) => (argv.includes('-z') ? { exitCode: 1, stderr: Buffer.from('sha256sum: unrecognized option: z') } : { stdout: Buffer.from(stdout) })), asked);
    assert.deepEqual(await byLines(`${sha('x')}  ./a.txt\n`), new Map([['a.txt', sha('x')]]));
    assert.equal(await byLines(`${sha('x')}  ./a.txt\n${sha('y')}  ./b.txt\n`), undefined, 'a line about a file not asked');
    assert.equal(await byLines(`${sha('x')}  ./a.txt\0`), undefined, 'a NUL where a line ends');
    assert.deepEqual(await byLines('', ['a\nb']), new Map(), 'a name with a newline is never asked about');
  });
});
