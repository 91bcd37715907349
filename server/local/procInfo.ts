// Process identity on this machine: a pid alone is reused, so records name a process by
// (boot id, pid, start time). This is how a restarted daemon, or another process, tells a
// live command from a dead one before it signals anything.
import fs from 'node:fs';

/** Whether /proc describes processes here (Linux); elsewhere identity checks degrade to liveness. */
export const HAS_PROC = fs.existsSync('/proc/self/stat');

let cachedBootId: string | undefined;

/** The kernel boot id (Linux); a fixed "unknown" elsewhere, which disables cross-boot checks. */
export function bootId(): string {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      cachedBootId = 'unknown';
    }
  }
  return cachedBootId;
}

interface ProcStat {
  pgid: number;
  startTicks: string;
  state: string;
}

function readStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Field 2 (comm) may contain spaces and parentheses: split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); field 5 is pgrp; field 22 is starttime.
  const state = rest[0] ?? '';
  const pgid = Number(rest[2]);
  const startTicks = rest[19] ?? '';
  return { pgid, startTicks, state };
}

/** The start time of a process in clock ticks since boot, as a string; undefined when gone. */
export function processStartTime(pid: number): string | undefined {
  if (!HAS_PROC) {
    // No /proc (macOS): liveness only; a reused pid cannot be told apart there.
    try {
      process.kill(pid, 0);
      return 'unknown';
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM' ? 'unknown' : undefined;
    }
  }
  const stat = readStat(pid);
  if (!stat || stat.state === 'Z') return undefined;
  return stat.startTicks;
}


/** True when `pid` is alive and is still the process that started at `startTime`. */
export function isSameProcessAlive(pid: number, startTime: string, boot: string): boolean {
  if (boot !== bootId()) return false;
  return processStartTime(pid) === startTime;
}

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
    const stat = readStat(Number(name));
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
