// The session repository's methods (`sessions/*`, `revisions/*`): list, export, browse, save a sandbox as a
// revision and open a revision in a sandbox. One feature of the method table in index.ts.
import { z } from 'zod';
import { Sha256DigestSchema, WorkspaceSnapshotReportSchema } from '../bundle';
import {
  CommittedSessionRevisionSchema,
  IdentifierSchema,
  RevisionSchema,
  RevisionSummarySchema,
  SessionSummarySchema,
} from '../repository';
import { SandboxCreateSpecSchema, SandboxRefSchema, SandboxSummarySchema } from '../sandboxes';
import { defineMethod, withProgressToken } from './contract';

/** The checkpoint of the examples below: Maka's golden fixture bundle, as the file repository stores it. */
const EXAMPLE_CHECKPOINT = {
  manifest: {
    objectRef: 'maka-local-object://v1/9f2c',
    digest: 'sha256:0cd8b83b480b1566b63210484b536ccd9710d9c69cdc8552ebeb04c4f245e30c',
    bytes: 321,
    mediaType: 'application/vnd.maka.session-checkpoint-manifest+json;version=1',
  },
  value: {
    schemaVersion: 1,
    compatibilityBundle: {
      objectRef: 'maka-local-object://v1/56aadf143fb7072bfbba169941c43f397948f3a7569524aeee5109aeb20fbecd',
      digest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
      bytes: 676,
      mediaType: 'application/vnd.maka.session-bundle+tar;version=1;compression=zstd',
    },
  },
};

/** How a file of a sandbox's workspace differs from the revision it is compared with. */
export const WorkspaceChangeSchema = z.object({
  /** Relative to the workspace (the sandbox's root). */
  path: z.string().min(1),
  status: z.enum(['added', 'modified', 'deleted']),
});
export type WorkspaceChange = z.infer<typeof WorkspaceChangeSchema>;

export const WorkspaceChangesSchema = z.object({
  against: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema }),
  /** Sorted by path; at most 5,000 (`total` counts them all). */
  changes: z.array(WorkspaceChangeSchema),
  total: z.number().int().min(0),
  /** Files that are the same in both. */
  unchanged: z.number().int().min(0),
  /** What a save would include and leave out (the snapshot policy's report). */
  workspace: WorkspaceSnapshotReportSchema,
});
export type WorkspaceChanges = z.infer<typeof WorkspaceChangesSchema>;

/** Which bytes of a bundle's file to read (`revisions/read`, `openings/read`): at most 786,000 per call. */
export const FileRangeSchema = z.object({
  path: z.string().min(1),
  offset: z.number().int().min(0).default(0),
  length: z.number().int().min(1).max(786_000).default(786_000),
});
/** Those bytes (base64), the file's size, and whether more follow. */
export const FileBytesSchema = z.object({ contents: z.string(), size: z.number().int().min(0), truncated: z.boolean() });

export const sessionMethods = {
  'sessions/list': defineMethod('sessions/list', {
    description: 'The sessions of the configured repository (the embedded file repository, or PostgreSQL), and where it is.',
    params: z.object({}),
    result: z.object({
      repository: z.object({ kind: z.enum(['file', 'postgres']), location: z.string() }),
      sessions: z.array(SessionSummarySchema),
    }),
    example: {
      params: {},
      result: {
        repository: { kind: 'file', location: '/home/me/.local/share/sandbox-sessions/repository' },
        sessions: [
          {
            sessionId: 'demo',
            agentId: 'sandbox-sessions',
            head: { sessionId: 'demo', revision: 'r2' },
            oldestRetained: 'r1',
            createdAt: '2026-11-29T10:00:00.000Z',
            updatedAt: '2026-11-29T10:05:00.000Z',
          },
        ],
      },
    },
  }),
  'sessions/revisions': defineMethod('sessions/revisions', {
    description: "A session's retained revisions, newest first.",
    params: z.object({ sessionId: IdentifierSchema }),
    result: z.object({ revisions: z.array(RevisionSummarySchema) }),
    example: {
      params: { sessionId: 'demo' },
      result: {
        revisions: [
          {
            ref: { sessionId: 'demo', revision: 'r1' },
            checkpoint: EXAMPLE_CHECKPOINT,
            committedAt: '2026-11-29T10:00:00.000Z',
            isHead: true,
          },
        ],
      },
    },
  }),
  'sessions/export': defineMethod('sessions/export', {
    description: "Writes a retained revision's bundle (default: the head) to a new file, verified while it is copied.",
    params: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema.optional(), destination: z.string().min(1) }),
    result: z.object({
      revision: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema }),
      path: z.string(),
      digest: Sha256DigestSchema,
      bytes: z.number().int(),
    }),
    example: {
      params: { sessionId: 'demo', revision: 'r1', destination: '/home/me/demo-r1.tar.zst' },
      result: {
        revision: { sessionId: 'demo', revision: 'r1' },
        path: '/home/me/demo-r1.tar.zst',
        digest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
        bytes: 676,
      },
    },
  }),
  'revisions/list': defineMethod('revisions/list', {
    description:
      "One folder of a retained revision, read straight from its bundle: the first call decompresses the bundle once " +
      'and indexes it (`indexBuilds` counts these in this server); later listings and reads come from the index. ' +
      'The root holds `state/`, `workspace/` and `state-identity.json`.',
    params: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema, path: z.string().default('') }),
    result: z.object({
      entries: z.array(z.object({ name: z.string(), directory: z.boolean(), size: z.number().int().min(0) })),
      indexBuilds: z.number().int().min(0),
    }),
    example: {
      params: { sessionId: 'demo', revision: 'r1', path: 'workspace' },
      result: { entries: [{ name: 'README.md', directory: false, size: 6 }], indexBuilds: 1 },
    },
  }),
  'revisions/read': defineMethod('revisions/read', {
    description: 'Bytes of one file of a retained revision (at most 786,000 per call; `offset`/`length` for more).',
    params: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema, ...FileRangeSchema.shape }),
    result: FileBytesSchema,
    example: {
      params: { sessionId: 'demo', revision: 'r1', path: 'workspace/README.md' },
      result: { contents: 'Zmlyc3QK', size: 6, truncated: false },
    },
  }),
  'sessions/saveSandbox': defineMethod('sessions/saveSandbox', {
    description:
      "Saves a sandbox's workspace as a session revision: snapshotted in place from a local sandbox's directory " +
      '(else copied out through the gateway, except the files whose digest, computed in the sandbox, matches the revision ' +
      'it was opened from or last saved as when this server has that revision indexed: those are taken from it) under ' +
      'the V1 policy (exclusions listed; a secret file refuses the save, ' +
      'named), packed and published, then `r1` of a new ' +
      'session (no `expectedRevision`) or a compare-and-set commit on `expectedRevision` (`revision_conflict` if the ' +
      'head moved). `commitId` makes a retry return the same revision.',
    params: withProgressToken(
      z.object({
        sandbox: SandboxRefSchema,
        sessionId: IdentifierSchema,
        expectedRevision: RevisionSchema.optional(),
        agentId: IdentifierSchema.optional(),
        commitId: IdentifierSchema.optional(),
      }),
    ),
    result: z.object({
      revision: CommittedSessionRevisionSchema,
      bundle: z.object({ digest: Sha256DigestSchema, bytes: z.number().int(), entryCount: z.number().int() }),
      workspace: WorkspaceSnapshotReportSchema,
    }),
    progress: true,
    example: {
      params: { sandbox: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, sessionId: 'demo' },
      result: {
        revision: {
          ref: { sessionId: 'demo', revision: 'r1' },
          agentId: 'sandbox-sessions',
          checkpoint: EXAMPLE_CHECKPOINT,
        },
        bundle: { digest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1', bytes: 676, entryCount: 8 },
        workspace: {
          policyVersion: 1,
          includedEntries: 3,
          excludedEntries: [],
          excludedEntriesByCategory: { source_control: 0, dependency_tree: 0, cache: 0, log: 0, runtime_scratch: 0 },
          payloadBytes: 21,
        },
      },
    },
  }),
  'sessions/import': defineMethod('sessions/import', {
    description:
      'Imports a Session Bundle file (from Export Revision elsewhere, or Maka) as a revision of the session its ' +
      'manifest names — a bundle is bound to its session. Every byte is checked first (as `bundles/inspect`), then it ' +
      'is published and becomes `r1` of that session (no `expectedRevision`) or a compare-and-set commit on ' +
      '`expectedRevision` (`revision_conflict` if the head moved).',
    params: withProgressToken(z.object({ path: z.string().min(1), expectedRevision: RevisionSchema.optional(), agentId: IdentifierSchema.optional() })),
    result: z.object({
      revision: CommittedSessionRevisionSchema,
      bundle: z.object({ digest: Sha256DigestSchema, bytes: z.number().int(), entryCount: z.number().int() }),
    }),
    progress: true,
    example: {
      params: { path: '/home/me/demo-r3.tar.zst', expectedRevision: 'r3' },
      result: {
        revision: { ref: { sessionId: 'demo', revision: 'r4' }, agentId: 'sandbox-sessions', checkpoint: EXAMPLE_CHECKPOINT },
        bundle: { digest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1', bytes: 676, entryCount: 8 },
      },
    },
  }),
  'sessions/compareSandbox': defineMethod('sessions/compareSandbox', {
    description:
      "What a sandbox's workspace changed since a retained revision: the workspace is captured as `sessions/saveSandbox` " +
      "would capture it (same policy, nothing committed) and its files compared with the revision's `workspace/`, by " +
      'size and mode, then byte for byte — for a sandbox without a directory on this machine, by the SHA-256 computed in ' +
      'the sandbox (nothing is copied out but symbolic links, or everything of that size when the image has no ' +
      '`sha256sum`). Exactly what a save on that revision would change.',
    params: withProgressToken(z.object({ sandbox: SandboxRefSchema, sessionId: IdentifierSchema, revision: RevisionSchema })),
    result: WorkspaceChangesSchema,
    progress: true,
    example: {
      params: { sandbox: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-q4m8z' }, sessionId: 'demo', revision: 'r1' },
      result: {
        against: { sessionId: 'demo', revision: 'r1' },
        changes: [
          { path: 'README.md', status: 'modified' },
          { path: 'src/new.ts', status: 'added' },
        ],
        total: 2,
        unchanged: 1,
        workspace: {
          policyVersion: 1,
          includedEntries: 5,
          excludedEntries: [{ path: 'node_modules/', category: 'dependency_tree' }],
          excludedEntriesByCategory: { source_control: 0, dependency_tree: 1, cache: 0, log: 0, runtime_scratch: 0 },
          payloadBytes: 48,
        },
      },
    },
  }),
  'sessions/openInSandbox': defineMethod('sessions/openInSandbox', {
    description: 'Opens a retained revision (default: the head) in a new sandbox: checkout (verified), hydrate, create, upload the workspace.',
    params: withProgressToken(z.object({ sessionId: IdentifierSchema, revision: RevisionSchema.optional(), sandbox: SandboxCreateSpecSchema })),
    result: z.object({ sandbox: SandboxSummarySchema, revision: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema }) }),
    progress: true,
    example: {
      params: { sessionId: 'demo', revision: 'r1', sandbox: { provider: 'local', namespace: 'default', runtime: 'process' } },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-q4m8z' },
          key: 'local.local.default.sbx-q4m8z',
          runtime: 'process',
          phase: 'Ready',
        },
        revision: { sessionId: 'demo', revision: 'r1' },
      },
    },
  }),
} as const;
