// What every feature's handlers share: the services they are built from, and the small adapters from a request
// context to the services' options (work options, codec progress, checked absolute paths, a provider by kind).
import path from 'node:path';
import { CompanionError, type CompanionMethodName } from '../../../protocol/companion';
import type { ProviderKind } from '../../../protocol/sandboxes';
import type { BundleProgress } from '../../bundle';
import type { SandboxSessionService } from '../../sessions/sandboxSessions';
import type { ActivationService } from '../../activation/service';
import type { OpeningSnapshots } from '../../sessions/openingSnapshots';
import type { RevisionIndexCache } from '../../sessions/revisionIndex';
import type { SandboxProvider, WorkOptions } from '../../sandboxes/provider';
import type { PortForwardService } from '../../ports/portForwardService';
import type { MethodHandler, RequestContext } from '../companionServer';

export interface Services {
  providers: ReadonlyMap<ProviderKind, SandboxProvider>;
  sessions: SandboxSessionService;
  /** Opened with the repository, on first use. */
  activations: () => Promise<ActivationService>;
  revisions: RevisionIndexCache;
  openings: OpeningSnapshots;
  /** Port forwards of this client (one is made here when absent; its owner disposes it when the client goes). */
  ports?: PortForwardService;
}

/** The handlers of one feature's method table (one file of protocol/companion/). */
export type HandlersOf<Table> = { [M in keyof Table & CompanionMethodName]: MethodHandler<M> };

export function work(ctx: RequestContext): WorkOptions {
  return { signal: ctx.signal, progress: (phase, message) => ctx.progress({ phase, ...(message ? { message } : {}) }) };
}

/** Codec progress as `$/progress`; throwing here when cancelled aborts the codec (it publishes nothing). */
export function bundleProgress(ctx: RequestContext): (p: BundleProgress) => void {
  return (p) => {
    ctx.signal.throwIfAborted();
    ctx.progress({
      phase: p.phase,
      bytesDone: p.bytes,
      ...(p.totalBytes !== undefined ? { bytesTotal: p.totalBytes, percent: p.totalBytes > 0 ? Math.min(99, Math.floor((p.bytes / p.totalBytes) * 100)) : 0 } : {}),
    });
  };
}

export function absolute(p: string, what: string): string {
  if (!path.isAbsolute(p)) throw new CompanionError('invalid_params', `${what} must be an absolute path: ${p}`);
  return p;
}

/** The provider of one kind, or `unavailable` when this server has none. */
export function providerLookup(services: Services): (kind: ProviderKind) => SandboxProvider {
  return (kind) => {
    const p = services.providers.get(kind);
    if (!p) throw new CompanionError('unavailable', `the ${kind} provider is not available in this server`);
    return p;
  };
}
