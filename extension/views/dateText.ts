// One way to show a point in time everywhere in the views and messages: the local date and time to
// the minute, `2026-12-01 16:05` (the same in every locale, sortable), and for a recent time also
// how long ago it was. No vscode import: it is plain formatting.

const pad = (n: number) => String(n).padStart(2, '0');

/** `YYYY-MM-DD HH:MM` in local time, or the input unchanged when it is not a time. */
export function formatTime(time: string | number | Date): string {
  const d = time instanceof Date ? time : new Date(time);
  if (Number.isNaN(d.getTime())) return String(time);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** How long ago, in words (`just now`, `5 min ago`, `3 h ago`, `4 days ago`). */
export function timeAgo(time: string | number | Date, now: number = Date.now()): string | undefined {
  const ms = now - new Date(time).getTime();
  if (!Number.isFinite(ms)) return undefined;
  const m = Math.floor(ms / 60_000);
  if (m < 1) return 'just now';
  if (m < 60) return `${m} min ago`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h} h ago` : `${Math.floor(h / 24)} days ago`;
}

/** `2026-12-01 16:05 (5 min ago)`: the time, and how long ago it was. */
export function formatTimeAndAge(time: string | number | Date, now: number = Date.now()): string {
  const ago = timeAgo(time, now);
  return ago ? `${formatTime(time)} (${ago})` : formatTime(time);
}
