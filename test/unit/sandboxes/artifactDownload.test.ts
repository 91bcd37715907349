// kruntimes artifact download over real gRPC on loopback, against the SIMULATED runtimed
// ArtifactService, with real files: verified file and directory artifacts, a server that lies
// (metadata, digest, size), runtimed's refusals, abort mid-stream, and malicious tar.gz members —
// and in every failure nothing is left in (or outside) the destination.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { ARTIFACT_CHUNK_BYTES } from '../../../protocol/kruntimes/artifactService';
import type { ArtifactRef } from '../../../protocol/kruntimes/run';
import { tarDirectory } from '../../../server/local/deterministicTar';
import { SandboxError } from '../../../server/sandboxes/provider';
import { downloadArtifact, downloadArtifacts } from '../../../server/sandboxes/kruntimes/artifactDownload';
import { startArtifactServer, type ArtifactRefusal, type ArtifactServerHandle, type ServedArtifact } from '../../fixtures/cluster/artifactServer';
import { header, pad } from '../../fixtures/bundle/maliciousArchive';

const NS = 'team-a';
const RUN = 'sbx-1';

function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

function refFor(name: string, bytes: Buffer, type: ArtifactRef['type'] = 'file'): ArtifactRef {
  return {
    name,
    driver: 'filesystem',
    type,
    location: { filesystem: { path: `namespaces/${NS}/runs/uid-1/${name}` } },
    sizeBytes: bytes.length,
    digest: sha256(bytes),
    contentType: type === 'directory' ? 'application/gzip' : 'application/octet-stream',
  };
}

function listTree(root: string): string[] {
  if (!fs.existsSync(root)) return [];
  const out: string[] = [];
  const visit = (rel: string) => {
    for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(path.join(root, r));
      if (st.isDirectory()) {
        out.push(`d ${r}`);
        visit(r);
      } else out.push(`${st.isSymbolicLink() ? 'l' : 'f'} ${r} ${st.size} ${st.mode & 0o111 ? 'x' : '-'}`);
    }
  };
  visit('');
  return out;
}

async function rejectsWith(promise: Promise<unknown>, code: string, pattern: RegExp): Promise<SandboxError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof SandboxError, `expected a SandboxError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.match(err.message, pattern);
    return err;
  }
  assert.fail('expected the download to fail');
}

async function gzTarOf(dir: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of tarDirectory(dir)) parts.push(chunk);
  return gzipSync(Buffer.concat(parts));
}

describe('kruntimes artifact download (gRPC, simulated runtimed)', function () {
  this.timeout(60_000);
  let work: string;
  let server: ArtifactServerHandle;
  const served = new Map<string, ServedArtifact | ArtifactRefusal>();
  let n = 0;

  /** A fresh destination inside its own parent, so writes beside or above it are visible too. */
  const destination = () => {
    const parent = path.join(work, `case-${++n}`);
    fs.mkdirSync(parent);
    return { parent, dest: path.join(parent, 'downloads') };
  };

  /** Serves `bytes` as artifact `name` and returns the Run's ref for it. */
  const serve = (name: string, bytes: Buffer, type: ArtifactRef['type'] = 'file', extra: Partial<ServedArtifact> = {}): ArtifactRef => {
    const file = path.join(work, 'store', name);
    fs.writeFileSync(file, bytes);
    const ref = refFor(name, bytes, type);
    served.set(name, { ref, file, ...extra });
    return ref;
  };

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'artifact-download-'));
    fs.mkdirSync(path.join(work, 'store'));
    server = await startArtifactServer({
      resolve: (namespace, runName, artifactName) => {
        if (namespace !== NS) return { code: 'PermissionDenied', message: `Run namespace "${namespace}" is not served by this runtimed` };
        if (runName !== RUN) return { code: 'NotFound', message: `Run ${namespace}/${runName} not found` };
        return served.get(artifactName) ?? { code: 'NotFound', message: `artifact "${artifactName}" not found on Run ${namespace}/${runName}` };
      },
    });
  });

  after(async () => {
    await server.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  const base = (dest: string) => ({ address: server.address, namespace: NS, runName: RUN, destinationDir: dest, unpack: true });

  it('downloads a file artifact in 64 KiB chunks and verifies it', async () => {
    const bytes = randomBytes(3 * ARTIFACT_CHUNK_BYTES + 123);
    const ref = serve('report.bin', bytes);
    const { parent, dest } = destination();
    const progress: number[] = [];
    const result = await downloadArtifact({ ...base(dest), ref, onProgress: (b) => progress.push(b) });
    assert.deepEqual(result, { name: 'report.bin', path: path.join(dest, 'report.bin'), type: 'file', sizeBytes: bytes.length, digest: ref.digest });
    assert.ok(fs.readFileSync(result.path).equals(bytes));
    assert.deepEqual(progress, [0, ARTIFACT_CHUNK_BYTES, 2 * ARTIFACT_CHUNK_BYTES, 3 * ARTIFACT_CHUNK_BYTES, bytes.length]);
    assert.deepEqual(listTree(parent), ['d downloads', `f downloads/report.bin ${bytes.length} -`]);
  });

  it('downloads an empty file artifact (no data messages at all)', async () => {
    const ref = serve('empty.txt', Buffer.alloc(0));
    const { dest } = destination();
    const result = await downloadArtifact({ ...base(dest), ref });
    assert.equal(fs.readFileSync(result.path).length, 0);
  });

  it('downloads a directory artifact as <name>.tar.gz and unpacks it', async () => {
    const src = path.join(work, 'src-tree');
    fs.mkdirSync(path.join(src, 'logs/deep'), { recursive: true });
    fs.mkdirSync(path.join(src, 'empty'));
    fs.writeFileSync(path.join(src, 'logs/deep/run.log'), 'done\n'.repeat(50_000));
    fs.writeFileSync(path.join(src, 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
    fs.writeFileSync(path.join(src, 'zero'), '');
    const archive = await gzTarOf(src);
    assert.ok((await gzTarOf(src)).equals(archive), 'the archive is deterministic');
    const ref = serve('results', archive, 'directory');
    const { parent, dest } = destination();
    const result = await downloadArtifact({ ...base(dest), ref });
    assert.equal(result.path, path.join(dest, 'results'));
    assert.equal(result.unpackedTo, path.join(dest, 'results'));
    assert.deepEqual(listTree(result.unpackedTo!), listTree(src));
    assert.equal(fs.readFileSync(path.join(dest, 'results/logs/deep/run.log'), 'utf8'), 'done\n'.repeat(50_000));
    // The folder arrives once, as the folder: no archive, staging or partial files beside it.
    assert.deepEqual(fs.readdirSync(dest).sort(), ['results']);
    assert.deepEqual(fs.readdirSync(parent), ['downloads']);

    // Downloading again replaces the earlier tree (and only once the new one is complete).
    fs.writeFileSync(path.join(dest, 'results/stale.txt'), 'old');
    await downloadArtifact({ ...base(dest), ref });
    assert.deepEqual(listTree(path.join(dest, 'results')), listTree(src));
    assert.deepEqual(fs.readdirSync(dest).sort(), ['results']);
  });

  it('refuses metadata that differs from the Run’s ref, naming both values', async () => {
    const bytes = Buffer.from('the real bytes');
    const ref = serve('meta.txt', bytes, 'file', { metadata: { digest: sha256(Buffer.from('other')), size_bytes: 99 } });
    const { parent, dest } = destination();
    const err = await rejectsWith(downloadArtifact({ ...base(dest), ref }), 'artifact_invalid', /differently/);
    assert.ok(err.message.includes(ref.digest) && err.message.includes(sha256(Buffer.from('other'))), err.message);
    assert.match(err.message, /size 99 instead of 14/);
    assert.deepEqual(listTree(parent), ['d downloads']);
  });

  it('refuses bytes that do not match the digest and keeps nothing (not even .partial)', async () => {
    const bytes = randomBytes(2 * ARTIFACT_CHUNK_BYTES);
    const lie = { ...refFor('liar.bin', bytes), digest: sha256(Buffer.from('what runtimed claims')) };
    fs.writeFileSync(path.join(work, 'store/liar.bin'), bytes);
    served.set('liar.bin', { ref: lie, file: path.join(work, 'store/liar.bin') });
    const { parent, dest } = destination();
    await rejectsWith(downloadArtifact({ ...base(dest), ref: lie }), 'artifact_invalid', /does not match its digest.*nothing was kept/);
    assert.deepEqual(listTree(parent), ['d downloads']);
  });

  it('stops as soon as more bytes than size_bytes arrive', async () => {
    const bytes = randomBytes(40 * ARTIFACT_CHUNK_BYTES);
    const claimed = bytes.subarray(0, ARTIFACT_CHUNK_BYTES);
    const ref = refFor('big.bin', claimed);
    fs.writeFileSync(path.join(work, 'store/big.bin'), bytes);
    served.set('big.bin', { ref, file: path.join(work, 'store/big.bin') });
    const { parent, dest } = destination();
    const progress: number[] = [];
    await rejectsWith(downloadArtifact({ ...base(dest), ref, onProgress: (b) => progress.push(b) }), 'artifact_invalid', /more than its announced 65536 bytes/);
    assert.deepEqual(listTree(parent), ['d downloads']);
    assert.ok(progress.every((b) => b <= ARTIFACT_CHUNK_BYTES), `wrote past the announced size: ${progress.join(',')}`);
    const call = server.calls.findLast((c) => c.artifactName === 'big.bin')!;
    await waitFor(() => call.cancelled);
    assert.ok(call.cancelled, 'the client cancelled the call instead of reading the rest');
    assert.ok(call.sentBytes < bytes.length, `runtimed was made to send all ${call.sentBytes} bytes`);
  });

  it('maps NotFound and PermissionDenied to SandboxErrors carrying runtimed’s message', async () => {
    const { dest } = destination();
    const missing = refFor('nope.txt', Buffer.from('x'));
    await rejectsWith(downloadArtifact({ ...base(dest), ref: missing }), 'sandbox_not_found', /artifact "nope\.txt" not found on Run team-a\/sbx-1/);
    await rejectsWith(
      downloadArtifact({ ...base(dest), runName: 'other-run', ref: missing }),
      'sandbox_not_found',
      /Run team-a\/other-run not found/,
    );
    await rejectsWith(
      downloadArtifact({ ...base(dest), namespace: 'team-b', ref: missing }),
      'artifact_invalid',
      /refused to serve .*Run namespace "team-b" is not served by this runtimed/,
    );
    assert.deepEqual(fs.readdirSync(dest), []);
  });

  it('reports an unreachable runtimed as provider_unavailable', async () => {
    const { dest } = destination();
    const closed = await startArtifactServer({ resolve: () => ({ code: 'NotFound', message: 'unused' }) });
    await closed.close();
    await rejectsWith(
      downloadArtifact({ ...base(dest), address: closed.address, ref: refFor('a', Buffer.from('a')) }),
      'provider_unavailable',
      /cannot reach runtimed's artifact service .*port-forward/,
    );
  });

  it('aborting mid-download cancels the call and leaves nothing', async () => {
    const bytes = randomBytes(8 * ARTIFACT_CHUNK_BYTES);
    const ref = serve('slow.bin', bytes, 'file', { stallAfterBytes: 2 * ARTIFACT_CHUNK_BYTES });
    const { parent, dest } = destination();
    const controller = new AbortController();
    const download = downloadArtifact({
      ...base(dest),
      ref,
      signal: controller.signal,
      onProgress: (b) => {
        // Not a wait before an assertion: the abort is the action under test, made while the source
        // has stalled (it sends nothing more after these bytes), 50 ms later so the stall is real.
        if (b >= 2 * ARTIFACT_CHUNK_BYTES) setTimeout(() => controller.abort(), 50);
      },
    });
    await assert.rejects(download, (err: Error) => err.name === 'AbortError');
    assert.deepEqual(listTree(parent), ['d downloads']);
    const call = server.calls.findLast((c) => c.artifactName === 'slow.bin')!;
    await waitFor(() => call.cancelled);
    assert.equal(call.sentBytes, 2 * ARTIFACT_CHUNK_BYTES);
  });

  it('gives up on a stalled stream after the idle timeout', async () => {
    const ref = serve('stuck.bin', randomBytes(4 * ARTIFACT_CHUNK_BYTES), 'file', { stallAfterBytes: ARTIFACT_CHUNK_BYTES });
    const { parent, dest } = destination();
    await rejectsWith(downloadArtifact({ ...base(dest), ref, idleTimeoutMs: 300 }), 'provider_unavailable', /sent nothing for 0 s/);
    assert.deepEqual(listTree(parent), ['d downloads']);
  });

  describe('malicious directory artifacts', () => {
    const file = (p: string, content: string, bend: Parameters<typeof header>[1] = {}) => {
      const body = Buffer.from(content);
      return [header({ path: p, kind: 'file', mode: 0o644, size: body.length }, bend), body, pad(body.length)];
    };
    const archiveOf = (...parts: Buffer[][]) => gzipSync(Buffer.concat([...parts.flat(), Buffer.alloc(1024)]));

    const cases: { title: string; archive: () => Buffer; message: RegExp }[] = [
      { title: 'a ../x member', archive: () => archiveOf(file('ok.txt', 'fine'), file('../x', 'escaped')), message: /leaves the directory \("\.\.\/x"\)/ },
      { title: 'a nested a/../../x member', archive: () => archiveOf(file('a/../../x', 'escaped')), message: /leaves the directory/ },
      { title: 'an absolute member', archive: () => archiveOf(file(`${'/'}tmp/x-abs-${process.pid}`, 'escaped')), message: /absolute member/ },
      {
        title: 'a symlink member followed by a file through it',
        archive: () => archiveOf([header({ path: 'link', kind: 'file', mode: 0o777, size: 0 }, { typeflag: '2', linkname: '..' })], file('link/x', 'through the link')),
        message: /"link" that is a symbolic link/,
      },
      {
        title: 'a hard link member',
        archive: () => archiveOf(file('a.txt', 'a'), [header({ path: 'b.txt', kind: 'file', mode: 0o644, size: 0 }, { typeflag: '1', linkname: 'a.txt' })]),
        message: /"b\.txt" that is a hard link/,
      },
      {
        title: 'a FIFO member',
        archive: () => archiveOf([header({ path: 'pipe', kind: 'file', mode: 0o644, size: 0 }, { typeflag: '6' })]),
        message: /that is a FIFO/,
      },
      {
        title: 'a character device member',
        archive: () => archiveOf([header({ path: 'dev', kind: 'file', mode: 0o644, size: 0 }, { typeflag: '3' })]),
        message: /that is a character device/,
      },
    ];

    for (const c of cases) {
      it(`refuses ${c.title} and writes nothing inside or outside the destination`, async () => {
        const name = `evil-${n + 1}`;
        const ref = serve(name, c.archive(), 'directory');
        const { parent, dest } = destination();
        await rejectsWith(downloadArtifact({ ...base(dest), ref }), 'artifact_invalid', c.message);
        assert.deepEqual(listTree(parent), ['d downloads'], 'nothing inside the destination, nothing beside it');
        assert.equal(fs.existsSync(path.join(work, 'x')), false);
        assert.equal(fs.existsSync(`/tmp/x-abs-${process.pid}`), false);
      });
    }

    it('keeps the verified archive when it is not asked to unpack it', async () => {
      const ref = serve('evil-kept', archiveOf(file('../x', 'escaped')), 'directory');
      const { dest } = destination();
      const result = await downloadArtifact({ ...base(dest), unpack: false, ref });
      assert.equal(result.unpackedTo, undefined);
      assert.deepEqual(fs.readdirSync(dest), ['evil-kept.tar.gz']);
    });
  });

  describe('downloadArtifacts', () => {
    it('downloads the selected artifacts one by one with overall progress', async () => {
      const a = serve('a.txt', Buffer.from('aaaa'));
      const b = serve('b.txt', randomBytes(ARTIFACT_CHUNK_BYTES + 1));
      const c = serve('c.txt', Buffer.from('c'));
      const { dest } = destination();
      const seen: string[] = [];
      const results = await downloadArtifacts({
        ...base(dest),
        refs: [a, b, c],
        names: ['a.txt', 'b.txt'],
        onProgress: (p) => seen.push(`${p.artifact}:${p.doneBytes}/${p.totalBytes}`),
      });
      assert.deepEqual(results.map((r) => r.name), ['a.txt', 'b.txt']);
      assert.deepEqual(fs.readdirSync(dest).sort(), ['a.txt', 'b.txt']);
      const total = 4 + ARTIFACT_CHUNK_BYTES + 1;
      assert.equal(seen[0], `a.txt:0/${total}`);
      assert.equal(seen.at(-1), `b.txt:${total}/${total}`);
    });

    it('refuses names the Run does not have, before downloading anything', async () => {
      const a = serve('only.txt', Buffer.from('x'));
      const { dest } = destination();
      await rejectsWith(downloadArtifacts({ ...base(dest), refs: [a], names: ['only.txt', 'ghost'] }), 'sandbox_not_found', /no artifact named ghost/);
      assert.equal(fs.existsSync(dest), false);
    });

    it('refuses two artifacts that would land on one path', async () => {
      const dir = serve('out', gzipSync(Buffer.alloc(1024)), 'directory');
      const clash = serve('out.tar.gz', Buffer.from('x'));
      const { dest } = destination();
      await rejectsWith(downloadArtifacts({ ...base(dest), refs: [dir, clash] }), 'artifact_invalid', /would both be saved as out\.tar\.gz/);
    });
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}
