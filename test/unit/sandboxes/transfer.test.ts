// Moving trees into and out of a real local sandbox through the gateway: nested and empty
// directories, non-ASCII names, executable bits, and files larger than one gateway call.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { createLogger } from '../../../server/log';
import { LocalSandboxProvider } from '../../../server/sandboxes/localProvider';
import { downloadTree, fileParts, uploadFile, uploadTree } from '../../../server/sandboxes/transfer';
import { until } from '../../fixtures/waits';

const REPO = path.resolve(__dirname, '../../..');

function describeTree(root: string): string[] {
  const out: string[] = [];
  const visit = (rel: string) => {
    for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.statSync(path.join(root, r));
      if (st.isDirectory()) {
        out.push(`d ${r}`);
        visit(r);
      } else {
        const digest = createHash('sha256').update(fs.readFileSync(path.join(root, r))).digest('hex').slice(0, 16);
        out.push(`f ${r} ${st.size} ${st.mode & 0o111 ? 'x' : '-'} ${digest}`);
      }
    }
  };
  visit('');
  return out;
}

describe('sandbox tree transfer (real local gateway)', function () {
  this.timeout(60_000);
  let work: string;
  let provider: LocalSandboxProvider;
  let client: GatewayClient;
  let connection: Awaited<ReturnType<LocalSandboxProvider['open']>>;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'transfer-'));
    provider = new LocalSandboxProvider({
      stateDir: path.join(work, 'state'),
      gatewayCommand: [process.execPath, '--import', 'tsx', path.join(REPO, 'server/main.ts'), 'gateway'],
      log: createLogger(fs.createWriteStream('/dev/null'), 'error'),
    });
    const sandbox = await provider.create({ provider: 'local', runtime: 'process', namespace: 'default' }, { waitForReady: true });
    connection = await provider.open(sandbox.ref);
    client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
  });

  after(async () => {
    await client?.close();
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('round-trips a tree byte for byte, with empty directories and executable bits', async () => {
    const src = path.join(work, 'src');
    fs.mkdirSync(path.join(src, 'a/b/empty'), { recursive: true });
    fs.writeFileSync(path.join(src, 'a/b/note.txt'), 'note\n');
    fs.writeFileSync(path.join(src, 'run.sh'), '#!/bin/sh\necho ok\n', { mode: 0o755 });
    fs.writeFileSync(path.join(src, '深 x.txt'), '好');
    fs.writeFileSync(path.join(src, 'empty.bin'), '');
    const big = Buffer.alloc(1_900_000);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 11)) & 0xff;
    fs.writeFileSync(path.join(src, 'a/big.bin'), big);

    const seen: number[] = [];
    const up = await uploadTree(client, src, 'copy', { progress: (done) => seen.push(done) });
    assert.equal(up.files, 5);
    assert.equal(up.bytes, 5 + 18 + 3 + 1_900_000);
    assert.equal(seen.at(-1), up.bytes);

    const back = path.join(work, 'back');
    const down = await downloadTree(client, 'copy', back);
    assert.equal(down.files, 5);
    assert.deepEqual(describeTree(back), describeTree(src));
    const names = (await client.listPage({ path: 'copy' })).entries.map((e) => e.path);
    assert.ok(!names.some((n) => n.includes('.upload-')), `no part files left: ${names.join(', ')}`);
  });

  it('a large upload whose part fails leaves neither the file nor a part behind', async () => {
    const file = path.join(work, 'large.bin');
    fs.writeFileSync(file, Buffer.alloc(3_000_000, 7));
    let writes = 0;
    const failing = new (class extends GatewayClient {
      override writeFile(...args: Parameters<GatewayClient['writeFile']>): ReturnType<GatewayClient['writeFile']> {
        writes += 1;
        if (writes === 3) return Promise.reject(new Error('the connection dropped'));
        return super.writeFile(...args);
      }
    })({ endpoint: connection.endpoint, token: connection.token });
    try {
      await assert.rejects(uploadFile(failing, file, 'large.bin'), /the connection dropped/);
    } finally {
      await failing.close();
    }
    const names = (await client.listPage({ path: '' })).entries.map((e) => e.path);
    assert.ok(!names.some((n) => n.includes('large.bin')), `nothing of it left: ${names.join(', ')}`);
    // And whole, it arrives byte for byte.
    await uploadFile(client, file, 'large.bin');
    const back = await client.read('large.bin', { maxBytes: 786_000 });
    assert.equal(back.truncated, true);
    assert.ok(back.contents.every((b) => b === 7));
  });

  it('a large file read as parts in order arrives byte for byte by ranged reads or by dd, a few parts read ahead; a range that comes back short is refused', async () => {
    const big = Buffer.alloc(2_700_000);
    for (let i = 0; i < big.length; i++) big[i] = (i * 13 + (i >> 10)) & 0xff;
    const local = path.join(work, 'big-down.bin');
    fs.writeFileSync(local, big);
    await uploadFile(client, local, 'big-down.bin');
    const short: { at?: number } = {};
    class Client extends GatewayClient {
      constructor(private readonly ranged: boolean) {
        super({ endpoint: connection.endpoint, token: connection.token });
      }
      override async status(...args: Parameters<GatewayClient['status']>): ReturnType<GatewayClient['status']> {
        const status = await super.status(...args);
        return { ...status, capabilities: { ...status.capabilities, rangedReads: this.ranged } };
      }
      started = 0;
      settled = 0;
      override async read(...args: Parameters<GatewayClient['read']>): ReturnType<GatewayClient['read']> {
        this.started += 1;
        const got = await super.read(...args).finally(() => (this.settled += 1));
        return short.at !== undefined && args[1]?.offset === short.at ? { ...got, contents: got.contents.subarray(0, got.contents.length - 1) } : got;
      }
    }
    for (const ranged of [true, false]) {
      const c = new Client(ranged);
      try {
        const parts: Buffer[] = [];
        const total = Math.ceil(big.length / (512 * 1024));
        for await (const part of fileParts(c, 'big-down.bin', big.length)) {
          parts.push(part);
          if (!ranged) continue;
          // A slow consumer: once every read started has come back, no further one has started — 4 parts ahead at most.
          await until('the reads ahead have come back', () => c.settled === c.started);
          assert.equal(c.started, Math.min(parts.length + 4, total), `reads started with ${parts.length} parts taken`);
        }
        assert.ok(Buffer.concat(parts).equals(big), `${ranged ? 'ranged reads' : 'dd'}: the same bytes, in order`);
        assert.equal(parts.length, total);
      } finally {
        await c.close();
      }
    }
    short.at = 512 * 1024 * 2;
    const c = new Client(true);
    try {
      await assert.rejects(async () => {
        for await (const part of fileParts(c, 'big-down.bin', big.length)) assert.ok(part.length > 0);
      }, /changed while it was copied/);
    } finally {
      await c.close();
    }
  });

  it('skips what the caller excludes and refuses to overwrite an existing local folder', async () => {
    const dest = path.join(work, 'partial');
    await downloadTree(client, 'copy', dest, { skip: (rel) => rel === 'a' || rel.endsWith('.bin') });
    assert.deepEqual(fs.readdirSync(dest).sort(), ['run.sh', '深 x.txt']);
    await assert.rejects(downloadTree(client, 'copy', dest), /EEXIST/);
  });

  it('moves 300 files in 80 directories two levels deep with several calls in flight, and stops starting new ones once cancelled', async () => {
    const src = path.join(work, 'many');
    for (let i = 0; i < 300; i++) {
      const dir = path.join(src, `d${i % 20}`, `e${i % 3}`);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `f${i}.txt`), `file ${i}\n`.repeat(1 + (i % 7)));
    }
    const up = await uploadTree(client, src, 'many');
    assert.deepEqual([up.files, up.directories], [300, 80]);
    const back = path.join(work, 'many-back');
    await downloadTree(client, 'many', back);
    assert.deepEqual(describeTree(back), describeTree(src));

    const controller = new AbortController();
    let reported = 0;
    await assert.rejects(
      uploadTree(client, src, 'many-cancelled', {
        signal: controller.signal,
        progress: () => {
          reported += 1;
          if (reported === 10) controller.abort();
        },
      }),
      (e: unknown) => (e as Error).name === 'AbortError',
    );
    const copied = (await downloadTree(client, 'many-cancelled', path.join(work, 'many-cancelled'))).files;
    assert.ok(copied >= 10 && copied < 300, `${copied} files were copied before the cancel took effect`);
  });

  it('refuses symbolic links in the source', async () => {
    const src = path.join(work, 'links');
    fs.mkdirSync(src);
    fs.symlinkSync('/etc/passwd', path.join(src, 'pw'));
    await assert.rejects(uploadTree(client, src, 'links'), (e: unknown) => (e as { code?: string }).code === 'unsupported_entry');
  });
});
