// What one substrate must offer for port forwarding. The service (portForwardService.ts) checks
// that the sandbox is Ready, keeps the forwards, ends them with the sandbox or the client, and
// never knows how a port is reached; each substrate says that itself:
// * local (localPorts.ts): the sandbox shares this machine's network — the port is already here;
// * kruntimes (kruntimesPorts.ts): a port-forward through the API server to the Run's Pod;
// * OpenSandbox (opensandboxPorts.ts, for local Runs on that backend): its endpoint for the port
//   (`GET /sandboxes/{id}/endpoints/{port}`, resolved by the daemon) and the headers it requires,
//   behind a loopback HTTP proxy on 127.0.0.1 that adds them (`via: "proxy"`); `watchEnd` is the
//   local one (the Run ends when its sandbox does). Nothing here changed for it.
import type { Run } from '../../protocol/kruntimes/run';
import type { PortListResult, PortReach } from '../../protocol/ports';
import type { SandboxRef, SandboxSummary } from '../../protocol/sandboxes';

/** A Ready sandbox, as the provider reported it just now. */
export interface ReadySandbox {
  ref: SandboxRef;
  summary: SandboxSummary;
  run: Run;
}

/** A sandbox port made reachable on this machine's loopback interface. */
export interface OpenedForward {
  via: PortReach;
  localHost: string;
  localPort: number;
  /** How it is reached, in words. */
  message: string;
  /** Closes what listens for it (nothing, for a port that was already here). */
  close(): Promise<void>;
}

export interface PortSubstrate {
  list(sandbox: ReadySandbox, signal?: AbortSignal): Promise<PortListResult>;
  open(sandbox: ReadySandbox, port: number, localPort?: number): Promise<OpenedForward>;
  /** Calls `onEnd` once when the sandbox ends (a terminal phase) or is deleted; the function returned stops watching. */
  watchEnd(sandbox: ReadySandbox, onEnd: (reason: string) => void): () => void;
}
