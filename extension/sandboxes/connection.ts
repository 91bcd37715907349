// What the file system and terminal need of an open sandbox: a gateway client (re-created when
// the companion server hands out a new endpoint or token), its capabilities and its phase. Named
// LiveSandboxConnection because it is the window's live handle, not the wire answer of `sandboxes/open`
// (protocol/sandboxes.ts SandboxConnection: endpoint, token, capabilities) from which it connects.
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { GatewayCapabilities } from '../../protocol/kruntimes/gateway';
import type { RunPhase } from '../../protocol/kruntimes/run';
import type { SandboxFileReads } from '../fs/companionFileReads';

export interface LiveSandboxConnection {
  /** The stable sandbox key (the `sandbox:` URI authority). */
  readonly key: string;
  /** A short name for prompts and titles. */
  readonly label: string;
  /** A client for the sandbox's gateway; reconnects after the endpoint or token changed. */
  client(): Promise<GatewayClient>;
  /**
   * Called after a call failed in a way a new endpoint or token might fix (401, transport). With
   * the client that failed, it is a no-op once another caller has already reconnected: concurrent
   * failures of one outage must not close the fresh client a third caller is using.
   */
  invalidate(failed?: GatewayClient): void;
  capabilities(): GatewayCapabilities | undefined;
  /** The last phase the companion server reported, if known. */
  phase(): RunPhase | undefined;
  /** Marks the sandbox in use (a running task) until disposed, so this window keeps holding its lease. */
  hold(): { dispose(): void };
  /**
   * The sandbox's files read through the companion server, not the gateway: what the file system uses while the
   * sandbox is Finalizing (its gateway then refuses every call; the companion reads a local sandbox's workspace in place).
   */
  readonly fileReads?: SandboxFileReads;
}
