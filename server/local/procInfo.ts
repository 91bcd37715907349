// Process groups on this machine: who is in a group, how to signal all of it, and how to wait
// until nothing of it is left. Process identity itself (boot id, start time, liveness) lives in
// server/platform/processIdentity.ts.
import fs from 'node:fs';
import { HAS_PROC, readProcStat } from '../platform/processIdentity';

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

/**
 * How long, after SIGKILL, a group may take to disappear before it counts as lost. The kernel
 * normally needs milliseconds (a pid namespace's init a little longer: it first reaps its
 * namespace); only a process stuck in the kernel (uninterruptible I/O) outlasts this.
 */
export const GROUP_EXIT_BOUND_MS = 5000;

/**
 * The pids of a group that still run. A zombie runs nothing and counts as gone (a reparented
 * zombie may never be reaped when pid 1 does not reap). Without /proc, a group that still
 * answers a signal-0 probe is reported as [pgid].
 */
export function liveGroupMembers(pgid: number): number[] {
  if (!Number.isInteger(pgid) || pgid <= 1) return [];
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return []; // not even a zombie left
  }
  return HAS_PROC ? processGroupMembers(pgid) : [pgid];
}

/**
 * SIGKILLs a group and resolves once none of its processes runs any more (observed, not
 * assumed: SIGKILL is delivered asynchronously), or after `boundMs` with the pids still
 * running — an empty array means the group is gone. The signal is repeated on every poll.
 * Under bubblewrap the group holds the pid namespace's init, which stays a live process until
 * every process of its namespace (even one that called setsid) is gone; so an empty group
 * means an empty namespace.
 */
export async function killGroupAndWait(pgid: number, boundMs = GROUP_EXIT_BOUND_MS): Promise<number[]> {
  const deadline = Date.now() + boundMs;
  let delay = 1;
  for (;;) {
    const left = liveGroupMembers(pgid);
    if (left.length === 0) return [];
    const now = Date.now();
    if (now >= deadline) return left;
    signalGroup(pgid, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, Math.min(delay, deadline - now)));
    delay = Math.min(delay * 2, 50);
  }
}
