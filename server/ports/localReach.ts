// How a port of a local sandbox is reached, decided from its backend and what listens on this
// machine. Both local backends run commands in this machine's network namespace — `process`
// always, `bubblewrap` unless a command asks for isolateNetwork (then that command has a network
// of its own with only `lo`, which nothing outside it can reach) — so a port is reachable exactly
// when it listens here on a loopback or wildcard address, at its own address: nothing to forward.
import type { ListeningPort } from '../../protocol/ports';
import { hostPort } from '../../protocol/ports';
import { answersOnLoopback } from './procNetTcp';

export type LocalReachDecision =
  | { kind: 'host'; host: string; message: string }
  | { kind: 'refused'; code: 'not_listening' | 'not_on_loopback' | 'unsupported_backend' | 'local_port_fixed'; message: string };

export interface LocalReachInput {
  sandbox: string;
  /** The Run's `spec.runtime`: the backend's name. */
  backend: string;
  port: number;
  localPort?: number;
  /** What listens in this machine's network now. */
  listening: ListeningPort[];
}

const HOST_NETWORK: Record<string, string> = {
  process: 'a "process" sandbox has no network isolation: its servers listen on this machine',
  bubblewrap: 'a "bubblewrap" sandbox shares this machine\'s network (unless a command runs with isolateNetwork)',
};

export function decideLocalReach(input: LocalReachInput): LocalReachDecision {
  const { sandbox, backend, port } = input;
  const shares = HOST_NETWORK[backend];
  if (shares === undefined) {
    return { kind: 'refused', code: 'unsupported_backend', message: `sandbox ${sandbox} runs on backend "${backend}", whose network this server cannot reach` };
  }
  if (input.localPort !== undefined && input.localPort !== port) {
    return {
      kind: 'refused',
      code: 'local_port_fixed',
      message: `port ${port} of sandbox ${sandbox} is already port ${port} of this machine (${shares}); it cannot also be local port ${input.localPort}`,
    };
  }
  const sockets = input.listening.filter((l) => l.port === port);
  const socket = sockets.find((l) => answersOnLoopback(l.address));
  if (!socket) {
    if (sockets.length > 0) {
      const where = sockets.map((l) => l.address).join(', ');
      return {
        kind: 'refused',
        code: 'not_on_loopback',
        message: `port ${port} of sandbox ${sandbox} listens only on ${where}, not on the loopback address: open ${hostPort(sockets[0]?.address ?? '', port)} directly, or start the server on 0.0.0.0 or 127.0.0.1`,
      };
    }
    const isolated =
      backend === 'bubblewrap'
        ? '; a server started in a command with isolateNetwork has a network of its own with only a loopback interface, and nothing outside that command can reach it — start it without isolateNetwork to forward it'
        : '';
    return { kind: 'refused', code: 'not_listening', message: `nothing listens on port ${port} of sandbox ${sandbox} (${shares}, and nothing listens on port ${port} here): start the server first${isolated}` };
  }
  const v6only = socket.address === '::1';
  const host = v6only ? '::1' : '127.0.0.1';
  return { kind: 'host', host, message: `port ${port} of sandbox ${sandbox} already listens on this machine (${shares}): open ${hostPort(host, port)} directly` };
}
