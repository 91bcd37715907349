// An activation's throw-away sandbox: reached through its gateway (and through its directory on this machine when
// it has one, for the workspace mover), given the ActivationRequest file and this attempt's credentials under the
// config root — never under the session, so never in a bundle — and destroyed afterwards, best effort and bounded.
import type { ActivationRequest, ActivationRunRequest } from '../../protocol/activation';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { SandboxRef } from '../../protocol/sandboxes';
import type { Logger } from '../log';
import type { SandboxProvider } from '../sandboxes/provider';
import { confirmedHostRoot } from '../sandboxes/hostPlacement';
import type { SandboxAccess } from '../sandboxes/workspaceMover';
import { ActivationError } from './errors';
import { REMOTE } from './sandboxLayout';
import { makaSessionIdOf, type StateIdentity } from './stateIdentity';

/** What one activation gets that must never be bundled: env (e.g. API keys) and files under --config-root. */
export interface ActivationCredentials {
  env?: Record<string, string>;
  /** Paths relative to the config root → contents. */
  configFiles?: Record<string, string | Uint8Array>;
}

/** A connected sandbox: its gateway, its directory here (if confirmed) and the absolute root its commands see. */
export interface ConnectedSandbox extends SandboxAccess {
  root: string;
}

/**
 * Opens the sandbox's gateway and finds its root (`pwd`) and, at the same time, the directory the provider offers for
 * it here (used only when it is that very root: workspaceMover.hostRootOf; a provider whose commands start there by
 * construction is not asked); the client is closed again if that fails.
 */
export async function connectSandbox(provider: SandboxProvider, ref: SandboxRef, signal: AbortSignal): Promise<ConnectedSandbox> {
  // Both ask the provider about the same Run: at the same time.
  const offered = Promise.resolve().then(() => provider.hostDirectory?.(ref));
  offered.catch(() => undefined); // awaited below unless open or pwd fails first
  const connection = await provider.open(ref);
  const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls });
  try {
    if (provider.hostDirectoryIsCommandRoot === true) {
      const dir = await offered;
      // Commands start in the directory offered, by construction: its real path is the root, no command needed.
      const hostRoot = dir === undefined ? undefined : await confirmedHostRoot(dir, dir);
      if (hostRoot !== undefined) return { client, root: hostRoot, hostRoot };
    }
    const pwd = await client.runCommand({ argv: ['pwd'] }, { signal });
    const root = pwd.stdout.toString('utf8').trim();
    if (pwd.exitCode !== 0 || !root.startsWith('/')) throw new ActivationError('sandbox_failed', `cannot find the sandbox root (pwd exited ${pwd.exitCode})`);
    return { client, root, hostRoot: await confirmedHostRoot(await offered, root) };
  } catch (err) {
    await client.close().catch(() => undefined);
    throw err;
  }
}

/** Writes the ActivationRequest as a JSON file (after the config root: `writeConfigRoot`). */
export async function writeActivationInput(
  client: GatewayClient,
  input: { request: ActivationRunRequest; identity: StateIdentity | undefined },
  signal: AbortSignal,
): Promise<void> {
  const { request, identity } = input;
  const makaSessionId = makaSessionIdOf(identity);
  const activationRequest: ActivationRequest = {
    schemaVersion: 1,
    activationId: request.activationId,
    cloudSessionId: request.sessionId,
    ...(makaSessionId !== undefined ? { makaSessionId } : {}),
    stimulus: request.stimulus,
  };
  await client.writeFile(REMOTE.input, Buffer.from(JSON.stringify(activationRequest), 'utf8'), { createParents: true }, { signal });
}

/** Makes the config root and writes the credentials' files under it (beside the session: it may go with the hydrate). */
export async function writeConfigRoot(client: GatewayClient, credentials: ActivationCredentials, signal: AbortSignal): Promise<void> {
  await client.createDirectory(REMOTE.config, { signal });
  for (const [rel, contents] of Object.entries(credentials.configFiles ?? {})) {
    await client.writeFile(`${REMOTE.config}/${rel}`, typeof contents === 'string' ? Buffer.from(contents, 'utf8') : contents, { createParents: true }, { signal });
  }
}

/** Best effort, bounded: cancel the sandbox and delete its record. */
export async function destroySandbox(provider: SandboxProvider | undefined, ref: SandboxRef, log: Logger, progress: (phase: string, message?: string) => void): Promise<void> {
  if (!provider) return;
  progress('cleanup', `destroying sandbox ${ref.name}`);
  try {
    await provider.terminate(ref, 'Immediate', { wait: true, timeoutMs: 30_000 });
  } catch (err) {
    log.debug('terminating the activation sandbox', { sandbox: ref.name, error: (err as Error).message });
  }
  try {
    await provider.delete(ref);
  } catch (err) {
    log.debug('deleting the activation sandbox', { sandbox: ref.name, error: (err as Error).message });
  }
}
