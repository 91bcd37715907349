// What a local Run has on disk before it is Ready: its workspace (the session root is `repo/`
// below it when the Run has a Git source), its artifacts directory and temp directory, an inline
// script, a cloned source, and its artifact inputs copied out of the artifact store (confined to it).
// Idempotent, so recovery after a restart can run it again.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Run } from '../../protocol/kruntimes/run';
import { LocalSession } from './localSession';
import type { StateLayout } from './stateRoot';
import { cleanRelative } from './workspacePaths';

/** The directory commands of the Run start in. */
export function sessionRoot(layout: StateLayout, run: Run): string {
  const ws = layout.workspaceDir(run.metadata.uid as string);
  return run.spec.source?.repoURL ? path.join(ws, 'repo') : ws;
}

/** Workspace, artifacts dir, source and artifact inputs, before Ready. */
export async function prepareWorkspace(layout: StateLayout, run: Run): Promise<void> {
  const uid = run.metadata.uid as string;
  const ws = layout.workspaceDir(uid);
  await fs.mkdir(ws, { recursive: true, mode: 0o755 });
  await fs.mkdir(layout.artifactsDir(uid), { recursive: true, mode: 0o755 });
  await fs.mkdir(LocalSession.tmpDirFor(layout.runDir(uid)), { recursive: true, mode: 0o700 });
  const source = run.spec.source;
  if (source?.inline !== undefined) {
    if (Buffer.byteLength(source.inline) > 256 * 1024) throw new Error('source.inline exceeds 256 KiB');
    await fs.writeFile(path.join(ws, 'script'), source.inline, { mode: 0o755 });
  }
  if (source?.repoURL) {
    const repo = path.join(ws, 'repo');
    const exists = await fs.stat(path.join(repo, '.git')).then(() => true, () => false);
    if (!exists) {
      await git(['clone', '--quiet', '--', source.repoURL, repo], ws);
      if (source.commitSHA) await git(['checkout', '--quiet', '--detach', source.commitSHA], repo);
    }
  }
  for (const input of run.spec.artifactInputs ?? []) {
    const rel = cleanRelative(input.path, { allowRoot: false });
    const loc = input.ref.location;
    if (!('filesystem' in loc)) throw new Error(`open artifact input ${input.ref.name}: the local runtime reads filesystem artifacts only`);
    const src = path.resolve(layout.artifactStoreRoot, loc.filesystem.path);
    if (!src.startsWith(layout.artifactStoreRoot + path.sep)) throw new Error(`open artifact input ${input.ref.name}: location is outside the artifact store`);
    const dest = path.join(sessionRoot(layout, run), rel);
    await fs.mkdir(path.dirname(dest), { recursive: true });
    await fs.copyFile(src, dest).catch((err: unknown) => {
      throw new Error(`open artifact input ${input.ref.name}: ${(err as Error).message}`);
    });
  }
}

function git(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, timeout: 120_000, env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } }, (err, _out, stderr) => {
      if (err) reject(new Error(`git ${args[0]}: ${String(stderr).trim() || err.message}`));
      else resolve();
    });
  });
}
