// The session leases this server holds: a sandbox whose Run has `leaseTimeoutSeconds` stays
// alive only while someone sends `operations:ws` heartbeats, so from the moment it is opened
// until it is released (the editor stopped using it), terminated, deleted or the server exits,
// one lease keeper per sandbox does.
import type { SandboxConnection, SandboxRef } from '../../protocol/sandboxes';
import { sandboxKey } from '../../protocol/sandboxes';
import type { Logger } from '../log';
import { holdLease, type LeaseHold } from './leaseKeeper';

export class SandboxLeases {
  private readonly held = new Map<string, LeaseHold>();

  constructor(private readonly log: Logger) {}

  /**
   * Starts heartbeats for `ref` unless they already run, and returns `connection` saying so (unchanged when the Run
   * has no lease).
   */
  hold(ref: SandboxRef, connection: SandboxConnection, leaseTimeoutSeconds: number | undefined): SandboxConnection {
    const key = sandboxKey(ref);
    if (leaseTimeoutSeconds === undefined) return connection;
    const held = { ...connection, lease: { timeoutSeconds: leaseTimeoutSeconds } };
    if (this.held.has(key)) return held;
    const hold = holdLease({
      endpointUrl: connection.endpoint.url,
      token: connection.token,
      ...(connection.endpoint.caBundle ? { caBundle: connection.endpoint.caBundle } : {}),
      ...(connection.tls?.servername ? { servername: connection.tls.servername } : {}),
      ...(connection.tls?.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
      leaseTimeoutSeconds,
      onLost: (err: Error) => {
        this.log.warn('session lease lost', { sandbox: key, message: err.message });
        if (this.held.get(key) === hold) this.held.delete(key);
      },
    });
    this.held.set(key, hold);
    return held;
  }

  /** Stops the heartbeats for `ref`; false when none ran. */
  async release(ref: SandboxRef): Promise<boolean> {
    const key = sandboxKey(ref);
    const hold = this.held.get(key);
    this.held.delete(key);
    await hold?.stop();
    return hold !== undefined;
  }

  async dispose(): Promise<void> {
    const all = [...this.held.values()];
    this.held.clear();
    await Promise.all(all.map((h) => h.stop()));
  }
}
