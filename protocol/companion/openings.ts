// "What the sandbox changed since it was opened", for a sandbox that has no revision to compare with (one made
// from an image, not opened from a session): the first comparison takes the sandbox's opening snapshot — its
// workspace packed as a save would pack it, kept by the server, nothing committed — and every later one compares
// with it, as `sessions/compareSandbox` compares with a revision. Its files can be read for a diff. One feature
// of the method table in index.ts.
import { z } from 'zod';
import { SandboxRefSchema } from '../sandboxes';
import { defineMethod, withProgressToken } from './contract';
import { FileBytesSchema, FileRangeSchema, WorkspaceChangesSchema } from './sessions';

export const OpeningChangesSchema = WorkspaceChangesSchema.omit({ against: true }).extend({
  /** When the opening snapshot was taken (ISO 8601). */
  opened: z.object({ at: z.string().datetime() }),
  /** The snapshot was taken by this call (so nothing can have changed since, but what changed during it). */
  taken: z.boolean(),
});
export type OpeningChanges = z.infer<typeof OpeningChangesSchema>;

const EXAMPLE_SANDBOX = { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } as const;

export const openingMethods = {
  'openings/compareSandbox': defineMethod('openings/compareSandbox', {
    description:
      "What a sandbox's workspace changed since its opening snapshot, compared as `sessions/compareSandbox` compares " +
      'with a revision. A sandbox without one (or whose name now belongs to a newer sandbox) gets it first: its ' +
      'workspace packed under the V1 policy (a secret file refuses, named), kept in the state root beside the local ' +
      "runtime's records (0600), never committed. The snapshots of the 32 sandboxes compared most recently are kept.",
    params: withProgressToken(z.object({ sandbox: SandboxRefSchema })),
    result: OpeningChangesSchema,
    progress: true,
    example: {
      params: { sandbox: EXAMPLE_SANDBOX },
      result: {
        opened: { at: '2026-12-04T14:02:11.480Z' },
        taken: false,
        changes: [{ path: 'notes.md', status: 'added' }],
        total: 1,
        unchanged: 3,
        workspace: {
          policyVersion: 1,
          includedEntries: 5,
          excludedEntries: [],
          excludedEntriesByCategory: { source_control: 0, dependency_tree: 0, cache: 0, log: 0, runtime_scratch: 0 },
          payloadBytes: 96,
        },
      },
    },
  }),
  'openings/list': defineMethod('openings/list', {
    description:
      "One folder of a sandbox's opening snapshot (`object_not_found` if it has none yet: `openings/compareSandbox` " +
      'takes it). The root holds `state/`, `workspace/` and `state-identity.json`, as a revision does.',
    params: z.object({ sandbox: SandboxRefSchema, path: z.string().default('') }),
    result: z.object({ entries: z.array(z.object({ name: z.string(), directory: z.boolean(), size: z.number().int().min(0) })) }),
    example: {
      params: { sandbox: EXAMPLE_SANDBOX, path: 'workspace' },
      result: { entries: [{ name: 'README.md', directory: false, size: 6 }] },
    },
  }),
  'openings/read': defineMethod('openings/read', {
    description: "Bytes of one file of a sandbox's opening snapshot (at most 786,000 per call; `offset`/`length` for more).",
    params: z.object({ sandbox: SandboxRefSchema, ...FileRangeSchema.shape }),
    result: FileBytesSchema,
    example: {
      params: { sandbox: EXAMPLE_SANDBOX, path: 'workspace/README.md' },
      result: { contents: 'Zmlyc3QK', size: 6, truncated: false },
    },
  }),
} as const;
