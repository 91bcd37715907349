// A sandbox's workspace as a search tree over the gateway's file API (paged listings, bounded
// reads): reads only, so it works where commands are refused (a Finalizing sandbox) or where the
// image has no grep. Slower than a command (one request per folder and per file), so it is the
// fallback, run with bounded concurrency. The gateway confines paths itself.
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import { GatewayError } from '../../protocol/kruntimes/gatewayErrors';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { ReadOutcome, TreeEntry, TreeSource } from './treeSearch';

export function gatewayTree(client: GatewayClient): TreeSource {
  return {
    async list(rel, signal): Promise<TreeEntry[]> {
      const out: TreeEntry[] = [];
      try {
        for await (const e of client.list(rel, { signal })) {
          out.push({ name: e.path, kind: e.directory === true ? 'directory' : 'file', size: e.sizeBytes });
        }
      } catch (err) {
        if (rel !== '' && refused(err)) return []; // a folder that went away, or a link the gateway will not follow
        throw err;
      }
      return out;
    },
    async read(rel, maxBytes, signal): Promise<ReadOutcome> {
      const limit = Math.min(maxBytes, GatewayLimits.maxReadBytes);
      try {
        const { contents, truncated } = await client.read(rel, { maxBytes: limit }, { signal });
        return truncated ? { skipped: 'large' } : { contents };
      } catch (err) {
        // Gone, or a link out of the workspace (the gateway refuses it: "must not escape"), or not a file.
        if (refused(err)) return { skipped: 'not-a-file' };
        throw err;
      }
    },
  };
}

function refused(err: unknown): boolean {
  return err instanceof GatewayError && err.status >= 400 && err.status < 500 && err.status !== 401 && err.status !== 403;
}
