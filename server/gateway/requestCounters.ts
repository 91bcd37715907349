// Counts the Runtime access API requests each Run has served since the daemon started, by kind.
// A diagnostic the local gateway offers (`GET …/runs/{name}/requests`): it shows whether a client
// (the editor's file system, say) makes a stat storm, and tests assert on it.
import type { AccessRoute } from './accessApi';
import { byCodeUnits } from '../platform/codeUnitOrder';

export type AccessRequestKind = AccessRoute['kind'];

export class AccessRequestCounters {
  private readonly byRun = new Map<string, Map<AccessRequestKind, number>>();

  record(uid: string, kind: AccessRequestKind): void {
    let counts = this.byRun.get(uid);
    if (!counts) this.byRun.set(uid, (counts = new Map()));
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }

  /** Requests served for one Run, by kind (kinds never used are absent). */
  get(uid: string): Record<string, number> {
    return Object.fromEntries([...(this.byRun.get(uid) ?? new Map<AccessRequestKind, number>())].sort(([a], [b]) => byCodeUnits(a, b)));
  }

  forget(uid: string): void {
    this.byRun.delete(uid);
  }
}
