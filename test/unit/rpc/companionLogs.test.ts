// `sandboxes/logs` over real stdio on the real local runtime: the tail of runtimed's log as a
// result, a follow delivered as `sandboxes/log` notifications tagged with the caller's followId
// (a new line within a second) that answers once the Run ends, and bad queries as invalid_params.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ResponseError } from 'vscode-jsonrpc/node';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { SessionAuditLineSchema } from '../../../protocol/kruntimes/runtimedLog';
import type { SandboxConnection, SandboxSummary } from '../../../protocol/sandboxes';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { type CompanionProcess, spawnCompanion } from '../../fixtures/companionProcess';

describe('companion server: sandboxes/logs', function () {
  this.timeout(60_000);
  let work: string;
  let server: CompanionProcess;
  const notified: { followId: string; lines: string[]; at: number }[] = [];
  const waiters = new Set<() => void>();

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'companion-logs-'));
    server = spawnCompanion({ SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state') });
    server.connection.onNotification('sandboxes/log', (p: { followId: string; lines: string[] }) => {
      notified.push({ ...p, at: performance.now() });
      for (const w of waiters) w();
    });
    await server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
  });

  after(async () => {
    await server.stop();
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  const request = <T>(method: string, params: unknown) => server.connection.sendRequest(method, params) as Promise<T>;
  const lineMatching = (followId: string, pred: (line: string) => boolean, after: number): Promise<number> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const hit = notified.find((n) => n.followId === followId && n.at >= after && n.lines.some(pred));
        if (hit) {
          done();
          resolve(hit.at);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no matching sandboxes/log notification: ${JSON.stringify(notified)}`));
      }, 10_000);
      const done = (): void => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });

  it('returns the tail, follows as notifications, and answers when the Run ends', async () => {
    const { sandbox } = await request<{ sandbox: SandboxSummary }>('sandboxes/create', {
      spec: { provider: 'local', runtime: 'process', namespace: 'default' },
    });
    const connection = await request<SandboxConnection>('sandboxes/open', { ref: sandbox.ref });
    const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
    try {
      await client.runCommand({ argv: ['sh', '-c', 'echo first; exit 2'] });
      const { lines } = await request<{ lines: string[] }>('sandboxes/logs', { ref: sandbox.ref, tailLines: 1 });
      assert.equal(lines.length, 1);
      const audit = SessionAuditLineSchema.parse(JSON.parse(lines[0] as string));
      assert.equal(audit.operation, 'command');
      assert.equal(audit.outcome, 'failed');
      assert.equal(audit.exit_code, 2);
      assert.equal(audit.run_name, sandbox.ref.name);

      const following = request<{ lines: string[] }>('sandboxes/logs', { ref: sandbox.ref, follow: true, followId: 'f1', timestamps: true });
      await lineMatching('f1', (l) => l.includes('"message":"first"'), 0); // the backlog comes first
      const sent = performance.now();
      await client.runCommand({ argv: ['sh', '-c', 'echo second'] });
      const at = await lineMatching('f1', (l) => /^\S+Z \{.*"message":"second"/.test(l), sent);
      console.log(`      sandboxes/log: command sent → line notified in ${(at - sent).toFixed(1)} ms`);
      assert.ok(at - sent < 1000, `${at - sent} ms`);

      await request('sandboxes/terminate', { ref: sandbox.ref, mode: 'Immediate', wait: true });
      assert.deepEqual(await following, { lines: [] });
    } finally {
      await client.close();
    }
  });

  it('refuses a follow without followId and a malformed sinceTime as invalid_params', async () => {
    const ref = { provider: 'local', context: 'local', namespace: 'default', name: 'whatever' };
    for (const params of [{ ref, follow: true }, { ref, sinceTime: 'yesterday' }, { ref, sinceTime: '2024-01-01T00:00:00Z', sinceSeconds: 5 }]) {
      await assert.rejects(request('sandboxes/logs', params), (e: unknown) => {
        assert.ok(e instanceof ResponseError);
        assert.equal((e.data as { code: string }).code, 'invalid_params', e.message);
        return true;
      });
    }
  });
});
