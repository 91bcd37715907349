// Hydration staging with an ownership record (spec §8 steps 4 and 7): a private directory beside the destination,
// bound to an O_EXCL owner file by inode (anchor hard link, then a binding line), so that cleanup after a crash
// removes exactly the staging a hydrate created — never a decoy, a symlink or a directory someone swapped in.
import { randomUUID } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { SessionBundleError } from './errors';
import { errnoOf, fsyncDirectory, lstatOrUndefined, sameInode, writeFully } from './fsx';

export const ANCHOR_NAME = '.maka-session-bundle-owner';
const MAX_RECORD_BYTES = 2048;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

export interface HydrationStaging {
  parent: string;
  stagingPath: string;
  ownerPath: string;
  dev: bigint;
  ino: bigint;
}

export function stagingName(destinationName: string, token: string): string {
  return `.${destinationName}.maka-session-bundle-staging-${token}`;
}

function ownerLine(destinationName: string, token: string): string {
  return `${JSON.stringify({ schemaVersion: 1, kind: 'maka-session-bundle-hydration-staging', destinationName, stagingName: stagingName(destinationName, token), token })}\n`;
}

function bindingLine(dev: bigint, ino: bigint): string {
  return `${JSON.stringify({ schemaVersion: 1, kind: 'maka-session-bundle-hydration-staging-binding', stagingDev: dev.toString(), stagingIno: ino.toString() })}\n`;
}

async function appendDurably(path: string, text: string, flags: number): Promise<void> {
  const handle = await fsp.open(path, flags | constants.O_NOFOLLOW, 0o600);
  try {
    await writeFully(handle, Buffer.from(text, 'utf8'));
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Reserve staging for `parent/destinationName`: owner record, 0700 directory, anchor, binding, anchor removed.
 * If any step fails, what this call created is removed again before the error is thrown.
 */
export async function createHydrationStaging(parent: string, destinationName: string): Promise<HydrationStaging> {
  const token = randomUUID();
  const ownerPath = join(parent, `${stagingName(destinationName, token)}.owner.json`);
  const stagingPath = join(parent, stagingName(destinationName, token));
  await appendDurably(ownerPath, ownerLine(destinationName, token), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL);
  let createdDirectory = false;
  try {
    await fsyncDirectory(parent);
    await fsp.mkdir(stagingPath, { mode: 0o700 });
    createdDirectory = true;
    await fsp.chmod(stagingPath, 0o700);
    const [st, parentStat] = await Promise.all([fsp.lstat(stagingPath, { bigint: true }), fsp.stat(parent, { bigint: true })]);
    if (st.dev !== parentStat.dev) throw new SessionBundleError('io_failure', 'staging is not on the same device as the destination parent');
    const anchor = join(stagingPath, ANCHOR_NAME);
    await fsp.link(ownerPath, anchor);
    await fsyncDirectory(stagingPath);
    await fsyncDirectory(parent);
    await appendDurably(ownerPath, bindingLine(st.dev, st.ino), constants.O_WRONLY | constants.O_APPEND);
    await fsp.unlink(anchor);
    const owner = await fsp.lstat(ownerPath, { bigint: true });
    if (owner.nlink !== 1n) throw new SessionBundleError('io_failure', 'the staging ownership record has unexpected links');
    await fsyncDirectory(stagingPath);
    return { parent, stagingPath, ownerPath, dev: st.dev, ino: st.ino };
  } catch (err) {
    if (createdDirectory) await removeTree(stagingPath).catch(() => undefined);
    await fsp.unlink(ownerPath).catch(() => undefined);
    throw err;
  }
}

async function removeTree(path: string): Promise<void> {
  await fsp.rm(path, { recursive: true, force: true });
}

/** Quarantine (rename to `.cleanup`) then delete a staging directory this process owns, then its record. */
export async function discardHydrationStaging(staging: HydrationStaging): Promise<void> {
  const quarantine = `${staging.stagingPath}.cleanup`;
  const st = await lstatOrUndefined(staging.stagingPath);
  if (st !== undefined && st.isDirectory() && sameInode(st, staging)) {
    await fsp.rename(staging.stagingPath, quarantine);
  }
  const q = await lstatOrUndefined(quarantine);
  if (q !== undefined && q.isDirectory() && sameInode(q, staging)) await removeTree(quarantine);
  await fsp.unlink(staging.ownerPath).catch((err: unknown) => {
    if (errnoOf(err) !== 'ENOENT') throw err;
  });
  await fsyncDirectory(staging.parent);
}

interface OwnerRecord {
  token: string;
  binding?: { dev: bigint; ino: bigint };
  recordStat: { dev: bigint; ino: bigint };
}

/** Authenticate one owner record by its exact canonical lines; undefined when it is not one of ours. */
async function readOwnerRecord(parent: string, destinationName: string, fileName: string): Promise<OwnerRecord | undefined> {
  const prefix = `${stagingName(destinationName, '')}`;
  if (!fileName.startsWith(prefix) || !fileName.endsWith('.owner.json')) return undefined;
  const token = fileName.slice(prefix.length, -'.owner.json'.length);
  if (!UUID_V4.test(token)) return undefined;
  const path = join(parent, fileName);
  const st = await lstatOrUndefined(path);
  if (st === undefined || !st.isFile() || st.size > BigInt(MAX_RECORD_BYTES) || st.nlink < 1n || st.nlink > 2n) return undefined;
  const text = await fsp.readFile(path, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const line1 = ownerLine(destinationName, token);
  if (!text.startsWith(line1)) return undefined;
  const rest = text.slice(line1.length);
  const record: OwnerRecord = { token, recordStat: st };
  if (rest === '') return record;
  const match = /^\{"schemaVersion":1,"kind":"maka-session-bundle-hydration-staging-binding","stagingDev":"(\d+)","stagingIno":"(\d+)"\}\n$/.exec(rest);
  if (match !== null) {
    const dev = BigInt(match[1] ?? '0');
    const ino = BigInt(match[2] ?? '0');
    if (rest === bindingLine(dev, ino)) record.binding = { dev, ino };
    else return undefined;
  } else if (rest.includes('\n')) {
    return undefined; // a complete but foreign second line
  }
  return record; // a torn binding line: authenticate through the anchor
}

async function isOwnedDirectory(path: string, record: OwnerRecord): Promise<boolean | undefined> {
  const st = await lstatOrUndefined(path);
  if (st === undefined) return undefined;
  if (!st.isDirectory()) return false;
  if (record.binding !== undefined) return sameInode(st, record.binding);
  const anchor = await lstatOrUndefined(join(path, ANCHOR_NAME));
  return anchor !== undefined && anchor.isFile() && sameInode(anchor, record.recordStat);
}

/** Remove every authenticated orphan staging of `parent/destinationName`. Caller holds the destination lock. */
export async function cleanupStagingFor(parent: string, destinationName: string): Promise<{ removedStagingDirectories: number; removedOwnershipRecords: number }> {
  let removedStagingDirectories = 0;
  let removedOwnershipRecords = 0;
  for (const fileName of await fsp.readdir(parent)) {
    const record = await readOwnerRecord(parent, destinationName, fileName);
    if (record === undefined) continue;
    const stagingPath = join(parent, stagingName(destinationName, record.token));
    const quarantine = `${stagingPath}.cleanup`;
    const staging = await isOwnedDirectory(stagingPath, record);
    if (staging === false) continue; // something else sits at the staging name: touch nothing
    if (staging === true) {
      if ((await lstatOrUndefined(quarantine)) !== undefined) continue;
      await fsp.rename(stagingPath, quarantine);
    }
    const quarantined = await isOwnedDirectory(quarantine, record);
    if (quarantined === false) continue;
    if (quarantined === true) {
      await removeTree(quarantine);
      removedStagingDirectories += 1;
    }
    await fsp.unlink(join(parent, fileName));
    removedOwnershipRecords += 1;
  }
  if (removedOwnershipRecords > 0) await fsyncDirectory(parent);
  return { removedStagingDirectories, removedOwnershipRecords };
}
