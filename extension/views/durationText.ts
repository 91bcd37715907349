// Durations as the window writes them: a countdown in the status bar (`4:59`), a timeout in its tooltip (`1h30m`),
// and the time left in a notification's sentence (`4m 50s`). One place, so they agree.

/** A countdown: `m:ss`, or `h:mm:ss` from an hour. */
export function formatRemaining(ms: number): string {
  if (ms <= 0) return '0:00';
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${String(sec).padStart(2, '0')}` : `${m}:${String(sec).padStart(2, '0')}`;
}

/** Whole seconds as `45s`, `5m`, `1h30m`. */
export function formatSeconds(total: number): string {
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const out = `${h > 0 ? `${h}h` : ''}${m > 0 ? `${m}m` : ''}${s > 0 ? `${s}s` : ''}`;
  return out === '' ? '0s' : out;
}

/** `1m 5s`, `45s`: a time in words for a sentence (at least a second). */
export function durationInWords(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  return s >= 60 ? `${Math.floor(s / 60)}m${s % 60 ? ` ${s % 60}s` : ''}` : `${s}s`;
}
