// Listing a sandbox's listening ports through its session: `cat /proc/net/tcp /proc/net/tcp6` as
// one command. A sandbox runs one command at a time (its FIFO queue), and a dev server started in
// its terminal is such a command, so the listing may wait behind it for ever: it waits a few
// seconds, then cancels its queued command (nothing is left in the sandbox) and says why.
import { CompanionError } from '../../protocol/companion';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { ListeningPort } from '../../protocol/ports';
import { parseProcNetTcp, PROC_NET_TCP_ARGV } from './procNetTcp';

/** How long the listing waits for its turn in the sandbox's queue. */
export const LISTING_WAIT_MS = 4000;

export async function listPortsThroughSession(client: GatewayClient, sandbox: string, options: { signal?: AbortSignal; waitMs?: number } = {}): Promise<ListeningPort[]> {
  const controller = new AbortController();
  const waitMs = options.waitMs ?? LISTING_WAIT_MS;
  const timer = setTimeout(() => controller.abort(new Error('busy')), waitMs);
  const onAbort = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const out = await client.runCommand({ argv: PROC_NET_TCP_ARGV, timeoutMillis: 10_000 }, { signal: controller.signal });
    const text = out.stdout.toString('utf8');
    if (!/local_address/.test(text)) {
      const why = out.stderr.toString('utf8').trim().split('\n')[0] ?? '';
      throw new CompanionError('unavailable', `cannot read /proc/net/tcp in sandbox ${sandbox}${why ? `: ${why}` : ''} (exit ${out.exitCode})`, 'proc_net_unreadable');
    }
    return parseProcNetTcp(text);
  } catch (err) {
    if (controller.signal.aborted && !options.signal?.aborted) {
      throw new CompanionError(
        'unavailable',
        `sandbox ${sandbox} is busy running another command (a sandbox runs one command at a time, e.g. the server in its terminal), ` +
          `so its ports could not be listed within ${Math.round(waitMs / 1000)} s — type the port to forward instead`,
        'sandbox_busy',
      );
    }
    throw err;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
}
