// Who owns a lock: a pid alone is reused, so an owner is (host, boot id, pid, process start time).
// Another process can then tell a live owner from a dead one (SIGKILL leaves no chance to clean up)
// without native add-ons: /proc on Linux, a signal-0 probe elsewhere.
import fs from 'node:fs';
import os from 'node:os';

export interface ProcessIdentity {
  host: string;
  bootId: string;
  pid: number;
  startTime: string;
}

let cachedBootId: string | undefined;

function bootId(): string {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      cachedBootId = 'unknown';
    }
  }
  return cachedBootId;
}

/** Start time of `pid` in clock ticks since boot (Linux); undefined when gone or a zombie. */
function startTimeOf(pid: number): string | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Field 2 (comm) may hold spaces and parentheses: split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  if (rest[0] === 'Z') return undefined;
  return rest[19];
}

export function currentProcessIdentity(): ProcessIdentity {
  return { host: os.hostname(), bootId: bootId(), pid: process.pid, startTime: startTimeOf(process.pid) ?? 'unknown' };
}

/**
 * 'dead' only when we can prove it; 'unknown' for an owner on another host (a shared file system):
 * such a lock is never broken automatically.
 */
export function ownerLiveness(owner: ProcessIdentity): 'alive' | 'dead' | 'unknown' {
  if (owner.host !== os.hostname()) return 'unknown';
  const boot = bootId();
  if (owner.bootId !== 'unknown' && boot !== 'unknown' && owner.bootId !== boot) return 'dead';
  if (owner.startTime !== 'unknown' && fs.existsSync('/proc/self/stat')) {
    return startTimeOf(owner.pid) === owner.startTime ? 'alive' : 'dead';
  }
  try {
    process.kill(owner.pid, 0);
    return 'alive';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH' ? 'dead' : 'alive';
  }
}
