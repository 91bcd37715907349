// Handlers of protocol/companion/files.ts: a local sandbox's files read in place (stat, list, read), for while its
// gateway refuses calls (Finalizing).
import type { fileMethods } from '../../../protocol/companion/files';
import { SandboxWorkspaceReads } from '../../sandboxes/workspaceReads';
import type { HandlersOf, Services } from './context';

export function fileHandlers(services: Services): HandlersOf<typeof fileMethods> {
  const reads = new SandboxWorkspaceReads(services.providers);
  return {
    'sandboxes/files/stat': (params) => reads.stat(params.ref, params.path),
    'sandboxes/files/list': (params) => reads.list(params.ref, params.path, params.limit, params.pageToken),
    'sandboxes/files/read': async (params) => {
      const r = await reads.read(params.ref, params.path, params.offset, params.length);
      return { contents: r.contents.toString('base64'), size: r.size, truncated: r.truncated };
    },
  };
}
