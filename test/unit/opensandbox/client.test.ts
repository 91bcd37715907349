// The product's OpenSandbox client (server/sandboxes/opensandbox/) against the simulator (or a
// real server): connection resolution as the SDK does it, label-safe product metadata and
// listing our sandboxes, TTL renew, delete, exec with streamed lines / exit codes / interrupt by
// abort, file operations with large files, the PTY terminal, and errors with stable codes whose
// messages say what to do and never contain the API key.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { OpenSandboxError } from '../../../server/sandboxes/opensandbox/errors';
import { isLabelValue, labelValue, LABEL_ACTIVATION, LABEL_PRODUCT, LABEL_SESSION } from '../../../server/sandboxes/opensandbox/labels';
import { OpenSandboxClient, type OpenSandboxSandbox } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { startTarget, type Target } from './target';

async function rejectsWith(p: Promise<unknown>, code: string): Promise<OpenSandboxError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof OpenSandboxError, `expected OpenSandboxError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    return e;
  }
  assert.fail(`expected ${code}`);
}

describe('opensandbox client (server/sandboxes/opensandbox)', function () {
  this.timeout(60_000);

  describe('connection and labels', () => {
    it('resolves domain and key from explicit options, else the SDK env variables, else localhost:8080', () => {
      const env = { OPEN_SANDBOX_DOMAIN: 'env-host:9000', OPEN_SANDBOX_API_KEY: 'env-secret' };
      const fromEnv = resolveConnection({ env });
      assert.equal(fromEnv.domain, 'env-host:9000');
      assert.equal(fromEnv.hasApiKey, true);
      assert.equal(fromEnv.config().headers['OPEN-SANDBOX-API-KEY'], 'env-secret');
      const explicit = resolveConnection({ env, domain: 'http://x:1', apiKey: 'mine' });
      assert.equal(explicit.config().headers['OPEN-SANDBOX-API-KEY'], 'mine');
      assert.equal(explicit.config().getBaseUrl(), 'http://x:1/v1');
      const none = resolveConnection({ env: {} });
      assert.equal(none.domain, 'localhost:8080');
      assert.equal(none.config().headers['OPEN-SANDBOX-API-KEY'], undefined, 'no key, and the SDK does not read process.env behind us');
      assert.ok(!fromEnv.describe().includes('env-secret'));
      assert.match(fromEnv.describe(), /API key set/);
    });

    it('turns any id into a deterministic label-safe value', () => {
      assert.equal(labelValue('sess-123_a.b'), 'sess-123_a.b');
      for (const raw of ['2026-01-01T00:00:00Z', 'a/b c', '-x-', ':::', 'y'.repeat(200), 'ünïcode']) {
        const v = labelValue(raw);
        assert.ok(isLabelValue(v), `${raw} → ${v}`);
        assert.equal(labelValue(raw), v, 'deterministic');
      }
      assert.notEqual(labelValue('a:b'), labelValue('a/b'), 'different ids stay different');
    });
  });

  describe('401s beyond the key check (a server in another auth mode, a proxy in front of it)', () => {
    /** A lifecycle server that answers every call with one 401 body. */
    async function answering401(body: string): Promise<{ domain: string; close(): Promise<void> }> {
      const server = http.createServer((req, res) => {
        req.resume();
        res.writeHead(401, { 'content-type': body.startsWith('{') ? 'application/json' : 'text/plain' }).end(body);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      return { domain: `127.0.0.1:${(server.address() as { port: number }).port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
    }
    const key = `key-${crypto.randomBytes(8).toString('hex')}`;

    it('a code other than the key check\'s is said with the server\'s words, not as a refused key', async () => {
      const server = await answering401(JSON.stringify({ code: 'MISSING_TRUSTED_IDENTITY', message: 'Trusted identity headers are required.' }));
      try {
        const e = await rejectsWith(new OpenSandboxClient(resolveConnection({ domain: server.domain, apiKey: key })).listOurs(), 'Unauthenticated');
        assert.match(e.message, /answered 401 MISSING_TRUSTED_IDENTITY: Trusted identity headers are required\. The server wants more than an API key/);
        assert.doesNotMatch(e.message, /refused|OPEN_SANDBOX_API_KEY/, 'a new key would not help: the message must not send the user after one');
        assert.equal(e.upstream?.code, 'MISSING_TRUSTED_IDENTITY');
        assert.ok(!JSON.stringify(e).includes(key) && !e.message.includes(key));
      } finally {
        await server.close();
      }
    });

    it('the key check\'s own codes, and a 401 without a code, still point at the key setting', async () => {
      for (const [body, words] of [
        [JSON.stringify({ code: 'INVALID_API_KEY', message: 'Authentication credentials are invalid.' }), /answered 401 \(the API key was refused\)\. Set OPEN_SANDBOX_API_KEY/],
        [JSON.stringify({ code: 'MISSING_API_KEY', message: 'Authentication credentials are missing.' }), /answered 401 \(no API key was sent\)\. Set OPEN_SANDBOX_API_KEY/],
        ['Unauthorized', /answered 401 \(the API key was refused: Unauthorized\)\. Set OPEN_SANDBOX_API_KEY/],
      ] as const) {
        const server = await answering401(body);
        try {
          const e = await rejectsWith(new OpenSandboxClient(resolveConnection({ domain: server.domain, apiKey: key })).listOurs(), 'Unauthenticated');
          assert.match(e.message, words, body);
        } finally {
          await server.close();
        }
      }
    });
  });

  describe('against the target', () => {
    let target: Target;
    let client: OpenSandboxClient;
    let sbx: OpenSandboxSandbox;
    const session = `sess:${crypto.randomBytes(4).toString('hex')}/x`;

    before(async () => {
      target = await startTarget();
      client = new OpenSandboxClient(resolveConnection({ domain: target.domain, apiKey: target.apiKey }));
      sbx = await client.create({ image: target.image, session, activation: 'act-1', ttlSeconds: 600 });
    });
    after(async () => {
      await sbx?.kill();
      await target?.simulator?.close();
    });

    it('creates with product metadata, lists only ours (by session), renews the TTL', async () => {
      const info = await sbx.info();
      assert.equal(info.state, 'Running');
      assert.equal(info.metadata[LABEL_PRODUCT], 'sandbox-sessions');
      assert.equal(info.metadata[LABEL_SESSION], labelValue(session));
      assert.equal(info.metadata[LABEL_ACTIVATION], 'act-1');
      const other = await client.create({ image: target.image, session: 'another', ttlSeconds: 600 });
      try {
        const ours = await client.listOurs({ session });
        assert.deepEqual(ours.map((s) => s.id), [sbx.id]);
        const all = await client.listOurs();
        assert.ok(all.some((s) => s.id === other.id) && all.some((s) => s.id === sbx.id));
        const before = info.expiresAt as Date;
        const after = await client.renew(sbx.id, 1800);
        assert.ok(after.getTime() > before.getTime());
      } finally {
        await other.kill();
      }
      assert.equal(await client.kill(other.id), false, 'already gone');
      await rejectsWith(client.get(other.id), 'NotFound');
    });

    it('exec streams lines, returns exit codes, and abort interrupts the command (-1)', async () => {
      const out: string[] = [];
      const err: string[] = [];
      const r = await sbx.exec('echo one; echo two >&2; exit 4', { onStdout: (l) => out.push(l), onStderr: (l) => err.push(l) });
      assert.equal(r.exitCode, 4);
      assert.deepEqual(out, ['one']);
      assert.deepEqual(err, ['two']);
      assert.equal((await sbx.exec('true')).exitCode, 0);
      const ac = new AbortController();
      const lines: string[] = [];
      const running = sbx.exec('echo ready; sleep 60', {
        signal: ac.signal,
        onStdout: (l) => {
          lines.push(l);
          if (l === 'ready') ac.abort();
        },
      });
      const aborted = await running;
      assert.equal(aborted.exitCode, -1);
      assert.deepEqual(lines, ['ready']);
      await rejectsWith(sbx.exec('pwd', { cwd: '/does/not/exist' }), 'InvalidArgument');
    });

    it('file operations: write (mode), stat, list, rename, ranged read, 5 MiB streamed both ways, delete', async () => {
      await sbx.mkdir('/workspace/proj');
      await sbx.writeFile('/workspace/proj/a.txt', 'hello world', 0o640);
      const st = await sbx.stat('/workspace/proj/a.txt');
      assert.equal(st.type, 'file');
      assert.equal(st.size, 11);
      assert.equal(st.mode, 0o640);
      assert.equal((await sbx.readFile('/workspace/proj/a.txt', { start: 6 })).toString(), 'world');
      await sbx.rename('/workspace/proj/a.txt', '/workspace/proj/b.txt');
      assert.deepEqual((await sbx.list('/workspace/proj')).map((f) => f.path), ['/workspace/proj/b.txt']);
      const big = crypto.randomBytes(5 * 1024 * 1024 + 3);
      async function* chunks() {
        for (let i = 0; i < big.length; i += 1 << 16) yield big.subarray(i, i + (1 << 16));
      }
      await sbx.writeFile('/workspace/proj/big.bin', chunks());
      const back: Buffer[] = [];
      for await (const c of sbx.readStream('/workspace/proj/big.bin')) back.push(Buffer.from(c));
      assert.ok(Buffer.concat(back).equals(big));
      await sbx.delete('/workspace/proj');
      await sbx.delete('/workspace/proj');
      await rejectsWith(sbx.stat('/workspace/proj'), 'NotFound');
    });

    it('a PTY terminal runs a program with a tty and reports its exit code', async () => {
      const pty = await sbx.openPty({ cwd: '/tmp' });
      let out = '';
      pty.on('data', (c) => (out += c.toString()));
      const exited = new Promise<number>((r) => pty.on('exit', r));
      pty.write('test -t 0 && echo "IS-A-$((1+1))-TTY"; exit 5\n');
      assert.equal(await exited, 5);
      assert.match(out, /IS-A-2-TTY/);
      assert.equal(pty.mode, 'pty');
      assert.ok(pty.offset > 0);
    });

    it('a wrong API key is Unauthenticated, says which setting to fix, and never shows the key', async () => {
      const badKey = `bad-${crypto.randomBytes(8).toString('hex')}`;
      const bad = new OpenSandboxClient(resolveConnection({ domain: target.domain, apiKey: badKey }));
      const e = await rejectsWith(bad.listOurs(), 'Unauthenticated');
      assert.match(e.message, /OPEN_SANDBOX_API_KEY/);
      assert.ok(!e.message.includes(badKey) && !JSON.stringify(e).includes(badKey));
      if (target.apiKey) assert.ok(!e.message.includes(target.apiKey));
    });

    it('an unreachable server is Unavailable and names the domain', async () => {
      const closed = http.createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
      const port = (closed.address() as { port: number }).port;
      await new Promise<void>((r) => closed.close(() => r()));
      const e = await rejectsWith(new OpenSandboxClient(resolveConnection({ domain: `127.0.0.1:${port}`, apiKey: 'k' })).listOurs(), 'Unavailable');
      assert.match(e.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
    });

    it('a TTL under 60 s is refused before any request', async () => {
      await rejectsWith(client.create({ image: target.image, ttlSeconds: 10 }), 'InvalidArgument');
    });
  });
});
