// Reading a local sandbox's files through the companion server (`sandboxes/files/*`): one feature of the method
// table in index.ts. A sandbox's gateway refuses every call while it is Finalizing (Drain requested, artifacts
// being exported), as upstream kruntimes does; a local sandbox's workspace is a directory of the companion's
// machine, so its files can still be read there. The window keeps using the gateway while a sandbox is Ready.
import { z } from 'zod';
import { SandboxRefSchema } from '../sandboxes';
import { defineMethod, defineNotification } from './contract';

/** Bytes per `sandboxes/files/read` call: the gateway's own read bound (GatewayLimits.maxReadBytes). */
export const SANDBOX_FILES_MAX_READ_BYTES = 786_000;
/** Entries per `sandboxes/files/list` page. */
export const SANDBOX_FILES_MAX_LIST_LIMIT = 10_000;

/**
 * The `cause` (JSON-RPC `error.data.cause`, with `data.code` `not_ready`) when the sandbox's files are not readable
 * through the companion: it is not a local sandbox with its workspace on this machine, or it is neither Ready nor
 * Finalizing.
 */
export const SANDBOX_FILES_UNREADABLE = 'sandbox_files_unreadable';

/** Folders one `sandboxes/files/watch` may watch (each is one inotify watch of the user's limit). */
export const SANDBOX_FILES_MAX_WATCHED_FOLDERS = 512;

/** A workspace-relative path: `""` is the workspace root; no leading `/`, no `..`. */
const WorkspacePathSchema = z.string().max(4096);

export const SandboxFileTypeSchema = z.enum(['file', 'directory', 'symlink', 'other']);
export type SandboxFileType = z.infer<typeof SandboxFileTypeSchema>;

export const SandboxFileEntrySchema = z.object({
  /** The bare child name. */
  name: z.string(),
  /** What the entry itself is (a symbolic link is not followed here; `stat` follows one that stays inside). */
  type: SandboxFileTypeSchema,
  sizeBytes: z.number().int().min(0),
  mtimeMs: z.number().min(0),
});
export type SandboxFileEntry = z.infer<typeof SandboxFileEntrySchema>;

export const SandboxFileStatSchema = z.object({
  type: z.enum(['file', 'directory', 'other']),
  sizeBytes: z.number().int().min(0),
  mtimeMs: z.number().min(0),
});

const example = { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } } as const;

const CONFINEMENT =
  'Paths are workspace-relative (`""` is the root); an absolute path or one with `..` is `invalid_params`, and a ' +
  'symbolic link is followed only while it stays inside the workspace (one leading out is `invalid_params`; nothing ' +
  'outside is read). Only a local sandbox whose workspace is on this machine, while Ready or Finalizing; any other ' +
  "(a kruntimes or OpenSandbox sandbox, or one that has ended) is `not_ready` with cause `sandbox_files_unreadable` " +
  "— a closing one's files cannot be read until it finishes (then download its artifacts).";

export const fileMethods = {
  'sandboxes/files/stat': defineMethod('sandboxes/files/stat', {
    description: `What one path of a sandbox's workspace is, read in place by the companion. ${CONFINEMENT}`,
    params: z.object({ ref: SandboxRefSchema, path: WorkspacePathSchema }),
    result: SandboxFileStatSchema,
    example: {
      params: { ...example, path: 'src/main.ts' },
      result: { type: 'file', sizeBytes: 812, mtimeMs: 1767225600000 },
    },
  }),
  'sandboxes/files/list': defineMethod('sandboxes/files/list', {
    description:
      "One page of a folder's direct children in a sandbox's workspace, ordered byte-wise by name; pass " +
      '`nextPageToken` back as `pageToken` until it is `""`. ' +
      CONFINEMENT,
    params: z.object({
      ref: SandboxRefSchema,
      path: WorkspacePathSchema,
      limit: z.number().int().min(1).max(SANDBOX_FILES_MAX_LIST_LIMIT).default(SANDBOX_FILES_MAX_LIST_LIMIT),
      pageToken: z.string().max(4096).default(''),
    }),
    result: z.object({ entries: z.array(SandboxFileEntrySchema), nextPageToken: z.string() }),
    example: {
      params: { ...example, path: 'src' },
      result: {
        entries: [
          { name: 'lib', type: 'directory', sizeBytes: 4096, mtimeMs: 1767225600000 },
          { name: 'main.ts', type: 'file', sizeBytes: 812, mtimeMs: 1767225600000 },
        ],
        nextPageToken: '',
      },
    },
  }),
  'sandboxes/files/read': defineMethod('sandboxes/files/read', {
    description:
      `Bytes of one file of a sandbox's workspace (base64; at most ${SANDBOX_FILES_MAX_READ_BYTES.toLocaleString('en-US')} per call, ` +
      '`offset`/`length` for more; `truncated` when bytes follow). ' +
      CONFINEMENT,
    params: z.object({
      ref: SandboxRefSchema,
      path: WorkspacePathSchema.min(1),
      offset: z.number().int().min(0).default(0),
      length: z.number().int().min(1).max(SANDBOX_FILES_MAX_READ_BYTES).default(SANDBOX_FILES_MAX_READ_BYTES),
    }),
    result: z.object({ contents: z.string(), size: z.number().int().min(0), truncated: z.boolean() }),
    example: {
      params: { ...example, path: 'README.md' },
      result: { contents: 'Zmlyc3QK', size: 6, truncated: false },
    },
  }),
  'sandboxes/files/watch': defineMethod('sandboxes/files/watch', {
    description:
      'Watches folders of a local sandbox\'s workspace (each one itself, not its subfolders) for changes anyone makes — ' +
      'also a process that outlived its command or runs on (a dev server, a build in the background) — and says which ' +
      'folders changed in `sandboxes/files/changed` notifications carrying `watchId`, a few a second at most. The ' +
      'request answers once the workspace is gone (the sandbox ended) or `$/cancelRequest` stops it; to watch other ' +
      'folders, cancel it and ask again. A folder that does not exist, is not a folder, or leads out of the workspace ' +
      'through a link is not watched (the rest are). ' +
      CONFINEMENT,
    params: z.object({
      ref: SandboxRefSchema,
      watchId: z.string().min(1).max(200),
      folders: z.array(WorkspacePathSchema).max(SANDBOX_FILES_MAX_WATCHED_FOLDERS),
    }),
    result: z.object({}),
    example: { params: { ...example, watchId: 'watch-1', folders: ['', 'src'] }, result: {} },
  }),
} as const;

export const fileNotifications = {
  'sandboxes/files/changed': defineNotification('sandboxes/files/changed', {
    description: 'Folders of a watched sandbox (`sandboxes/files/watch`) whose entries were created, changed or removed since the last notification.',
    params: z.object({ watchId: z.string(), folders: z.array(WorkspacePathSchema) }),
    example: { watchId: 'watch-1', folders: ['src'] },
  }),
} as const;
