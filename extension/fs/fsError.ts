// File system failures in VS Code's vocabulary (FileNotFound, FileExists…), and how a failed gateway call
// becomes one: kept apart from SandboxFiles so that the mapping — which gateway answer means which VS Code
// error — reads in one place. The VS Code adapter turns an FsError into a FileSystemError.
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { GatewayError, GatewayTransportError } from '../../protocol/kruntimes/gatewayErrors';
import type { LiveSandboxConnection } from '../sandboxes/connection';
import { describeGatewayFailure, neverSent } from '../sandboxes/errorText';

/** VS Code's codes, and `ChangedElsewhere`: a save refused because the file changed since this window read it. */
export type FsErrorKind = 'FileNotFound' | 'FileExists' | 'FileNotADirectory' | 'FileIsADirectory' | 'NoPermissions' | 'Unavailable' | 'ChangedElsewhere';

/** A file system failure in VS Code's vocabulary; the adapter turns it into a FileSystemError. */
export class FsError extends Error {
  override readonly name = 'FsError';
  constructor(
    readonly kind: FsErrorKind,
    message: string,
    /** The gateway's HTTP status, when the gateway answered. */
    readonly gatewayStatus?: number,
  ) {
    super(message);
  }
}

/** The FsError a failed gateway call on `p` stands for (`label` names the sandbox in the message). */
export function fsErrorFrom(err: unknown, p: string, label: string): FsError {
  if (err instanceof FsError) return err;
  const text = describeGatewayFailure(err, label);
  if (err instanceof GatewayError) {
    const m = err.message;
    if (err.status === 404) return new FsError('FileNotFound', `${p}: ${m}`);
    if (err.status === 400 && /resolve file parent|no such file/.test(m)) return new FsError('FileNotFound', `${p}: ${m}`);
    if (err.status === 500 && /destination already exists/.test(m)) return new FsError('FileExists', `${p} already exists`);
    if (err.status === 500 && /is a directory/.test(m)) return new FsError('FileIsADirectory', `${p} is a directory`);
    if (err.status === 500 && /not a directory/.test(m)) return new FsError('FileNotADirectory', `${p}: ${m}`);
    if (err.status === 401 || err.status === 403 || err.status === 409 || err.status === 400) return new FsError('NoPermissions', text, err.status);
    return new FsError('Unavailable', text, err.status);
  }
  if (err instanceof GatewayTransportError) return new FsError('Unavailable', text);
  return new FsError('Unavailable', text);
}

/**
 * Runs a gateway call with the sandbox's client and maps its failure to an FsError. A call the
 * gateway never received (it did not answer: the local daemon stopped, or the endpoint moved) is
 * sent once more over a new connection — the companion server starts the daemon on the way.
 */
export async function callForFile<T>(connection: LiveSandboxConnection, fn: (client: GatewayClient) => Promise<T>, p: string): Promise<T> {
  let client: GatewayClient | undefined;
  try {
    client = await connection.client();
    try {
      return await fn(client);
    } catch (err) {
      if (!neverSent(err)) throw err;
      connection.invalidate(client);
      client = await connection.client();
      return await fn(client);
    }
  } catch (err) {
    // A new endpoint or token may fix these: the next call connects again (unless another already did).
    if ((err instanceof GatewayError && err.status === 401) || err instanceof GatewayTransportError) connection.invalidate(client);
    throw fsErrorFrom(err, p, connection.label);
  }
}
