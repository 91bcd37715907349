// Ports of local sandboxes. Their commands run in this machine's network namespace (localReach.ts),
// so what the sandbox listens on is read here, from this machine's `/proc/net/tcp*` — the very
// tables a `cat` in the sandbox would print — without a command in its queue: a dev server in
// the sandbox's terminal is the running command, and a listing must not wait behind it. A Run on
// the OpenSandbox backend lives in a container elsewhere: its ports go through opensandboxPorts.ts.
import fsp from 'node:fs/promises';
import net from 'node:net';
import { CompanionError } from '../../protocol/companion';
import { isTerminalPhase } from '../../protocol/kruntimes/run';
import type { ListeningPort, PortListResult } from '../../protocol/ports';
import { createLogger, type Logger } from '../log';
import { OPENSANDBOX_BACKEND } from '../sandboxes/opensandbox/runSettings';
import type { SandboxProvider } from '../sandboxes/provider';
import { decideLocalReach } from './localReach';
import { OpenSandboxPorts } from './opensandboxPorts';
import type { OpenedForward, PortSubstrate, ReadySandbox } from './portSubstrate';
import { parseProcNetTcp } from './procNetTcp';

/** This machine's listening TCP sockets (the `/proc` tables; elsewhere, a connect to `probePort`). */
export async function hostListeningPorts(probePort?: number): Promise<ListeningPort[]> {
  const tables = await Promise.all(['/proc/net/tcp', '/proc/net/tcp6'].map((f) => fsp.readFile(f, 'utf8').catch(() => '')));
  if (tables.some((t) => t !== '')) return parseProcNetTcp(tables.join('\n'));
  if (probePort === undefined) throw new CompanionError('unavailable', "listing a local sandbox's ports needs Linux's /proc/net/tcp; type the port to forward instead", 'proc_net_unreadable');
  const open = await new Promise<boolean>((resolve) => {
    const socket = net.connect(probePort, '127.0.0.1');
    socket.once('connect', () => resolve(true));
    socket.once('error', () => resolve(false));
    socket.setTimeout(2000, () => resolve(false));
  });
  return open ? [{ port: probePort, address: '127.0.0.1', family: 'ipv4' }] : [];
}

export class LocalPortSubstrate implements PortSubstrate {
  private readonly remote: OpenSandboxPorts;

  constructor(
    private readonly provider: SandboxProvider,
    log: Logger = createLogger(process.stderr, 'warn'),
  ) {
    this.remote = new OpenSandboxPorts(provider, log);
  }

  async list(sandbox: ReadySandbox, signal?: AbortSignal): Promise<PortListResult> {
    if (sandbox.run.spec.runtime === OPENSANDBOX_BACKEND) return this.remote.list(sandbox, signal);
    return {
      ports: await hostListeningPorts(),
      note: `sandbox ${sandbox.ref.name} (${sandbox.run.spec.runtime}) shares this machine's network: these are this machine's listening ports`,
    };
  }

  async open(sandbox: ReadySandbox, port: number, localPort?: number): Promise<OpenedForward> {
    if (sandbox.run.spec.runtime === OPENSANDBOX_BACKEND) return this.remote.open(sandbox, port, localPort);
    const decision = decideLocalReach({
      sandbox: sandbox.ref.name,
      backend: sandbox.run.spec.runtime,
      port,
      ...(localPort !== undefined ? { localPort } : {}),
      listening: await hostListeningPorts(port),
    });
    if (decision.kind === 'refused') throw new CompanionError(decision.code === 'local_port_fixed' ? 'invalid_params' : 'refused', decision.message, decision.code);
    return { via: 'host', localHost: decision.host, localPort: port, message: decision.message, close: async () => undefined };
  }

  watchEnd(sandbox: ReadySandbox, onEnd: (reason: string) => void): () => void {
    const uid = sandbox.run.metadata.uid;
    let ended = false;
    const stop = this.provider.watch(({ sandbox: s, removed }) => {
      if (ended || s.key !== sandbox.summary.key || (uid !== undefined && s.uid !== undefined && s.uid !== uid)) return;
      if (!removed && !isTerminalPhase(s.phase)) return;
      ended = true;
      onEnd(removed ? `sandbox ${s.ref.name} was deleted` : `sandbox ${s.ref.name} ended (${s.phase ?? 'unknown phase'})`);
    });
    return stop;
  }
}
