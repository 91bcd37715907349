// The forwards one client holds (`ports/*`): a sandbox must be Ready to be listed or forwarded
// (one that ended is refused in words); each forward is opened by its substrate (portSubstrate.ts)
// and ends when the client stops it, when its sandbox ends or is deleted (the substrate's watch,
// then `onEnded`), or when the client goes (dispose(): every loopback port this process opened is
// closed). A second request for the same sandbox port returns the forward that exists.
import { CompanionError } from '../../protocol/companion';
import { isTerminalPhase } from '../../protocol/kruntimes/run';
import { hostPort, type PortEnded, type PortForward, type PortListResult } from '../../protocol/ports';
import { type ProviderKind, type SandboxRef, sandboxKey } from '../../protocol/sandboxes';
import type { Logger } from '../log';
import type { SandboxProvider } from '../sandboxes/provider';
import type { OpenedForward, PortSubstrate, ReadySandbox } from './portSubstrate';

interface Entry {
  forward: PortForward;
  opened: OpenedForward;
  stopWatch: () => void;
  onEnded: (ended: PortEnded) => void;
}

export class PortForwardService {
  private readonly forwards = new Map<string, Entry>();
  private readonly opening = new Map<string, Promise<PortForward>>();
  private readonly substrates = new Map<ProviderKind, PortSubstrate>();
  private next = 1;
  private disposed = false;

  constructor(
    private readonly providers: ReadonlyMap<ProviderKind, SandboxProvider>,
    private readonly log: Logger,
    /** How each provider's ports are reached (`portSubstrates.ts` builds them all; a caller may pass fewer). */
    substrates: ReadonlyMap<ProviderKind, PortSubstrate>,
  ) {
    for (const [kind, substrate] of substrates) this.substrates.set(kind, substrate);
  }

  private parts(ref: SandboxRef): { provider: SandboxProvider; substrate: PortSubstrate } {
    const provider = this.providers.get(ref.provider);
    const substrate = this.substrates.get(ref.provider);
    if (!provider || !substrate) throw new CompanionError('unavailable', `port forwarding to ${ref.provider} sandboxes is not available in this server`);
    return { provider, substrate };
  }

  /** The sandbox now, if it is Ready; otherwise a refusal that says its phase. */
  private async ready(ref: SandboxRef): Promise<ReadySandbox> {
    const { sandbox, run } = await this.parts(ref).provider.get(ref);
    const phase = sandbox.phase ?? 'Pending';
    if (isTerminalPhase(sandbox.phase)) {
      throw new CompanionError('refused', `sandbox ${ref.name} has ended (${phase}): nothing runs in it to forward a port to`, 'sandbox_ended');
    }
    if (phase !== 'Ready') throw new CompanionError('not_ready', `sandbox ${ref.name} is ${phase}, not Ready: its ports can be forwarded once it is Ready`, 'run_state');
    return { ref, summary: sandbox, run };
  }

  async list(ref: SandboxRef, signal?: AbortSignal): Promise<PortListResult> {
    const sandbox = await this.ready(ref);
    return this.parts(ref).substrate.list(sandbox, signal);
  }

  forward(ref: SandboxRef, port: number, localPort: number | undefined, onEnded: (ended: PortEnded) => void): Promise<PortForward> {
    if (this.disposed) return Promise.reject(new CompanionError('unavailable', 'the server is shutting down'));
    const key = sandboxKey(ref);
    const existing = [...this.forwards.values()].find((e) => e.forward.key === key && e.forward.sandboxPort === port);
    if (existing && (localPort === undefined || localPort === existing.forward.localPort)) return Promise.resolve(existing.forward);
    if (existing) {
      return Promise.reject(new CompanionError('conflict', `port ${port} of sandbox ${ref.name} is already forwarded to ${hostPort(existing.forward.localHost, existing.forward.localPort)}; stop that forward first`, 'already_forwarded'));
    }
    const pendingKey = `${key}:${port}`;
    let pending = this.opening.get(pendingKey);
    if (!pending) {
      pending = this.open(ref, port, localPort, onEnded).finally(() => this.opening.delete(pendingKey));
      this.opening.set(pendingKey, pending);
    }
    return pending;
  }

  private async open(ref: SandboxRef, port: number, localPort: number | undefined, onEnded: (ended: PortEnded) => void): Promise<PortForward> {
    const sandbox = await this.ready(ref);
    const { provider, substrate } = this.parts(ref);
    const opened = await substrate.open(sandbox, port, localPort);
    const id = `pf-${this.next++}`;
    const forward: PortForward = {
      id,
      ref,
      key: sandboxKey(ref),
      sandboxPort: port,
      localHost: opened.localHost,
      localPort: opened.localPort,
      url: `http://${hostPort(opened.localHost, opened.localPort)}/`,
      via: opened.via,
      message: opened.message,
      startedAt: new Date().toISOString(),
    };
    const entry: Entry = { forward, opened, onEnded, stopWatch: () => undefined };
    this.forwards.set(id, entry);
    this.log.info('port forwarded', { sandbox: forward.key, port, local: hostPort(forward.localHost, forward.localPort), via: forward.via });
    entry.stopWatch = substrate.watchEnd(sandbox, (reason) => void this.end(id, reason));
    // The sandbox may have ended between the check above and the watch's start.
    const now = await provider.get(ref).catch(() => undefined);
    if (!now || isTerminalPhase(now.sandbox.phase) || now.run.metadata.uid !== sandbox.run.metadata.uid) {
      await this.end(id, now ? `sandbox ${ref.name} ended (${now.sandbox.phase ?? ''})` : `sandbox ${ref.name} is gone`);
      throw new CompanionError('refused', `sandbox ${ref.name} ended while its port ${port} was being forwarded`, 'sandbox_ended');
    }
    return forward;
  }

  /** Ends a forward the client did not stop, and tells the client. */
  private async end(id: string, reason: string): Promise<void> {
    const entry = this.forwards.get(id);
    if (!(await this.close(id))) return;
    this.log.info('port forward ended', { sandbox: entry?.forward.key, port: entry?.forward.sandboxPort, reason });
    if (entry) entry.onEnded({ forward: entry.forward, reason });
  }

  private async close(id: string): Promise<boolean> {
    const entry = this.forwards.get(id);
    if (!entry) return false;
    this.forwards.delete(id);
    entry.stopWatch();
    await entry.opened.close();
    return true;
  }

  forwardsOf(ref?: SandboxRef): PortForward[] {
    const key = ref ? sandboxKey(ref) : undefined;
    return [...this.forwards.values()].map((e) => e.forward).filter((f) => key === undefined || f.key === key);
  }

  stop(id: string): Promise<boolean> {
    return this.close(id);
  }

  /** The client went: every forward ends, every loopback port closes. */
  async dispose(): Promise<void> {
    this.disposed = true;
    await Promise.allSettled([...this.opening.values()]);
    await Promise.all([...this.forwards.keys()].map((id) => this.close(id)));
  }
}
