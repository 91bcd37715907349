// OpenSandbox as a backend of the local runtime (seed 003's machine → sandbox → backend): the
// local gateway daemon keeps the Run, its queue, exec records, audit log, clocks, Drain and
// artifacts; this backend only places the Run's workspace in an OpenSandbox sandbox
// (opensandboxPlacement.ts: creating, reattaching and deleting it). This module answers what needs
// no SDK (probe, a Run's refusal) and imports the placement, with the SDK, on the first open or
// release: a daemon with only process/bubblewrap sandboxes never loads it (issue 25, idle RSS).
// The API key comes from connectionFile.ts and is never recorded.
import type { Run } from '../../../protocol/kruntimes/run';
import type { Backend, ProbeResult, RemotePlacement, RemoteRunContext, RemoteWorkspace, SpawnPlan } from '../../local/backend';
import { SessionError } from '../../local/sessionError';
import { NO_CONNECTION_MESSAGE, daemonTarget } from './connectionFile';
import { describeTarget, type OpenSandboxTarget } from './connectionTarget';
import { missingSecretMessage } from '../../../protocol/opensandboxCredentials';
import { bindingWithoutSecret } from './credentialVault';
import type { OpenSandboxPlacement } from './opensandboxPlacement';
import { OPENSANDBOX_BACKEND, runSettings } from './runSettings';

export interface OpenSandboxBackendOptions {
  /** The daemon's state root (the connection file is there). */
  stateDir: string;
  env?: NodeJS.ProcessEnv;
  /** How long the SDK waits for a new sandbox's execd (seconds). */
  readyTimeoutSeconds?: number;
}

export class OpenSandboxBackend implements Backend, RemotePlacement {
  readonly name = OPENSANDBOX_BACKEND;
  readonly description = 'OpenSandbox: commands and files run in a remote OpenSandbox sandbox (a container), egress denied except allowed domains';
  readonly capabilities = { isolation: 'container', isolateNetwork: false, pidNamespace: true, readOnlyHost: true } as const;
  readonly remote: RemotePlacement = this;
  private placement: Promise<OpenSandboxPlacement> | undefined;

  constructor(private readonly o: OpenSandboxBackendOptions) {}

  private target(): OpenSandboxTarget | undefined {
    return daemonTarget(this.o.stateDir, this.o.env ?? process.env);
  }

  async probe(): Promise<ProbeResult> {
    let target: OpenSandboxTarget | undefined;
    try {
      target = this.target();
    } catch (err) {
      return { ok: false, reason: (err as Error).message };
    }
    return target ? { ok: true, detail: describeTarget(target) } : { ok: false, reason: NO_CONNECTION_MESSAGE };
  }

  plan(): SpawnPlan {
    throw new SessionError('FailedPrecondition', 'the opensandbox backend runs commands in its remote sandbox, never on this machine');
  }

  refusal(run: Run): string | undefined {
    try {
      if (!this.target()) return NO_CONNECTION_MESSAGE;
    } catch (err) {
      return (err as Error).message;
    }
    const settings = runSettings(run);
    if (!settings.ok) return settings.message;
    const missing = bindingWithoutSecret(settings.settings.credentialBindings, this.o.env ?? process.env);
    return missing ? missingSecretMessage(missing) : undefined;
  }

  async open(ctx: RemoteRunContext): Promise<RemoteWorkspace> {
    return (await this.placed()).open(ctx);
  }

  async release(ctx: RemoteRunContext): Promise<void> {
    return (await this.placed()).release(ctx);
  }

  /** The placement, its module (and the SDK) imported on first use. */
  private placed(): Promise<OpenSandboxPlacement> {
    this.placement ??= import('./opensandboxPlacement.js').then(({ OpenSandboxPlacement }) => new OpenSandboxPlacement(this.o));
    return this.placement;
  }
}
