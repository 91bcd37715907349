// `port-forward NAME [LOCAL:]PORT` (kubectl's order), the verb `sandbox` and `kruntimes` share: forwards a sandbox
// port through the very PortForwardService the editor uses (server/ports), says where as kubectl
// does (`Forwarding from 127.0.0.1:LOCAL -> PORT`), and holds it until Ctrl+C or SIGTERM (then
// closes it, exit 0) or until the sandbox ends (then says why, exit 1). A sandbox that ended is
// refused before anything listens.
import type { PortForward } from '../../protocol/ports';
import type { SandboxRef } from '../../protocol/sandboxes';
import type { PortForwardService } from '../ports/portForwardService';
import { UsageError, writeLine } from './args';
import type { CommandIo } from './io';

/** The verb's synopsis, for both commands' help. */
export const PORT_FORWARD_SYNOPSIS = `port-forward NAME [LOCAL:]PORT
  the sandbox's PORT on 127.0.0.1:LOCAL until Ctrl+C, in kubectl's order: PORT alone
  listens on the same port here, :PORT on a free one
  (a local sandbox's server listens here already, on PORT itself)`;

export interface PortSpec {
  port: number;
  localPort?: number;
}

function portNumber(text: string, what: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535) throw new UsageError(`${what} must be a port number from 1 to 65535, got "${text}"`);
  return Number(text);
}

/**
 * As `kubectl port-forward` reads it: `8000` (here and there), `18000:8000` (here 18000, the
 * sandbox's 8000) or `:8000` (a free port here).
 */
export function parsePortSpec(spec: string | undefined): PortSpec {
  if (spec === undefined) throw new UsageError('port-forward needs the sandbox PORT, as PORT, LOCAL:PORT or :PORT');
  const parts = spec.split(':');
  if (parts.length > 2) throw new UsageError(`port-forward takes PORT, LOCAL:PORT or :PORT, got "${spec}"`);
  if (parts.length === 1) {
    const port = portNumber(spec, 'PORT');
    return { port, localPort: port };
  }
  const [local, port] = parts as [string, string];
  return { port: portNumber(port, 'PORT'), ...(local !== '' ? { localPort: portNumber(local, 'LOCAL') } : {}) };
}

/** Why the command stopped waiting. */
type Outcome = { kind: 'signal'; signal: NodeJS.Signals } | { kind: 'ended'; reason: string };

/**
 * Forwards `spec` of `ref` and waits. Throws (a refusal in words) when the forward cannot be made;
 * resolves with the exit code otherwise. The service is disposed either way: nothing keeps listening.
 */
export async function runPortForward(service: PortForwardService, ref: SandboxRef, spec: PortSpec, io: CommandIo, options: { json: boolean }): Promise<number> {
  // Loaded here, not with the help text: protocol/ports builds the sandbox schemas.
  const { hostPort } = await import('../../protocol/ports.js');
  let settle: (outcome: Outcome) => void = () => undefined;
  const outcome = new Promise<Outcome>((resolve) => (settle = resolve));
  const onSignal = (signal: NodeJS.Signals): void => settle({ kind: 'signal', signal });
  // Listening before the forward exists: a Ctrl+C while it opens still closes it.
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const opening = service.forward(ref, spec.port, spec.localPort, ({ reason }) => settle({ kind: 'ended', reason }));
    void opening.catch(() => undefined); // awaited below, unless a signal comes first (dispose() then closes it)
    const first = await Promise.race([opening.then((f) => ({ kind: 'forwarded' as const, f })), outcome]);
    if (first.kind === 'signal') return 0;
    if (first.kind === 'ended') throw new Error(first.reason);
    const forward: PortForward = first.f;
    const from = hostPort(forward.localHost, forward.localPort);
    if (options.json) writeLine(io.stdout, JSON.stringify(forward));
    else {
      writeLine(io.stdout, `Forwarding from ${from} -> ${forward.sandboxPort}`);
      writeLine(io.stderr, forward.message);
    }
    const end = await outcome;
    if (end.kind === 'signal') return 0;
    writeLine(io.stderr, `error: ${end.reason}; stopped forwarding ${from} -> ${forward.sandboxPort}`);
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await service.dispose();
  }
}
