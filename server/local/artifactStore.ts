// The local artifact store: exported artifacts live under `<state>/artifacts/` at the
// kruntimes filesystem-driver location `namespaces/<ns>/runs/<uid>/<name>`. This resolves a
// ref to its file (refusing locations outside the store) and verifies its sha256 digest.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { ArtifactRef } from '../../protocol/kruntimes/run';
import { SandboxSessionsError } from '../../protocol/errors';

export class ArtifactStoreError extends SandboxSessionsError<'artifact_not_local' | 'artifact_outside_store'> {
  override readonly name = 'ArtifactStoreError';
  readonly service = 'artifact';
}

export function artifactFile(storeRoot: string, ref: ArtifactRef): string {
  if (!('filesystem' in ref.location)) throw new ArtifactStoreError('artifact_not_local', `artifact ${ref.name} is not in a filesystem store`);
  const file = path.resolve(storeRoot, ref.location.filesystem.path);
  if (!file.startsWith(path.resolve(storeRoot) + path.sep)) {
    throw new ArtifactStoreError('artifact_outside_store', `artifact ${ref.name} points outside the store ${storeRoot}`);
  }
  return file;
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

export interface VerifiedArtifact {
  name: string;
  file: string;
  digest: string;
  ok: boolean;
  actual?: string;
}

export async function verifyArtifact(storeRoot: string, ref: ArtifactRef): Promise<VerifiedArtifact> {
  const file = artifactFile(storeRoot, ref);
  const actual = await sha256File(file).catch(() => undefined);
  return { name: ref.name, file, digest: ref.digest, ok: actual === ref.digest, ...(actual ? { actual } : {}) };
}
