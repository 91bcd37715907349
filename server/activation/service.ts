// The activation service the companion's JSON-RPC (`activations/run`, `sessions/fork`) and the CLI
// call: one runner (claims, leases, fresh sandboxes, commits) and fork, over one repository.
import type { ActivationResult, ForkResult } from '../../protocol/activation';
import { forkSession, type RekeyHook } from './fork';
import { ActivationRunner, type ActivationRunnerOptions, type RunOptions } from './runner';

export interface ActivationServiceOptions extends ActivationRunnerOptions {
  /** How fork re-keys the state identity (default: rewrite makaSessionId of the Maka cloud descriptor). */
  rekey?: RekeyHook;
}

export class ActivationService {
  private readonly runner: ActivationRunner;

  constructor(private readonly options: ActivationServiceOptions) {
    this.runner = new ActivationRunner(options);
  }

  /** One activation; `ActivationRunRequestSchema` params. Refusals throw ActivationError; failures after admission return `not_committed`. */
  run(request: unknown, options: RunOptions = {}): Promise<ActivationResult> {
    return this.runner.run(request, options);
  }

  /** `ForkRequestSchema` params. Repository refusals throw SessionRepositoryError (e.g. source_revision_not_available). */
  fork(request: unknown, options: { onProgress?: (phase: string, message?: string) => void } = {}): Promise<ForkResult> {
    return forkSession(this.options.repository, request, {
      ...(this.options.rekey ? { rekey: this.options.rekey } : {}),
      ...(this.options.limits ? { limits: this.options.limits } : {}),
      ...(this.options.scratchParent ? { scratchParent: this.options.scratchParent } : {}),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
  }
}
