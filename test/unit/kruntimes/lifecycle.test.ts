// The kruntimes provider through @kubernetes/client-node, against the cluster SIMULATOR (or a
// real cluster with `npm run test:cluster`): a session Run's whole life — create → Ready →
// files and commands through a port-forwarded Console → Drain → Succeeded → artifacts downloaded
// and verified; Immediate → Cancelled; idle timeout → Timeout; the termination rules; labels (a grant to agents).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { AGENTS_GRANTED, AGENTS_LABEL, agentGrantLabels, CREATOR_AGENT, CREATOR_LABEL } from '../../../protocol/agentAccess';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../../protocol/kruntimes/gatewayErrors';
import { type ArtifactRef, RunStateError, TERMINATION_MONOTONIC_MESSAGE } from '../../../protocol/kruntimes/run';
import { SESSION_REVISION_ANNOTATION, sessionRevisionAnnotation } from '../../../protocol/sandboxRevision';
import type { SandboxConnection, SandboxCreateSpec, SandboxRef } from '../../../protocol/sandboxes';
import type { KruntimesSandboxProvider } from '../../../server/sandboxes/kruntimes/kruntimesProvider';
import { SandboxError } from '../../../server/sandboxes/provider';
import { type ClusterTarget, forEachClusterEra, startClusterTarget } from '../../fixtures/cluster/target';

function client(c: SandboxConnection): GatewayClient {
  return new GatewayClient({ endpoint: c.endpoint, token: c.token, tls: c.tls, readRetryWindowMs: 5000 });
}

forEachClusterEra('kruntimes provider: session Run lifecycle', function (era) {
  this.timeout(120_000);
  let target: ClusterTarget;
  let provider: KruntimesSandboxProvider;

  before(async () => {
    target = await startClusterTarget({ era });
    provider = target.provider();
  });
  after(async () => {
    await target?.stop();
  });

  const spec = (extra: Partial<SandboxCreateSpec> = {}) => target.spec(extra);

  it('create → Ready → files and commands → Drain → Succeeded → artifacts downloaded and verified', async () => {
    const phases: string[] = [];
    const sandbox = await provider.create(spec({ env: { PROJECT: 'demo' } }), {
      waitForReady: true,
      progress: (_p, m) => m && phases.push(m),
    });
    assert.equal(sandbox.phase, 'Ready');
    assert.equal(sandbox.ref.provider, 'kruntimes');
    assert.equal(sandbox.ref.context, target.context);
    assert.ok(phases.some((m) => m.includes('Ready')), phases.join('\n'));

    const connection = await provider.open(sandbox.ref);
    assert.match(connection.endpoint.url, new RegExp(`^https://127\\.0\\.0\\.1:\\d+/v1/namespaces/${target.namespace}/runtimes/${target.runtime}/sessions/${sandbox.uid}$`));
    if (target.simulator) {
      assert.equal(connection.tls?.servername, 'kruntimes-console.kruntimes-system.svc');
      assert.ok((target.simulator.portForward.connections.get('kruntimes-system/kruntimes-console-0:8443') ?? 0) > 0, 'reached through a port-forward');
    }
    const gw = client(connection);
    try {
      await gw.writeFile('notes/result.txt', Buffer.from('gateway-file'), { createParents: true });
      const page = await gw.listPage({ path: 'notes' });
      assert.deepEqual(page.entries.map((e) => e.path), ['result.txt']);
      assert.equal((await gw.read('notes/result.txt')).contents.toString(), 'gateway-file');
      const r = await gw.execute({ command: { argv: ['sh', '-c', 'printf "%s:%s" "$PROJECT" "$(cat notes/result.txt)"'] } });
      assert.equal(r.command?.exitCode, 0);
      assert.equal(Buffer.from(r.command?.stdout ?? '', 'base64').toString(), 'demo:gateway-file');
      // Artifacts: a file and a directory under $KRUNTIME_ARTIFACTS_DIR.
      const a = await gw.execute({ command: { shell: 'mkdir -p "$KRUNTIME_ARTIFACTS_DIR/bundle/sub" && printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt" && printf nested > "$KRUNTIME_ARTIFACTS_DIR/bundle/sub/n.txt"' } });
      assert.equal(a.command?.exitCode, 0, Buffer.from(a.command?.stderr ?? '', 'base64').toString());
    } finally {
      await gw.close();
    }

    const done = await provider.terminate(sandbox.ref, 'Drain', { wait: true });
    assert.equal(done.phase, 'Succeeded');
    assert.deepEqual(done.artifacts?.map((x) => x.name), ['bundle', 'report.txt']);

    const dest = path.join(target.dir, 'artifacts-1');
    const downloaded = await provider.downloadArtifacts(sandbox.ref, dest, { unpack: true });
    const byName = new Map(downloaded.map((d) => [d.name, d]));
    const report = byName.get('report.txt');
    assert.ok(report);
    assert.equal(fs.readFileSync(report.path, 'utf8'), 'report');
    assert.equal(`sha256:${createHash('sha256').update(fs.readFileSync(report.path)).digest('hex')}`, report.digest);
    const dir = byName.get('bundle');
    assert.ok(dir?.unpackedTo);
    assert.equal(dir.path, dir.unpackedTo);
    assert.equal(fs.readFileSync(path.join(dir.unpackedTo, 'sub/n.txt'), 'utf8'), 'nested');
    // A folder artifact arrives once, as the folder (no bundle.tar.gz beside it).
    assert.deepEqual(fs.readdirSync(dest).sort(), ['bundle', 'report.txt']);

    // The exported file goes into a new Run as an artifactInput, materialized before Ready.
    const reportRef = done.artifacts?.find((x) => x.name === 'report.txt');
    assert.ok(reportRef);
    const next = await provider.create(spec({ artifactInputs: [{ ref: reportRef, path: 'inputs/report.txt' }] }), { waitForReady: true });
    const nextGw = client(await provider.open(next.ref));
    try {
      assert.equal((await nextGw.read('inputs/report.txt')).contents.toString(), 'report');
    } finally {
      await nextGw.close();
    }
    await provider.terminate(next.ref, 'Immediate', { wait: true });
    await provider.delete(next.ref);

    await provider.delete(sandbox.ref);
    await assert.rejects(provider.get(sandbox.ref), (e: unknown) => e instanceof SandboxError && e.code === 'sandbox_not_found');
  });

  it('a missing artifactInput fails the Run before Ready with `open artifact input`', async () => {
    const missing: ArtifactRef = { name: 'gone.txt', driver: 'filesystem', type: 'file', location: { filesystem: { path: `namespaces/${target.namespace}/runs/none/gone.txt` } }, sizeBytes: 1, digest: `sha256:${'0'.repeat(64)}`, createdAt: '2025-01-01T00:00:00Z' }; // createdAt: the CRD requires it
    await assert.rejects(provider.create(spec({ artifactInputs: [{ ref: missing, path: 'in/gone.txt' }] }), { waitForReady: true }), (e: unknown) => {
      assert.ok(e instanceof SandboxError);
      assert.equal(e.code, 'run_state');
      assert.match(e.message, /became terminal before it was ready: .* is Failed \(.*open artifact input gone\.txt/);
      return true;
    });
  });

  it('Immediate → Cancelled; the Console then answers 409 `Session Run is Cancelled, not Ready` (golden 24)', async () => {
    const sandbox = await provider.create(spec(), { waitForReady: true });
    const connection = await provider.open(sandbox.ref);
    const done = await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
    assert.equal(done.phase, 'Cancelled');
    assert.equal(done.message, 'cancelled by user');
    const gw = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls });
    try {
      await assert.rejects(gw.status(), (e: unknown) => e instanceof GatewayError && e.status === 409 && e.message.includes('Session Run is Cancelled, not Ready'));
    } finally {
      await gw.close();
    }
    await provider.delete(sandbox.ref);
  });

  it('a termination downgrade (Immediate → Drain) is refused client-side with the CEL message', async () => {
    const sandbox = await provider.create(spec(), { waitForReady: true });
    await provider.terminate(sandbox.ref, 'Immediate', { wait: false });
    await assert.rejects(provider.terminate(sandbox.ref, 'Drain', { wait: false }), (e: unknown) => e instanceof RunStateError && e.message.includes(TERMINATION_MONOTONIC_MESSAGE));
    await provider.delete(sandbox.ref);
  });

  it('Grant to Agents is a merge patch of metadata.labels: others kept, a revoke removes it, an invalid label refused with the API server\'s words', async () => {
    const sandbox = await provider.create(spec({ labels: { [CREATOR_LABEL]: CREATOR_AGENT } }), { waitForReady: false });
    assert.equal(sandbox.createdByAgent, true, 'the creator label survived admission');
    const granted = await provider.patchMetadata(sandbox.ref, { labels: agentGrantLabels(true) });
    assert.deepEqual([granted.createdByAgent, granted.grantedToAgents], [true, true]);
    const { run } = await provider.get(sandbox.ref);
    assert.equal(run.metadata.labels?.[AGENTS_LABEL], AGENTS_GRANTED);
    assert.equal(run.metadata.labels?.['app.kubernetes.io/created-by'], 'sandbox-sessions', 'the other labels are kept');
    assert.equal((await provider.list({ context: target.context, namespace: target.namespace })).find((s) => s.key === sandbox.key)?.grantedToAgents, true);
    const revoked = await provider.patchMetadata(sandbox.ref, { labels: agentGrantLabels(false) });
    assert.equal(revoked.grantedToAgents, undefined);
    assert.equal((await provider.get(sandbox.ref)).run.metadata.labels?.[AGENTS_LABEL], undefined);
    await assert.rejects(provider.patchMetadata(sandbox.ref, { labels: { [AGENTS_LABEL]: 'not allowed!' } }), (e: unknown) => {
      assert.ok(e instanceof SandboxError);
      assert.equal(e.code, 'invalid_spec');
      assert.match(e.message, /metadata\.labels: Invalid value: "not allowed!"/);
      return true;
    });
    await provider.delete(sandbox.ref);
  });

  it('the session revision a sandbox was opened from rides on its Run as an annotation; a save moves it and keeps the labels', async () => {
    const opened = sessionRevisionAnnotation({ sessionId: 'demo', revision: 'r1', at: '2026-12-03T10:00:00.000Z', how: 'opened' });
    const sandbox = await provider.create(spec({ labels: { [CREATOR_LABEL]: CREATOR_AGENT } }), { waitForReady: false, annotations: opened });
    assert.deepEqual(sandbox.sessionRevision, { sessionId: 'demo', revision: 'r1', at: '2026-12-03T10:00:00.000Z', how: 'opened' });
    const saved = await provider.patchMetadata(sandbox.ref, { annotations: sessionRevisionAnnotation({ sessionId: 'demo', revision: 'r2', at: '2026-12-03T11:00:00.000Z', how: 'saved' }) });
    assert.deepEqual([saved.sessionRevision?.revision, saved.sessionRevision?.how, saved.createdByAgent], ['r2', 'saved', true]);
    const listed = (await provider.list({ context: target.context, namespace: target.namespace })).find((s) => s.key === sandbox.key);
    assert.equal(listed?.sessionRevision?.revision, 'r2', 'a list reads it too');
    // What a person wrote by hand (kubectl annotate) that is not ours to read is no revision at all.
    const edited = await provider.patchMetadata(sandbox.ref, { annotations: { [SESSION_REVISION_ANNOTATION]: 'r3' } });
    assert.equal(edited.sessionRevision, undefined);
    await provider.delete(sandbox.ref);
  });

  // Era D has no idle timeout (spec §10.3); its sandboxes end by lease instead (eras.test.ts).
  if (era !== 'D') it('era C: idle timeout → Timeout with `session idle timeout exceeded` (golden 32); the Run kept the field', async () => {
    const sandbox = await provider.create(spec({ idleTimeoutSeconds: 1 }), { waitForReady: true });
    assert.equal(sandbox.idleTimeoutSeconds, 1, 'sent and kept by the API server');
    assert.equal(sandbox.leaseTimeoutSeconds, undefined, 'no lease added where idle timeouts exist');
    const ref: SandboxRef = sandbox.ref;
    const deadline = Date.now() + 10_000;
    let phase: string | undefined;
    let message: string | undefined;
    while (Date.now() < deadline) {
      const { sandbox: s } = await provider.get(ref);
      phase = s.phase;
      message = s.message;
      if (phase === 'Timeout') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(phase, 'Timeout');
    assert.equal(message, 'session idle timeout exceeded');
    await provider.delete(ref);
  });
});
