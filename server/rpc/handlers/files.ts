// Handlers of protocol/companion/files.ts: a local sandbox's files read in place (stat, list, read), for while its
// gateway refuses calls (Finalizing), and its folders watched in place (watch).
import { setTimeout as sleep } from 'node:timers/promises';
import type { fileMethods } from '../../../protocol/companion/files';
import { SandboxFolderWatch } from '../../sandboxes/folderWatch';
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
    'sandboxes/files/watch': async (params, ctx) => {
      const watch = new SandboxFolderWatch(await reads.root(params.ref), (folders) => ctx.notify('sandboxes/files/changed', { watchId: params.watchId, folders }));
      try {
        await watch.set(params.folders);
        // Until cancelled, or the sandbox ended and its workspace is gone.
        while (!ctx.signal.aborted && (await watch.workspaceExists())) await sleep(WORKSPACE_CHECK_MS, undefined, { signal: ctx.signal }).catch(() => undefined);
      } finally {
        watch.close();
      }
      ctx.signal.throwIfAborted();
      return {};
    },
  };
}

/** How often a watch checks that the sandbox's workspace still exists (ms). */
const WORKSPACE_CHECK_MS = 2_000;
