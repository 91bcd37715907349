// Process groups on this machine: who is in a group and how to signal all of it. Process
// identity itself (boot id, start time, liveness) lives in server/platform/processIdentity.ts.
import fs from 'node:fs';
import { readProcStat } from '../platform/processIdentity';

/** Live (non-zombie) pids of a process group, found through /proc. */
export function processGroupMembers(pgid: number): number[] {
  let names: string[];
  try {
    names = fs.readdirSync('/proc');
  } catch {
    return [];
  }
  const members: number[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(Number(name));
    if (stat && stat.pgid === pgid && stat.state !== 'Z') members.push(Number(name));
  }
  return members;
}

/** Sends a signal to a whole process group; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  if (!Number.isInteger(pgid) || pgid <= 1) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}
