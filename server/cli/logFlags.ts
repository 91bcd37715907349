// The `logs` verb's flags as kubectl spells them (`-f`, --tail, --since, --since-time, --timestamps), shared by
// `sandbox logs` and `kruntimes logs` so both check them alike, and the Ctrl+C that ends a follow.
import { parseGoDuration } from '../../protocol/kruntimes/run';
import type { RunLogQuery } from '../../protocol/kruntimes/runtimedLog';
import { bool, flag, UsageError, type ParsedArgs } from './args';

/** `logs -f` as kubectl spells it (only before `--`, only for `logs`): the argv with `-f` read as `--follow`. */
export function withKubectlFollow(argv: string[]): string[] {
  if (argv[0] !== 'logs') return argv;
  return argv.map((a, i) => (a === '-f' && !argv.slice(0, i).includes('--') ? '--follow' : a));
}

/** `logs`' flags as a log query, checked as kubectl checks them. */
export function logQuery(args: ParsedArgs): RunLogQuery {
  const tail = flag(args, 'tail');
  const since = flag(args, 'since');
  const sinceTime = flag(args, 'since-time');
  if (tail !== undefined && !/^\d+$/.test(tail)) throw new UsageError(`--tail needs a number of lines, got ${tail}`);
  if (since !== undefined && sinceTime !== undefined) throw new UsageError('use --since or --since-time, not both');
  const sinceMs = since !== undefined ? parseGoDuration(since) : undefined;
  if (since !== undefined && (sinceMs === undefined || sinceMs <= 0)) throw new UsageError(`--since needs a duration such as 30s, 5m or 1h, got ${since}`);
  return {
    ...(tail !== undefined ? { tailLines: Number(tail) } : {}),
    ...(sinceMs !== undefined ? { sinceSeconds: Math.ceil(sinceMs / 1000) } : {}),
    ...(sinceTime !== undefined ? { sinceTime } : {}),
    ...(bool(args, 'timestamps') ? { timestamps: true } : {}),
    ...(bool(args, 'follow') ? { follow: true } : {}),
  };
}

/** Reads a log (following it when asked, until Ctrl+C); the exit code: 130 when Ctrl+C ended it, else 0. */
export async function readLogUntilInterrupt(follow: boolean, read: (signal: AbortSignal) => Promise<void>): Promise<number> {
  const stop = new AbortController();
  const onSigint = (): void => stop.abort();
  if (follow) process.once('SIGINT', onSigint);
  try {
    await read(stop.signal);
  } finally {
    process.off('SIGINT', onSigint);
  }
  return stop.signal.aborted ? 130 : 0;
}
