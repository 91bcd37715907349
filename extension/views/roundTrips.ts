// How long the sandbox's gateway takes to answer, as the status bar shows it (vscode-ux-anchors §4.12, after Coder's
// latency indicator): the round trips of its periodic status check, the last few kept per sandbox; the median of
// them is shown in the tooltip always, and in the item itself (with a warning colour) once it is above the
// `sandboxSessions.latencyWarningMs` threshold — the explanation a slow Explorer or terminal needs. No VS Code API here.

/** Round trips kept per sandbox (about two minutes of the status bar's checks). */
export const KEPT_ROUND_TRIPS = 8;

export class RoundTrips {
  private readonly samples = new Map<string, number[]>();

  add(key: string, ms: number): void {
    const kept = this.samples.get(key) ?? [];
    kept.push(ms);
    if (kept.length > KEPT_ROUND_TRIPS) kept.shift();
    this.samples.set(key, kept);
  }

  /** The median of the kept round trips of a sandbox, and how many there are; undefined before the first. */
  of(key: string): { medianMs: number; count: number } | undefined {
    const kept = this.samples.get(key);
    if (!kept || kept.length === 0) return undefined;
    const sorted = [...kept].sort((a, b) => a - b);
    const mid = Math.floor(sorted.length / 2);
    const median = sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
    return { medianMs: Math.round(median), count: kept.length };
  }

  forget(key: string): void {
    this.samples.delete(key);
  }
}

/** What the status bar says of a sandbox's round trips: always a tooltip line, an item part only when slow (or asked). */
export function roundTripText(measured: { medianMs: number; count: number } | undefined, warningMs: number): { part?: string; tip: string; slow: boolean } {
  if (!measured) return { tip: 'Gateway round trip: not measured yet.', slow: false };
  // 0 shows the round trip always, as information (no warning).
  const slow = warningMs > 0 && measured.medianMs > warningMs;
  const tip =
    `Gateway round trip: ${measured.medianMs} ms (median of the last ${measured.count} status ${measured.count === 1 ? 'check' : 'checks'})` +
    (slow ? `, above ${warningMs} ms: files, listings and commands wait about that long each.` : '.');
  return { ...(slow || warningMs === 0 ? { part: `$(pulse) ${measured.medianMs} ms` } : {}), tip, slow };
}
