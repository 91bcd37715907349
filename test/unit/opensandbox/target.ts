// Where the OpenSandbox suites run: the simulator (default) or a real OpenSandbox server when
// OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY are both set and OPENSANDBOX_TARGET is not
// `simulator`. Tests that need the simulator (they look inside a sandbox's root on the host,
// or depend on simulator-only knobs) carry "[simulator]" in their title and are skipped with a
// printed reason against a real server.
import { ConnectionConfig, Sandbox, type ConnectionConfigOptions, type SandboxCreateOptions } from '@alibaba-group/opensandbox';
import type { Context } from 'mocha';
import { startOpenSandboxSimulator, type OpenSandboxSimulator, type OpenSandboxSimulatorOptions } from '../../fixtures/opensandbox/simulator';

export const SIM_TAG = '[simulator]';

export interface Target {
  readonly real: boolean;
  readonly domain: string;
  readonly apiKey: string | undefined;
  readonly simulator: OpenSandboxSimulator | undefined;
  /** An image the real server can start (the simulator ignores it). */
  readonly image: string;
}

export function realServerRequested(): boolean {
  return process.env.OPENSANDBOX_TARGET !== 'simulator' && !!process.env.OPEN_SANDBOX_DOMAIN && !!process.env.OPEN_SANDBOX_API_KEY;
}

export async function startTarget(options: OpenSandboxSimulatorOptions = {}): Promise<Target> {
  const image = process.env.OPEN_SANDBOX_TEST_IMAGE ?? 'ubuntu:24.04';
  if (realServerRequested()) {
    return { real: true, domain: process.env.OPEN_SANDBOX_DOMAIN as string, apiKey: process.env.OPEN_SANDBOX_API_KEY, simulator: undefined, image };
  }
  const simulator = await startOpenSandboxSimulator(options);
  return { real: false, domain: simulator.url, apiKey: simulator.apiKey ?? undefined, simulator, image };
}

export function connection(target: Target, extra: ConnectionConfigOptions = {}): ConnectionConfig {
  return new ConnectionConfig({ domain: target.domain, apiKey: target.apiKey, disableMetrics: true, requestTimeoutSeconds: 60, ...extra });
}

/** Skips a "[simulator]" test against a real server, saying why. */
export function needsSimulator(ctx: Context, target: Target, why: string): OpenSandboxSimulator {
  if (!target.simulator) {
    console.log(`      skipped against a real server (${why})`);
    ctx.skip();
  }
  return target.simulator as OpenSandboxSimulator;
}

/** Creates sandboxes for a suite and kills every one of them afterwards. */
export class SandboxPool {
  private readonly made: Sandbox[] = [];
  constructor(private readonly target: Target) {}
  async create(opts: Partial<SandboxCreateOptions> = {}, conn?: ConnectionConfig): Promise<Sandbox> {
    const sbx = await Sandbox.create({
      connectionConfig: conn ?? connection(this.target),
      image: this.target.image,
      timeoutSeconds: 600,
      metadata: { 'sandbox-sessions.test': 'opensandbox' },
      ...opts,
    } as SandboxCreateOptions);
    this.made.push(sbx);
    return sbx;
  }
  async killAll(): Promise<void> {
    for (const sbx of this.made.splice(0)) {
      await sbx.kill().catch(() => undefined);
      await sbx.close().catch(() => undefined);
    }
  }
}
