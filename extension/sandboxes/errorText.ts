// Turns gateway failures into sentences a person can act on (shared by the terminal, the file
// system and commands), instead of raw HTTP statuses.
import { GatewayError, GatewayProtocolError, GatewayTransportError, GatewayUsageError } from '../../protocol/kruntimes/gatewayErrors';

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
    return err.outcomeUnknown
      ? `The connection to ${sandbox} broke; the operation may or may not have run. ${err.message}`
      : `Cannot reach ${sandbox}'s gateway: ${err.message}`;
  }
  if (err instanceof GatewayProtocolError || err instanceof GatewayUsageError) return err.message;
  return err instanceof Error ? err.message : String(err);
}
