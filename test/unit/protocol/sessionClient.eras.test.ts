// The session client's behaviour, run unchanged against the real local gateway serving era C
// (operations over HTTP) and era D (operations only over `operations:ws`): commands with
// stdin, file mutations read back over HTTP, stream events in order, cancellation that kills
// the remote process, a connection cut mid-operation reported as "outcome unknown" and never
// re-sent, error answers that leave the client usable, and lease heartbeats. Era D adds the
// Session-connection rules: one socket per sandbox per process, one operation at a time with a
// client-side FIFO queue whose aborted entries never reach the gateway, and 429 on the upgrade.
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { WebSocket } from 'ws';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayError, GatewayTransportError, GatewayUsageError } from '../../../protocol/kruntimes/gatewayErrors';
import { forgetGatewayEras } from '../../../protocol/kruntimes/gatewayEra';
import type { Run } from '../../../protocol/kruntimes/run';
import { call, readyRun, runsPath, startTestGateway, waitPhase, type TestGateway } from '../gateway/harness';

type Era = 'C' | 'D';

/** A TCP relay in front of the gateway, so a test can cut every connection mid-operation. */
class Relay {
  private readonly server = net.createServer((client) => this.relay(client));
  private readonly sockets = new Set<net.Socket>();
  connections = 0;
  port = 0;
  constructor(private readonly target: number) {}
  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }
  private relay(client: net.Socket): void {
    this.connections++;
    const upstream = net.connect(this.target, '127.0.0.1');
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  }
  cutAll(): void {
    for (const s of this.sockets) s.destroy();
  }
  async stop(): Promise<void> {
    this.cutAll();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function processGone(pid: number): Promise<boolean | undefined> {
  return fs.readFile(`/proc/${pid}/stat`, 'utf8').then(
    (stat) => (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z') ? true : undefined),
    () => true,
  );
}

const isAbort = (e: unknown) => (e as Error).name === 'AbortError';

for (const era of ['C', 'D'] as const satisfies readonly Era[]) {
  describe(`session client on era ${era} (local gateway${era === 'D' ? ', api era-d' : ''})`, function () {
    this.timeout(30_000);
    let tg: TestGateway;
    const clients: GatewayClient[] = [];

    before(async () => {
      forgetGatewayEras();
      tg = await startTestGateway({ api: era === 'D' ? 'era-d' : 'era-c' });
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.close()));
      await tg.cleanup();
    });

    const sandbox = async (session: Record<string, unknown> = {}) => {
      const { run } = await readyRun(tg.gw, { session });
      return run;
    };
    const clientOf = (run: Run, url = run.status!.endpoint!.url) => {
      const c = new GatewayClient({ endpoint: { url }, token: tg.gw.token });
      clients.push(c);
      return c;
    };
    const requests = async (run: Run) =>
      (await call(tg.gw, 'GET', `${runsPath(run.metadata.namespace, run.metadata.name)}/requests`)).json() as { requests: Record<string, number> };
    const operations = async (run: Run) =>
      ((await call(tg.gw, 'GET', `${runsPath(run.metadata.namespace, run.metadata.name)}/operations`)).json() as { items: Array<{ operationId: string }> }).items;
    const workspace = (run: Run) => tg.gw.layout.workspaceDir(run.metadata.uid!);

    it(`runs a command with stdin and learns era ${era} from the gateway`, async () => {
      const c = clientOf(await sandbox());
      const out = await c.runCommand({ shell: 'cat; echo err >&2; exit 3', stdin: Buffer.from('from stdin\n').toString('base64') });
      assert.equal(out.exitCode, 3);
      assert.equal(out.stdout.toString(), 'from stdin\n');
      assert.equal(out.stderr.toString(), 'err\n');
      assert.equal(c.era, era === 'D' ? 'D' : undefined);
    });

    it('writes, reads back, creates, renames and deletes files', async () => {
      const c = clientOf(await sandbox());
      await c.writeFile('notes/a.txt', Buffer.from('hello'), { createParents: true });
      assert.equal((await c.read('notes/a.txt')).contents.toString(), 'hello');
      await c.createDirectory('x/y/z');
      await c.renameFile('notes/a.txt', 'x/y/z/b.txt');
      assert.equal((await c.read('x/y/z/b.txt')).contents.toString(), 'hello');
      await assert.rejects(c.read('notes/a.txt'), (e: unknown) => e instanceof GatewayError && e.status === 404);
      await assert.rejects(c.deleteFile('x'), (e: unknown) => e instanceof GatewayError && e.status === 409, 'a directory needs recursive');
      await c.deleteFile('x', { recursive: true });
      const names: string[] = [];
      for await (const entry of c.list('')) names.push(entry.path);
      assert.deepEqual(names.sort(), ['notes']);
    });

    it('streams accepted, output in order, then completed, with contiguous sequence numbers', async () => {
      const c = clientOf(await sandbox());
      const events = [];
      for await (const e of c.stream({ command: { shell: 'for i in 1 2 3; do echo line$i; done' } }, { idempotencyKey: 'stream-1' })) events.push(e);
      assert.equal(events[0]?.type, 'accepted');
      assert.equal(events[0]?.type === 'accepted' && events[0].accepted.operationID, 'stream-1');
      assert.equal(events.at(-1)?.type, 'completed');
      assert.deepEqual(events.map((e) => e.sequence), events.map((_e, i) => i + 1));
      const text = events.map((e) => (e.type === 'output' && e.output.data ? Buffer.from(e.output.data, 'base64').toString() : '')).join('');
      assert.equal(text, 'line1\nline2\nline3\n');
    });

    it('answers a refused operation with a GatewayError and stays usable', async () => {
      const run = await sandbox();
      const c = clientOf(run);
      await c.runCommand({ argv: ['true'] });
      const before = await requests(run);
      await assert.rejects(c.runCommand({ argv: ['true'], shell: 'true' }), (e: unknown) => {
        assert.ok(e instanceof GatewayError, String(e));
        assert.equal(e.status, 400);
        assert.equal(e.message, 'exactly one of argv or shell is required');
        return true;
      });
      assert.equal((await c.runCommand({ argv: ['echo', 'still here'] })).stdout.toString(), 'still here\n');
      if (era === 'D') assert.equal((await requests(run)).requests.ws, before.requests.ws, 'the same socket carried the next call');
    });

    it('aborting a running command kills its process, and the next call works', async () => {
      const run = await sandbox();
      const c = clientOf(run);
      await c.runCommand({ argv: ['true'] });
      const controller = new AbortController();
      const running = c.runCommand({ shell: 'echo $$ > pid; exec sleep 60' }, { signal: controller.signal });
      const pid = await until('the pid file', async () => {
        const text = await fs.readFile(path.join(workspace(run), 'pid'), 'utf8').catch(() => '');
        return text.endsWith('\n') ? Number(text.trim()) : undefined;
      });
      controller.abort();
      await assert.rejects(running, isAbort);
      await until(`process ${pid} to end`, () => processGone(pid));
      assert.equal((await c.runCommand({ argv: ['echo', 'next'] })).stdout.toString(), 'next\n');
      if (era === 'D') assert.equal((await requests(run)).requests.ws, 1, 'one socket for all of it');
    });

    it('cancels by operation id from another client of the sandbox in this process', async () => {
      const run = await sandbox();
      const [a, b] = [clientOf(run), clientOf(run)];
      const running = a!.runCommand({ shell: 'echo $$ > pid; exec sleep 60' }, { idempotencyKey: 'cancel-me' }).then(
        (out) => `exit ${out.exitCode}`,
        (e: unknown) => (e as Error).name,
      );
      const pid = await until('the pid file', async () => {
        const text = await fs.readFile(path.join(workspace(run), 'pid'), 'utf8').catch(() => '');
        return text.endsWith('\n') ? Number(text.trim()) : undefined;
      });
      assert.equal(await b!.cancelOperation('cancel-me'), 'cancelled');
      // Era C's route kills it and the call returns its result; era D's socket ends the call as aborted.
      assert.equal(await running, era === 'D' ? 'AbortError' : 'exit -1');
      await until(`process ${pid} to end`, () => processGone(pid));
      if (era === 'D') await assert.rejects(b!.cancelOperation('not-from-here'), GatewayUsageError);
    });

    it('reports a connection cut mid-operation as outcome unknown and never re-sends it', async () => {
      const run = await sandbox();
      const relay = new Relay(tg.gw.port);
      await relay.start();
      try {
        const endpoint = new URL(run.status!.endpoint!.url);
        endpoint.port = String(relay.port);
        const c = clientOf(run, endpoint.toString());
        const direct = clientOf(run);
        const running = c.runCommand({ shell: 'echo ran >> runs.txt; sleep 30' });
        await until('the command to start', async () => ((await direct.read('runs.txt').catch(() => undefined))?.contents.length ? true : undefined));
        relay.cutAll();
        await assert.rejects(running, (e: unknown) => {
          assert.ok(e instanceof GatewayTransportError, String(e));
          assert.equal(e.outcomeUnknown, true);
          return true;
        });
        assert.equal((await direct.read('runs.txt')).contents.toString(), 'ran\n', 'the command ran once');
        assert.equal((await operations(run)).length, 1, 'the gateway was sent the operation once');
      } finally {
        await relay.stop();
      }
    });

    it('keeps a leased Run alive past its lease while heartbeats are held, and lets it expire after', async () => {
      const run = await sandbox({ leaseTimeoutSeconds: 1 });
      const c = clientOf(run);
      const hold = c.heartbeat(1);
      // A lease is shown to hold only by outliving it: time must pass (3 leases), polled every 100 ms.
      const until3Leases = Date.now() + 3_000;
      while (Date.now() < until3Leases) {
        const current = await waitPhase(tg.gw, run, ['Ready', 'Timeout', 'Failed', 'Cancelled']);
        assert.equal(current.status?.phase, 'Ready', `still Ready ${3000 - (until3Leases - Date.now())} ms into a 1 s lease`);
        await new Promise((r) => setTimeout(r, 100));
      }
      hold.release();
      const ended = await waitPhase(tg.gw, run, ['Timeout'], 10_000);
      assert.equal(ended.status?.phase, 'Timeout');
    });

    if (era === 'D') {
      it('shares one socket between the clients of a sandbox: two concurrent commands both complete', async () => {
        const run = await sandbox();
        const [a, b] = [clientOf(run), clientOf(run)];
        const [ra, rb] = await Promise.all([a!.runCommand({ argv: ['echo', 'a'] }), b!.runCommand({ argv: ['echo', 'b'] })]);
        assert.equal(ra.stdout.toString(), 'a\n');
        assert.equal(rb.stdout.toString(), 'b\n');
        assert.equal((await requests(run)).requests.ws, 1, 'one upgrade for both');
      });

      it('drops an aborted queued call without sending it; the queue goes on', async () => {
        const run = await sandbox();
        const c = clientOf(run);
        const first = c.runCommand({ shell: 'touch started; while [ ! -e go ]; do sleep 0.02; done; echo first' });
        await until('the first command to start', () => fs.access(path.join(workspace(run), 'started')).then(() => true, () => undefined));
        const controller = new AbortController();
        const queued = c.runCommand({ argv: ['touch', 'queued-ran'] }, { signal: controller.signal, idempotencyKey: 'queued-op' });
        const third = c.runCommand({ argv: ['echo', 'third'] });
        controller.abort();
        await assert.rejects(queued, isAbort);
        await fs.writeFile(path.join(workspace(run), 'go'), '');
        assert.equal((await first).stdout.toString(), 'first\n');
        assert.equal((await third).stdout.toString(), 'third\n');
        await assert.rejects(fs.access(path.join(workspace(run), 'queued-ran')));
        assert.ok(!(await operations(run)).some((o) => o.operationId === 'queued-op'), 'the gateway never saw the aborted call');
      });

      it('backs off on 429 at the upgrade and succeeds once a connection slot frees up; reports a lasting 429', async () => {
        const limited = await startTestGateway({ api: 'era-d', maxSessionConnections: 1 });
        const relay = new Relay(limited.gw.port);
        await relay.start();
        try {
          const { run } = await readyRun(limited.gw);
          const endpoint = new URL(run.status!.endpoint!.url);
          const occupier = new WebSocket(`ws://127.0.0.1:${endpoint.port}${endpoint.pathname}/operations:ws`, { headers: { authorization: `Bearer ${limited.gw.token}` } });
          await new Promise((resolve, reject) => occupier.once('open', resolve).once('error', reject));
          endpoint.port = String(relay.port);
          const c = new GatewayClient({ endpoint: { url: endpoint.toString() }, token: limited.gw.token });
          clients.push(c);
          await assert.rejects(c.runCommand({ argv: ['true'] }), (e: unknown) => {
            assert.ok(e instanceof GatewayError, String(e));
            assert.equal(e.status, 429);
            assert.equal(e.message, 'gateway Session connection limit reached');
            return true;
          });
          assert.ok(relay.connections >= 3, `retried the upgrade (${relay.connections} attempts)`);
          const before = relay.connections;
          const second = c.runCommand({ argv: ['echo', 'in'] });
          await until('a refused upgrade', () => (relay.connections > before ? true : undefined));
          occupier.close();
          assert.equal((await second).stdout.toString(), 'in\n');
        } finally {
          await relay.stop();
          await limited.cleanup();
        }
      });
    }
  });
}
