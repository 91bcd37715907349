// When the idle warning (idleWarning.ts) is due: within the last quarter of the idle timeout, at most the last 5
// minutes. Apart from the notification so that it can be tested without VS Code.

/** How long before an idle stop the warning comes. */
export function idleWarningLeadMs(idleTimeoutSeconds: number): number {
  return Math.min(5 * 60_000, (idleTimeoutSeconds * 1000) / 4);
}

/** The time left before the idle stop when a warning is due now, else undefined. */
export function idleWarningDue(idleTimeoutSeconds: number, lastActivityMs: number, nowMs: number): number | undefined {
  const left = lastActivityMs + idleTimeoutSeconds * 1000 - nowMs;
  return left > 0 && left <= idleWarningLeadMs(idleTimeoutSeconds) ? left : undefined;
}
