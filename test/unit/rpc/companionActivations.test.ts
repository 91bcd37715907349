// activations/run and sessions/fork over real stdio, with the deterministic test agent as the
// activation command: events stream as provisional notifications, the outcome is committed as a
// new revision, a retried activation id runs nothing, and a fork gets its own lineage.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ActivationResult, ForkResult } from '../../../protocol/activation';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { type CompanionProcess, spawnCompanion } from '../../fixtures/companionProcess';

const AGENT = path.resolve(__dirname, '../../fixtures/agent/agent.mts');

describe('companion server: activations and forks', function () {
  this.timeout(120_000);
  let work: string;
  let server: CompanionProcess;
  const events: { activationId: string; provisional: boolean; event: { type: string } }[] = [];

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'companion-activations-'));
    server = spawnCompanion({
      SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state'),
      SANDBOX_SESSIONS_REPOSITORY: path.join(work, 'repository'),
      SANDBOX_SESSIONS_ACTIVATION_COMMAND: JSON.stringify([process.execPath, AGENT, 'activate']),
    });
    server.connection.onNotification('activations/event', (p: { activationId: string; provisional: boolean; event: { type: string } }) => {
      events.push(p);
    });
    await server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
  });

  after(async () => {
    await server.stop();
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  const activate = (activationId: string, text: string) =>
    server.connection.sendRequest('activations/run', {
      sessionId: 'agent-demo',
      activationId,
      stimulus: { type: 'message', payload: { text } },
      sandbox: { provider: 'local', runtime: 'process', namespace: 'default' },
    }) as Promise<ActivationResult>;
  // Each run of the agent begins with a `start` event; a deduplicated retry streams none.
  const invoked = (activationId: string) => events.filter((e) => e.activationId === activationId && e.event.type === 'start').length;

  it('runs an activation, streams provisional events and commits r1', async () => {
    const result = await activate('a-1', 'hello agent');
    assert.equal(result.commit, 'committed', JSON.stringify(result));
    assert.equal(result.revision, 'r1');
    assert.equal(result.outcome?.status, 'completed');
    const mine = events.filter((e) => e.activationId === 'a-1');
    assert.ok(mine.every((e) => e.provisional));
    assert.equal(mine[0]?.event.type, 'start');
    assert.equal(mine.at(-1)?.event.type, 'outcome');
    assert.equal(invoked('a-1'), 1);
  });

  it('returns the stored outcome for a retried activation id without running the agent', async () => {
    const again = await activate('a-1', 'hello agent');
    assert.equal(again.deduplicated, true);
    assert.equal(again.revision, 'r1');
    assert.equal(invoked('a-1'), 1, 'the agent was not invoked again');
  });

  it('a second activation sees the first turn and commits r2; a fork of r1 diverges', async () => {
    const second = await activate('a-2', 'second turn');
    assert.equal(second.revision, 'r2');
    const fork = (await server.connection.sendRequest('sessions/fork', {
      forkId: 'fork-1',
      source: { sessionId: 'agent-demo', revision: 'r1' },
      targetSessionId: 'agent-demo-fork',
    })) as ForkResult;
    assert.deepEqual(fork.target, { sessionId: 'agent-demo-fork', revision: 'r1' });
    assert.deepEqual(fork.forkedFrom, { sessionId: 'agent-demo', revision: 'r1' });
    const retried = (await server.connection.sendRequest('sessions/fork', {
      forkId: 'fork-1',
      source: { sessionId: 'agent-demo', revision: 'r1' },
      targetSessionId: 'agent-demo-fork',
    })) as ForkResult;
    assert.equal(retried.deduplicated, true);
    const { sessions } = (await server.connection.sendRequest('sessions/list', {})) as {
      sessions: { sessionId: string; head: { revision: string }; forkedFrom?: { revision: string } }[];
    };
    const byId = Object.fromEntries(sessions.map((s) => [s.sessionId, s]));
    assert.equal(byId['agent-demo']?.head.revision, 'r2');
    assert.equal(byId['agent-demo-fork']?.head.revision, 'r1');
    assert.equal(byId['agent-demo-fork']?.forkedFrom?.revision, 'r1');
  });

  it('refuses a fork of a revision that is not retained, and an activation whose request is malformed', async () => {
    await assert.rejects(
      server.connection.sendRequest('sessions/fork', { forkId: 'fork-x', source: { sessionId: 'agent-demo', revision: 'r9' } }),
      (e: unknown) => (e as { data?: { code?: string; cause?: string } }).data?.cause === 'source_revision_not_available',
    );
    await assert.rejects(
      server.connection.sendRequest('activations/run', { sessionId: 'agent-demo', activationId: 'a-3', stimulus: { type: 'webhook', payload: {} }, sandbox: { provider: 'local', runtime: 'process' } }),
      (e: unknown) => (e as { data?: { code?: string; issues?: { path: string }[] } }).data?.issues?.some((i) => i.path === 'stimulus.type') === true,
    );
  });
});
