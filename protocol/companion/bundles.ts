// Packing, inspecting and hydrating Session Bundle files (`bundles/*`): one feature of the method table in
// index.ts; the bundle schemas are in protocol/bundle.ts.
import { z } from 'zod';
import {
  SessionBundleArtifactSchema,
  SessionBundleHydrationSchema,
  SessionBundleInspectionSchema,
  Sha256DigestSchema,
  WorkspaceSnapshotReportSchema,
} from '../bundle';
import { IdentifierSchema } from '../repository';
import { defineMethod, withProgressToken } from './contract';

export const bundleMethods = {
  'bundles/pack': defineMethod('bundles/pack', {
    description:
      'Packs a state directory and a workspace into a Session Bundle (Maka bundle v1). The workspace is snapshotted ' +
      'first under the V1 policy: `.git`, `node_modules`, caches and logs are left out and listed; a known secret file ' +
      'refuses the pack (`policy_rejected`, naming the file). The destination must not exist. Cancellable; a cancelled ' +
      'pack leaves no temp files and publishes nothing.',
    params: withProgressToken(
      z.object({
        stateRoot: z.string().min(1),
        workspaceRoot: z.string().min(1),
        destination: z.string().min(1),
        sessionId: IdentifierSchema,
        lastCommittedActivationId: IdentifierSchema.optional(),
      }),
    ),
    result: z.object({ artifact: SessionBundleArtifactSchema, workspace: WorkspaceSnapshotReportSchema }),
    progress: true,
    example: {
      params: { stateRoot: '/home/me/s/state', workspaceRoot: '/home/me/s/workspace', destination: '/home/me/s.tar.zst', sessionId: 'cloud-session-1' },
      result: {
        artifact: {
          path: '/home/me/s.tar.zst',
          archiveDigest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
          compressedBytes: 676,
          decompressedTarBytes: 8704,
          payloadBytes: 71,
          entryCount: 8,
        },
        workspace: {
          policyVersion: 1,
          includedEntries: 3,
          excludedEntries: [{ path: 'node_modules', category: 'dependency_tree' }],
          excludedEntriesByCategory: { source_control: 0, dependency_tree: 1, cache: 0, log: 0, runtime_scratch: 0 },
          payloadBytes: 21,
        },
      },
    },
  }),
  'bundles/inspect': defineMethod('bundles/inspect', {
    description: 'Reads and checks every byte of a bundle; returns its manifest and counts, or the codec error code that rejects it.',
    params: withProgressToken(z.object({ path: z.string().min(1), expectedArchiveDigest: Sha256DigestSchema.optional() })),
    result: SessionBundleInspectionSchema,
    progress: true,
    example: {
      params: { path: '/home/me/s.tar.zst' },
      result: {
        manifest: {
          schemaVersion: 1,
          codec: { name: 'maka-session-bundle', version: 1, canonicalizationVersion: 1, archive: 'ustar', compression: 'zstd', compressionLevel: 3 },
          envelope: { sessionId: 'cloud-session-1', lastCommittedActivationId: 'activation-9' },
          stateIdentity: { path: 'state-identity.json', mediaType: 'application/vnd.maka.session-state-identity+json;version=1' },
          payload: { statePath: 'state/', workspacePath: 'workspace/', treeDigest: 'sha256:f6811d6c3a99eeaaa4ab4f7e7a0f34c9a385ddc2c02b4f11fae56debde0e6d20', payloadBytes: 71, entryCount: 8 },
        },
        archiveDigest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
        compressedBytes: 676,
        decompressedTarBytes: 8704,
        payloadBytes: 71,
        entryCount: 8,
      },
    },
  }),
  'bundles/hydrate': defineMethod('bundles/hydrate', {
    description:
      'Unpacks a bundle into a destination that must not exist (through a private staging directory and one atomic ' +
      "rename), after checking it belongs to `sessionId`.",
    params: withProgressToken(z.object({ path: z.string().min(1), sessionId: IdentifierSchema, destination: z.string().min(1) })),
    result: SessionBundleHydrationSchema,
    progress: true,
    example: {
      params: { path: '/home/me/s.tar.zst', sessionId: 'cloud-session-1', destination: '/home/me/restored' },
      result: {
        manifest: {
          schemaVersion: 1,
          codec: { name: 'maka-session-bundle', version: 1, canonicalizationVersion: 1, archive: 'ustar', compression: 'zstd', compressionLevel: 3 },
          envelope: { sessionId: 'cloud-session-1' },
          stateIdentity: { path: 'state-identity.json', mediaType: 'application/vnd.maka.session-state-identity+json;version=1' },
          payload: { statePath: 'state/', workspacePath: 'workspace/', treeDigest: 'sha256:f6811d6c3a99eeaaa4ab4f7e7a0f34c9a385ddc2c02b4f11fae56debde0e6d20', payloadBytes: 71, entryCount: 8 },
        },
        archiveDigest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
        compressedBytes: 676,
        decompressedTarBytes: 8704,
        payloadBytes: 71,
        entryCount: 8,
        destinationRoot: '/home/me/restored',
        stateRoot: '/home/me/restored/state',
        workspaceRoot: '/home/me/restored/workspace',
      },
    },
  }),
} as const;
