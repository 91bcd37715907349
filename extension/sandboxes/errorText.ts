// Turns gateway failures into sentences a person can act on (shared by the terminal, the file
// system and commands), instead of raw HTTP statuses.
import { GatewayError, GatewayProtocolError, GatewayTransportError, GatewayUsageError } from '../../protocol/kruntimes/gatewayErrors';
import type { RunPhase } from '../../protocol/kruntimes/run';

/** Phases in which a sandbox accepts no changes: closing (Drain) or ended. */
export const CLOSED_PHASES: ReadonlySet<string> = new Set<RunPhase>(['Finalizing', 'Succeeded', 'Failed', 'Timeout', 'Cancelled']);

/**
 * Why a closing, closed or deleted sandbox refuses work, and what a person can do instead. `why` is the Run's own
 * status message (an idle timeout, a lease that expired, a total timeout, a cancel); it is said for a sandbox that
 * did not end by a Drain (Succeeded), whose message only says that it was finalized.
 */
export function closedSandboxText(sandbox: string, phase: RunPhase | 'Deleted', why?: string): string {
  if (phase === 'Deleted') return `${sandbox} was deleted: its files and terminal are gone. Remove its folder from the workspace, or open a new sandbox.`;
  if (phase === 'Finalizing') {
    return `${sandbox} is closing (Drain): it finishes accepted work and accepts nothing new, so its files are read-only. Download its artifacts once it has closed, or open a new sandbox to keep working.`;
  }
  const cause = phase !== 'Succeeded' && why?.trim() ? `: ${why.trim()}` : '';
  return `${sandbox} is closed (${phase}${cause}): its files are read-only and it runs no commands. Download its artifacts, or open a new sandbox (or a saved session revision in one) to keep working.`;
}

export function describeGatewayFailure(err: unknown, sandbox: string): string {
  if (err instanceof GatewayError) {
    const m = err.message;
    if (err.status === 409 && /Finalizing|finalizing/.test(m)) {
      return `${sandbox} is closing (Drain): it finishes accepted work and accepts nothing new.`;
    }
    if (err.status === 409 && /not Ready/.test(m)) {
      const phase = /Session Run is ([A-Za-z]*), not Ready/.exec(m)?.[1] ?? 'not ready';
      return `${sandbox} is ${phase || 'not ready'}, not Ready: it cannot run commands or change files now.`;
    }
    if (err.status === 429 && /queue is full/.test(m)) {
      return `${sandbox} is busy: its operation queue is full. Try again when running commands finish.`;
    }
    if (err.status === 429) return `${sandbox}'s gateway is overloaded (${m}). Try again shortly.`;
    if (err.status === 401) return `The gateway refused the credentials for ${sandbox} (${m}). Reopen the sandbox.`;
    if (err.status === 403) return `You are not allowed to use ${sandbox} (${m}).`;
    if (err.status === 404) return `${m} (${sandbox}).`;
    if (err.status === 413) return `Too large for one gateway call: ${m}.`;
    if (err.status === 504) return `The command ran into the sandbox's operation timeout (${m}).`;
    return `${sandbox} answered HTTP ${err.status}: ${m}`;
  }
  if (err instanceof GatewayTransportError) {
    if (err.outcomeUnknown) return `The connection to ${sandbox} broke; the operation may or may not have run. ${err.message}`;
    // Nothing was sent: say what happened in words, not the gateway's internal address.
    const code = (err.cause as { code?: unknown } | undefined)?.code;
    const why = code === 'ECONNREFUSED' ? 'nothing answers at its address (the gateway stopped)' : typeof code === 'string' ? `the connection failed (${code})` : 'the connection failed';
    return `Cannot reach ${sandbox}: ${why}. The next command or file operation connects again.`;
  }
  if (err instanceof GatewayProtocolError || err instanceof GatewayUsageError) return err.message;
  return err instanceof Error ? err.message : String(err);
}

/** A failure before anything reached the gateway (it did not answer): safe to send again. */
export function neverSent(err: unknown): boolean {
  return err instanceof GatewayTransportError && !err.outcomeUnknown;
}

/** An error's message for a person (companion errors already carry words, not class names). */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
