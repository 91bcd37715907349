// What the OpenSandbox backend (opensandboxBackend.ts) does with the SDK: creates a Run's sandbox when
// the Run starts (label-safe metadata naming product, session and Run; the TTL renewed while the Run
// lives; egress denied except the Run's allowed domains), records its id in the Run's directory
// (runs/<uid>/opensandbox.json, 0600) before anything else happens to it, reattaches after a daemon
// restart, and deletes it when the Run ends — also one a crash left behind, found by its Run label.
// Credential bindings: the sandbox is created with the credential proxy on and the binding hosts
// allowed, and its Credential Vault gets the secret values (credentialVault.ts) before the Run is
// Ready; a reattached sandbox keeps its vault (it lives in OpenSandbox). A module of its own because
// it loads the SDK: the backend imports it on the first open/release (issue 25: idle daemons don't).
import path from 'node:path';
import { z } from 'zod';
import { readJsonRecord, writeJsonAtomic } from '../../local/atomicFile';
import type { RemotePlacement, RemoteRunContext, RemoteWorkspace } from '../../local/backend';
import { SessionError } from '../../local/sessionError';
import { connectionTo, type OpenSandboxConnection } from './connection';
import { NO_CONNECTION_MESSAGE, daemonTarget } from './connectionFile';
import { bindingHosts, vaultRequest } from './credentialVault';
import { OpenSandboxError } from './errors';
import { LABEL_ACTIVATION, LABEL_SESSION } from './labels';
import type { OpenSandboxBackendOptions } from './opensandboxBackend';
import { OpenSandboxClient } from './opensandboxClient';
import { runSettings } from './runSettings';
import { OpenSandboxWorkspace, REMOTE_ARTIFACTS, REMOTE_WORKSPACE, seedWorkspace } from './opensandboxWorkspace';

export const REMOTE_RECORD_FILE = 'opensandbox.json';

const RemoteRecordSchema = z.strictObject({
  version: z.literal(1),
  sandboxId: z.string().min(1),
  /** Where it was created (for people reading records; the key is never here). */
  domain: z.string(),
  createdAt: z.string(),
  deletedAt: z.string().optional(),
});
type RemoteRecord = z.infer<typeof RemoteRecordSchema>;

function recordFile(ctx: RemoteRunContext): string {
  return path.join(ctx.runDir, REMOTE_RECORD_FILE);
}

export class OpenSandboxPlacement implements Pick<RemotePlacement, 'open' | 'release'> {
  constructor(private readonly o: OpenSandboxBackendOptions) {}

  private connection(): OpenSandboxConnection | undefined {
    const target = daemonTarget(this.o.stateDir, this.o.env ?? process.env);
    return target && connectionTo(target);
  }

  private client(): OpenSandboxClient {
    const conn = this.connection();
    if (!conn) throw new SessionError('FailedPrecondition', NO_CONNECTION_MESSAGE);
    return new OpenSandboxClient(conn);
  }

  async open(ctx: RemoteRunContext): Promise<RemoteWorkspace> {
    const settings = runSettings(ctx.run);
    if (!settings.ok) throw new SessionError('InvalidArgument', settings.message);
    const { ttlSeconds } = settings.settings;
    const client = this.client();
    const root = ctx.run.spec.source?.repoURL ? `${REMOTE_WORKSPACE}/repo` : REMOTE_WORKSPACE;
    const workspace = (sandbox: Awaited<ReturnType<OpenSandboxClient['connect']>>) =>
      new OpenSandboxWorkspace(sandbox, { root, log: ctx.log, ttlSeconds, renewEveryMs: Math.max(10_000, Math.floor((ttlSeconds * 1000) / 3)) });
    const recorded = await readJsonRecord(recordFile(ctx), RemoteRecordSchema);
    if (recorded && !recorded.deletedAt) {
      // After a restart: the same sandbox, if it is still there (its TTL may have run out meanwhile).
      const sandbox = await client.connect(recorded.sandboxId);
      await sandbox.renew(ttlSeconds).catch((err: unknown) => ctx.log(`renewing the TTL of OpenSandbox sandbox ${sandbox.id}: ${(err as Error).message}`));
      ctx.log(`reattached to OpenSandbox sandbox ${sandbox.id}`);
      return workspace(sandbox);
    }
    if (recorded?.deletedAt) throw new SessionError('FailedPrecondition', `the OpenSandbox sandbox ${recorded.sandboxId} of this Run was deleted`);
    // A crash between create and record leaves a sandbox without a record: deleted before a new one is made.
    await this.deleteUnrecorded(client, ctx, undefined);
    const uid = ctx.run.metadata.uid ?? '';
    const { image, cpu, memory, credentialBindings } = settings.settings;
    // Binding hosts join the allow list: the vault refuses a host the egress policy does not explicitly allow.
    const allowedEgress = [...new Set([...settings.settings.allowedEgress, ...bindingHosts(credentialBindings)])];
    // Resolved before anything is created: a missing secret fails the Run with the command / env var to fix it.
    let vault: ReturnType<typeof vaultRequest> | undefined;
    try {
      vault = credentialBindings.length > 0 ? vaultRequest(credentialBindings, this.o.env ?? process.env) : undefined;
    } catch (err) {
      throw new SessionError('FailedPrecondition', (err as Error).message);
    }
    // An activation's Run names its Session and activation (activation/runner.ts): they become the sandbox's metadata.
    const labels = ctx.run.metadata.labels ?? {};
    const activation = labels[LABEL_ACTIVATION];
    const sandbox = await client.create({
      image,
      ...(cpu ? { cpu } : {}),
      ...(memory ? { memory } : {}),
      ttlSeconds,
      allowedEgress,
      ...(vault ? { credentialProxy: true } : {}),
      run: uid,
      session: labels[LABEL_SESSION] ?? `${ctx.run.metadata.namespace ?? 'default'}.${ctx.run.metadata.name ?? ''}`,
      ...(activation !== undefined ? { activation } : {}),
      ...(this.o.readyTimeoutSeconds !== undefined ? { readyTimeoutSeconds: this.o.readyTimeoutSeconds } : {}),
    });
    const record: RemoteRecord = { version: 1, sandboxId: sandbox.id, domain: client.connection.domain, createdAt: new Date().toISOString() };
    try {
      await writeJsonAtomic(recordFile(ctx), record, 0o600);
      await sandbox.mkdir(REMOTE_WORKSPACE);
      await sandbox.mkdir(REMOTE_ARTIFACTS);
      if (vault) {
        const state = await sandbox.createVault(vault);
        vault = undefined; // the values live in OpenSandbox now, not in this process
        ctx.log(`credential vault r${state.revision}: ${state.bindings.map((b) => `${b.name} (${b.auth?.type ?? '?'} for ${(b.match?.hosts ?? []).join(', ')})`).join('; ')}`);
      }
      const seeded = await seedWorkspace(sandbox, ctx.seedDir, REMOTE_WORKSPACE);
      ctx.log(`created OpenSandbox sandbox ${sandbox.id} (${image}, TTL ${ttlSeconds} s, egress ${allowedEgress.length > 0 ? allowedEgress.join(', ') : 'denied'}${seeded > 0 ? `, ${seeded} file(s) copied in` : ''})`);
    } catch (err) {
      await sandbox.kill().catch(() => undefined);
      await writeJsonAtomic(recordFile(ctx), { ...record, deletedAt: new Date().toISOString() }, 0o600).catch(() => undefined);
      throw err;
    }
    return workspace(sandbox);
  }

  async release(ctx: RemoteRunContext): Promise<void> {
    const recorded = await readJsonRecord(recordFile(ctx), RemoteRecordSchema).catch(() => undefined);
    if (recorded?.deletedAt && !this.connection()) return;
    const client = this.client();
    if (recorded && !recorded.deletedAt) {
      const existed = await client.kill(recorded.sandboxId);
      await writeJsonAtomic(recordFile(ctx), { ...recorded, deletedAt: new Date().toISOString() }, 0o600);
      ctx.log(existed ? `deleted OpenSandbox sandbox ${recorded.sandboxId}` : `OpenSandbox sandbox ${recorded.sandboxId} was already gone`);
    }
    await this.deleteUnrecorded(client, ctx, recorded?.sandboxId);
  }

  /** Deletes the product's sandboxes labelled with this Run other than `keep` (a crash between create and record). */
  private async deleteUnrecorded(client: OpenSandboxClient, ctx: RemoteRunContext, keep: string | undefined): Promise<void> {
    const uid = ctx.run.metadata.uid;
    if (!uid) return;
    for (const s of await client.listOurs({ run: uid })) {
      if (s.id === keep) continue;
      await client.kill(s.id).catch((err: unknown) => {
        if (!(err instanceof OpenSandboxError && err.code === 'NotFound')) throw err;
      });
      ctx.log(`deleted OpenSandbox sandbox ${s.id}, left without a record by an earlier daemon`);
    }
  }
}
