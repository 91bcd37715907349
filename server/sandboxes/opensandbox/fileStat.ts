// What OpenSandbox's execd reports for one path (files/info, directory listings), zod-parsed into the product's
// FileStat. Its own module so the stat shape and the decoding of execd's octal-digit mode stay one small piece,
// apart from the client's calls (opensandboxClient.ts re-exports the type).
import { z } from 'zod';

const FileInfoSchema = z.object({
  path: z.string(),
  type: z.string(),
  size: z.number().nonnegative(),
  mode: z.number().int().optional(),
  modifiedAt: z.date().optional(),
});
export interface FileStat {
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  /** Permission bits as a number (0o644), decoded from execd's octal digits (644). */
  mode: number | undefined;
  modifiedAt: Date | undefined;
}

export function toStat(raw: unknown): FileStat {
  const f = FileInfoSchema.parse(raw);
  const type = f.type === 'file' || f.type === 'directory' || f.type === 'symlink' ? f.type : 'other';
  return { path: f.path, type, size: f.size, mode: f.mode === undefined ? undefined : parseInt(String(f.mode), 8), modifiedAt: f.modifiedAt };
}
