// A file of a local-gateway sandbox as the gateway serves it (GET P/files/{path}), not through the window: what the
// e2e flows check a save or a command's output against.
import type { Run } from '../../protocol/kruntimes/run';
import { ensureGateway } from '../../server/gateway/daemonClient';
import { endpointPathOf } from '../../server/gateway/localClient';

/** The text of `p` in `run`'s sandbox, read from the daemon of `stateDir` ("" for an empty file). */
export async function readGatewayFile(stateDir: string, run: Run, p: string): Promise<string> {
  const gw = await ensureGateway({ stateDir });
  const res = await fetch(`${gw.url}${endpointPathOf(run)}/files/${p}`, { headers: { authorization: `Bearer ${gw.token}` } });
  const body = (await res.json()) as { contents: string | null };
  return Buffer.from(body.contents ?? '', 'base64').toString('utf8');
}
