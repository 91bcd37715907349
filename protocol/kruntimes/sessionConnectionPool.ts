// The process-wide registry of era-D Session connections: one `operations:ws` socket per
// sandbox (endpoint URL + token + TLS) per process, shared by every GatewayClient of that
// sandbox and by its lease heartbeats, reference-counted and closed when its last user lets go
// (after the operations it still carries have ended, so closing one client never breaks another
// client's call).
import { SessionConnection, type SessionConnectionOptions } from './sessionConnection';

export interface SessionConnectionRef {
  readonly connection: SessionConnection;
  /** Lets go of this reference; idempotent. The last one closes the socket once it is idle. */
  release(): void;
}

interface Entry {
  connection: SessionConnection;
  refs: number;
}

const entries = new Map<string, Entry>();

function keyOf(opts: SessionConnectionOptions): string {
  return JSON.stringify([new URL(opts.endpointUrl).toString().replace(/\/+$/, ''), opts.token ?? '', opts.tls ?? {}]);
}

/** A reference to the shared connection of this sandbox, creating it (unopened) if needed. */
export function acquireSessionConnection(opts: SessionConnectionOptions): SessionConnectionRef {
  const key = keyOf(opts);
  let entry = entries.get(key);
  if (!entry) {
    entry = { connection: new SessionConnection(opts), refs: 0 };
    entries.set(key, entry);
  }
  entry.refs++;
  const held = entry;
  let released = false;
  return {
    connection: held.connection,
    release: () => {
      if (released) return;
      released = true;
      held.refs--;
      if (held.refs > 0) return;
      if (entries.get(key) === held) entries.delete(key);
      held.connection.closeWhenIdle();
    },
  };
}

/** Shared connections currently referenced (diagnostic). */
export function sessionConnectionCount(): number {
  return entries.size;
}
