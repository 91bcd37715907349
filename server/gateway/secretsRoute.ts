// `PUT /local/v1/secrets` of the local gateway daemon: a client (the companion server, the CLI) hands over secret
// values its backends need for a create — `{"values": {"NAME": "value" | null}}` — held in memory only
// (server/local/daemonSecrets.ts). Bearer token required; answers 204 and never echoes a value.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { setDaemonSecrets } from '../local/daemonSecrets';
import type { BearerAuth } from './auth';
import { readBody, sendError } from './httpBodies';

export const SECRETS_PATH = '/local/v1/secrets';
const MAX_BODY_BYTES = 256 * 1024;

/** Built on first parse (z.lazy): a zod schema costs start time and heap (issue 25). */
const SecretsBodySchema = z.lazy(() =>
  z.strictObject({
    values: z.record(z.string().regex(/^[A-Z][A-Z0-9_]{0,63}$/), z.string().min(1).max(16_384).nullable()),
  }),
);

export async function serveSecrets(req: IncomingMessage, res: ServerResponse, auth: BearerAuth): Promise<void> {
  const checked = auth.check(req.headers);
  if (!checked.ok) {
    req.resume();
    return sendError(res, 401, checked.message);
  }
  if (req.method !== 'PUT') {
    req.resume();
    return sendError(res, 405, 'the server does not allow this method on the requested resource');
  }
  let parsed;
  try {
    parsed = SecretsBodySchema.safeParse(JSON.parse((await readBody(req, MAX_BODY_BYTES)).toString('utf8')));
  } catch {
    return sendError(res, 400, 'the request body is not JSON (or is larger than 256 KiB)');
  }
  // The issues name paths, never the values.
  if (!parsed.success) return sendError(res, 400, `invalid secrets: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  setDaemonSecrets(parsed.data.values);
  res.writeHead(204);
  res.end();
}
