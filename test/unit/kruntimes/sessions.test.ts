// A person's sandbox on kruntimes, kept as a session: saved as a revision, compared with it by digests computed in
// the sandbox (nothing copied out), saved again taking the unchanged files from the revision held here, and opened in
// a new Run as one upload — against the cluster SIMULATOR of each era (or a real cluster, see
// test/fixtures/cluster/README.md), through a port-forwarded Console and the Run's gateway, as VS Code's server does it.
import assert from 'node:assert/strict';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { openFileSessionRepository } from '../../../server/repository/fileRepository';
import type { SessionRepository } from '../../../server/repository/contract';
import type { KruntimesSandboxProvider } from '../../../server/sandboxes/kruntimes/kruntimesProvider';
import { RevisionIndexCache } from '../../../server/sessions/revisionIndex';
import { compareSandboxWithRevision } from '../../../server/sessions/sandboxChanges';
import { SandboxSessionService } from '../../../server/sessions/sandboxSessions';
import { quietLogger } from '../../fixtures/activation/harness';
import { type ClusterTarget, forEachClusterEra, startClusterTarget } from '../../fixtures/cluster/target';

forEachClusterEra('sessions from a kruntimes sandbox', function (era) {
  this.timeout(180_000);
  let target: ClusterTarget;
  let provider: KruntimesSandboxProvider;
  let repo: SessionRepository;
  let revisions: RevisionIndexCache;
  let sessions: SandboxSessionService;

  before(async () => {
    target = await startClusterTarget({ era });
    provider = target.provider();
    repo = await openFileSessionRepository({ storageRoot: path.join(target.dir, 'repository') });
    revisions = new RevisionIndexCache(async () => repo, path.join(target.dir, 'revisions'));
    sessions = new SandboxSessionService(async () => repo, new Map([['kruntimes', provider]]), { kind: 'file', description: target.dir }, quietLogger(), revisions);
  });
  after(async () => {
    await revisions?.dispose();
    await repo?.close();
    await target?.stop();
  });

  it('saves, compares by digests and saves again taking unchanged files from the revision held here', async () => {
    const sandbox: SandboxSummary = await provider.create(target.spec(), { waitForReady: true });
    const connection = await provider.open(sandbox.ref);
    const gw = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls });
    try {
      const run = async (shell: string) => assert.equal((await gw.runCommand({ shell })).exitCode, 0, shell);
      await run('mkdir -p src && printf "one\\n" > a.txt && printf "same size\\n" > b.txt && printf "x" > src/c.ts && printf "#!/bin/sh\\n" > run.sh && chmod +x run.sh');
      const r1 = await sessions.saveSandbox({ sandbox: sandbox.ref, sessionId: 'on-cluster' });
      assert.equal(r1.revision.ref.revision, 'r1');
      const compare = (revision: string) => compareSandboxWithRevision({ sessions, revisions }, { sandbox: sandbox.ref, sessionId: 'on-cluster', revision });
      const none = await compare('r1');
      assert.deepEqual([none.changes, none.unchanged], [[], 4]);
      await run('printf "SAME SIZE\\n" > b.txt && rm src/c.ts && printf "new" > d.txt && chmod -x run.sh');
      assert.deepEqual((await compare('r1')).changes, [
        { path: 'b.txt', status: 'modified' },
        { path: 'd.txt', status: 'added' },
        { path: 'run.sh', status: 'modified' },
        { path: 'src/c.ts', status: 'deleted' },
      ]);
      // The Run carries r1 (saved), which the comparison indexed: the save takes a.txt from it.
      const said: string[] = [];
      const r2 = await sessions.saveSandbox({ sandbox: sandbox.ref, sessionId: 'on-cluster', expectedRevision: 'r1' }, { progress: (_p, message) => said.push(message ?? '') });
      assert.equal(said[0], `copying what changed in ${sandbox.ref.name} since on-cluster@r1`);
      assert.equal(r2.revision.ref.revision, 'r2');
      const read = async (file: string) => Buffer.from((await revisions.read('on-cluster', 'r2', `workspace/${file}`, { offset: 0, length: 100 })).contents).toString();
      assert.deepEqual([await read('a.txt'), await read('b.txt'), await read('d.txt')], ['one\n', 'SAME SIZE\n', 'new']);
      assert.deepEqual((await compare('r2')).changes, []);
    } finally {
      await gw.close();
      await provider.delete(sandbox.ref);
    }
  });

  it('opens a revision in a new Run as one upload unpacked by its tar: the same workspace, modes and all', async () => {
    const said: string[] = [];
    const opened = await sessions.openInSandbox({ sessionId: 'on-cluster', revision: 'r2', sandbox: target.spec() }, { progress: (_p, message) => said.push(message ?? '') });
    try {
      assert.ok(said.includes(`copying the workspace of on-cluster@r2 into ${opened.sandbox.ref.name} as one file`), said.join('\n'));
      const found = await compareSandboxWithRevision({ sessions, revisions }, { sandbox: opened.sandbox.ref, sessionId: 'on-cluster', revision: 'r2' });
      assert.deepEqual([found.changes, found.unchanged], [[], 4]);
    } finally {
      await provider.delete(opened.sandbox.ref);
    }
  });
});
