// What a sandbox's phase allows of its files, apart from SandboxFiles' caching: once it is Finalizing or has
// finished its files are read-only (a write is refused with a message saying why), and while it is Finalizing —
// its gateway then answers 409 to every call — reads and listings go through the companion server instead
// (companionFileReads.ts), with the gateway's refusal standing when the companion cannot read them either.
import type { LiveSandboxConnection } from '../sandboxes/connection';
import type { SandboxFileReads } from './companionFileReads';
import { FsError } from './fsError';

const READ_ONLY_PHASES = new Set(['Finalizing', 'Succeeded', 'Failed', 'Timeout', 'Cancelled']);

type PhasedConnection = Pick<LiveSandboxConnection, 'label' | 'phase' | 'fileReads'>;

export function isReadOnly(connection: PhasedConnection): boolean {
  const phase = connection.phase();
  return phase !== undefined && READ_ONLY_PHASES.has(phase);
}

/** Throws NoPermissions when the sandbox's phase no longer accepts changes to `p`. */
export function assertWritable(connection: PhasedConnection, p: string): void {
  if (!isReadOnly(connection)) return;
  const phase = connection.phase();
  throw new FsError(
    'NoPermissions',
    phase === 'Finalizing'
      ? `${connection.label} is closing (Drain) and accepts no changes; ${p} was not changed`
      : `${connection.label} is ${phase}; ${p} cannot be changed`,
  );
}

/**
 * A read (or listing) through the gateway, or through the companion server while the sandbox is Finalizing —
 * its gateway then answers 409 to every call — and also when this window has not heard of the Drain yet and
 * the gateway refuses with 409 (or the sandbox can no longer be opened). When the companion cannot read it
 * either (the sandbox's files are not on its machine), the gateway's refusal stands.
 */
export async function readThrough<T>(connection: PhasedConnection, gateway: () => Promise<T>, companion: (reads: SandboxFileReads) => Promise<T>): Promise<T> {
  const reads = connection.fileReads;
  if (reads && connection.phase() === 'Finalizing') return companion(reads);
  try {
    return await gateway();
  } catch (err) {
    if (!reads || !refusedAsNotReady(err)) throw err;
    try {
      return await companion(reads);
    } catch (fallback) {
      if (fallback instanceof FsError && (fallback.kind === 'Unavailable' || fallback.kind === 'NoPermissions')) throw err;
      throw fallback;
    }
  }
}

/** A refusal that means "not Ready": the gateway's 409, or the companion server's refusal to open the sandbox. */
function refusedAsNotReady(err: unknown): boolean {
  return (err instanceof FsError && err.gatewayStatus === 409) || (err as { code?: unknown } | null)?.code === 'not_ready';
}
