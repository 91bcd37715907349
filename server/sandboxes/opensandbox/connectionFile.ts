// How the local gateway daemon knows where OpenSandbox is: `opensandbox.json` in the state root
// (0600, written by the companion server when the editor's settings or its secret storage give a
// domain and an API key), else the daemon's own OPEN_SANDBOX_DOMAIN / OPEN_SANDBOX_API_KEY. Read
// on every use, so a key set in the editor applies without restarting the daemon. The key never
// leaves this file and the SDK's connection: describe() is what may be logged.
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { readJsonRecord, writeJsonAtomic } from '../../local/atomicFile';
import { resolveTarget, type OpenSandboxTarget } from './connectionTarget';

export const CONNECTION_FILE = 'opensandbox.json';

/** Built on first parse (z.lazy): a zod schema costs start time and heap (issue 25). */
const ConnectionFileSchema = z.lazy(() =>
  z.strictObject({
    version: z.literal(1),
    domain: z.string().min(1),
    apiKey: z.string().min(1).optional(),
    useServerProxy: z.boolean().optional(),
  }),
);
export type OpenSandboxConnectionFile = z.infer<typeof ConnectionFileSchema>;

export function connectionFilePath(stateDir: string): string {
  return path.join(stateDir, CONNECTION_FILE);
}

/** What to tell a user who has no connection configured. */
export const NO_CONNECTION_MESSAGE =
  'OpenSandbox is not configured: set the "sandboxSessions.opensandbox.domain" setting and run "Sandbox Sessions: Set OpenSandbox API Key…" ' +
  '(or start the gateway daemon with OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY in its environment)';

/**
 * Where the daemon connects now, or undefined when neither the file nor the environment names a domain
 * (without the SDK: connection.ts's connectionTo makes the SDK connection from it).
 */
export function daemonTarget(stateDir: string, env: NodeJS.ProcessEnv = process.env): OpenSandboxTarget | undefined {
  const file = readConnectionFileSync(stateDir);
  if (file) return resolveTarget({ domain: file.domain, apiKey: file.apiKey ?? '', useServerProxy: file.useServerProxy, env: {} });
  if (!env.OPEN_SANDBOX_DOMAIN?.trim()) return undefined;
  return resolveTarget({ env });
}

/** The file, or undefined when there is none; a file that is not ours (bad JSON, wrong mode) is refused loudly. */
export function readConnectionFileSync(stateDir: string): OpenSandboxConnectionFile | undefined {
  const file = connectionFilePath(stateDir);
  let text: string;
  try {
    const st = fs.statSync(file);
    if ((st.mode & 0o077) !== 0) throw new Error(`${file} is readable by others (mode ${(st.mode & 0o777).toString(8)}); it holds an API key — make it 0600`);
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const parsed = ConnectionFileSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${file} is not an OpenSandbox connection file: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return parsed.data;
}

export async function readConnectionFile(stateDir: string): Promise<OpenSandboxConnectionFile | undefined> {
  return readJsonRecord(connectionFilePath(stateDir), ConnectionFileSchema);
}

/** Writes (0600, atomically) or, with `domain` undefined, removes the file. */
export async function writeConnectionFile(stateDir: string, conn: { domain?: string; apiKey?: string; useServerProxy?: boolean }): Promise<void> {
  const file = connectionFilePath(stateDir);
  if (!conn.domain?.trim()) {
    await fs.promises.rm(file, { force: true });
    return;
  }
  await fs.promises.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const value: OpenSandboxConnectionFile = {
    version: 1,
    domain: conn.domain.trim(),
    ...(conn.apiKey ? { apiKey: conn.apiKey } : {}),
    ...(conn.useServerProxy !== undefined ? { useServerProxy: conn.useServerProxy } : {}),
  };
  await writeJsonAtomic(file, value, 0o600);
}
