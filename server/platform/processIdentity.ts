// Process identity on this machine. A pid alone is reused, so every record that names a process
// (a running command, a daemon, a lock owner) names it by (host, boot id, pid, start time). Any
// process can then tell a live owner from a dead one — SIGKILL leaves no chance to clean up —
// without native add-ons: /proc on Linux, a signal-0 probe elsewhere. One implementation, shared
// by the local runtime, the gateway daemon, the bundle codec's locks and the repository's locks.
import fs from 'node:fs';
import os from 'node:os';

/** Whether /proc describes processes here (Linux); elsewhere identity checks degrade to liveness. */
export const HAS_PROC = fs.existsSync('/proc/self/stat');

let cachedBootId: string | undefined;

/** The kernel boot id (Linux); "unknown" elsewhere, which disables cross-boot checks. */
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

export interface ProcStat {
  state: string;
  /** Field 4: the parent's pid. */
  ppid: number;
  pgid: number;
  /** Field 6: the session id. */
  sid: number;
  /** Field 8: the foreground process group of the process's controlling terminal (-1 without one). */
  tpgid: number;
  /** Field 22: start time in clock ticks since boot. */
  startTicks: string;
}

/** Fields of /proc/<pid>/stat, or undefined when the process (or /proc) is not there. */
export function readProcStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Field 2 (comm) may contain spaces and parentheses: split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); rest[1] field 4 (ppid); rest[2] field 5 (pgrp); rest[3] field 6 (session); rest[5]
  // field 8 (tpgid); rest[19] field 22 (starttime).
  return { state: rest[0] ?? '', ppid: Number(rest[1]), pgid: Number(rest[2]), sid: Number(rest[3]), tpgid: Number(rest[5]), startTicks: rest[19] ?? '' };
}

/**
 * The start time of a live (non-zombie) process as a string; undefined when it is gone. Without
 * /proc (macOS) a live process answers "unknown": a reused pid cannot be told apart there.
 */
export function processStartTime(pid: number): string | undefined {
  if (!HAS_PROC) {
    try {
      process.kill(pid, 0);
      return 'unknown';
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM' ? 'unknown' : undefined;
    }
  }
  const stat = readProcStat(pid);
  if (!stat || stat.state === 'Z') return undefined;
  return stat.startTicks;
}

/** True when `pid` is alive and is still the process that started at `startTime` in boot `boot`. */
export function isSameProcessAlive(pid: number, startTime: string, boot: string): boolean {
  if (boot !== bootId()) return false;
  return processStartTime(pid) === startTime;
}

export interface ProcessIdentity {
  host: string;
  bootId: string;
  pid: number;
  startTime: string;
}

export function currentProcessIdentity(): ProcessIdentity {
  return { host: os.hostname(), bootId: bootId(), pid: process.pid, startTime: processStartTime(process.pid) ?? 'unknown' };
}

/**
 * 'dead' only when it can be proven; 'unknown' for an owner on another host (a shared file
 * system), whose lock is never broken automatically.
 */
export function ownerLiveness(owner: ProcessIdentity): 'alive' | 'dead' | 'unknown' {
  if (owner.host !== os.hostname()) return 'unknown';
  const boot = bootId();
  if (owner.bootId !== 'unknown' && boot !== 'unknown' && owner.bootId !== boot) return 'dead';
  if (owner.startTime !== 'unknown' && HAS_PROC) {
    return processStartTime(owner.pid) === owner.startTime ? 'alive' : 'dead';
  }
  try {
    process.kill(owner.pid, 0);
    return 'alive';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH' ? 'dead' : 'alive';
  }
}
