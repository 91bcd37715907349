// A small, strict argv parser for the CLI commands: known flags only (an unknown flag is an
// error naming it), `--flag value` or `--flag=value`, repeatable flags, positionals, and `--`
// ending the flags (what follows is a command's argv). Also the one `--help`/`-h` rule every
// command shares (the dispatcher in server/main.ts applies it) and the one UsageError (exit 2).
import { SandboxSessionsError } from '../../protocol/errors';

/** A wrong command line: the command prints the message and its usage, and exits 2. */
export class UsageError extends SandboxSessionsError<'usage'> {
  override readonly name = 'UsageError';
  readonly service = 'cli';
  constructor(message: string) {
    super('usage', message);
  }
}

export interface ParsedArgs {
  flags: Map<string, string[]>;
  positionals: string[];
  rest: string[];
}

export function parseArgs(argv: string[], spec: { booleans: string[]; values: string[] }): ParsedArgs {
  const flags = new Map<string, string[]>();
  const positionals: string[] = [];
  let rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') {
      rest = argv.slice(i + 1);
      break;
    }
    if (!arg.startsWith('--') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    let value: string;
    if (spec.booleans.includes(name)) {
      value = eq >= 0 ? arg.slice(eq + 1) : 'true';
    } else if (spec.values.includes(name)) {
      if (eq >= 0) value = arg.slice(eq + 1);
      else {
        const next = argv[++i];
        if (next === undefined) throw new UsageError(`--${name} needs a value`);
        value = next;
      }
    } else {
      throw new UsageError(`unknown option --${name}`);
    }
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { flags, positionals, rest };
}

export function flag(args: ParsedArgs, name: string): string | undefined {
  const v = args.flags.get(name);
  return v?.[v.length - 1];
}

/** `--name N`, a whole number ≥ 1 (of `unit`, named in the error), or undefined when the flag is absent. */
export function positiveIntFlag(args: ParsedArgs, name: string, unit = 'seconds'): number | undefined {
  const v = flag(args, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1 || !Number.isSafeInteger(Number(v))) throw new UsageError(`--${name} needs a positive whole number of ${unit}, got ${v}`);
  return Number(v);
}

export function bool(args: ParsedArgs, name: string): boolean {
  const v = flag(args, name);
  return v !== undefined && v !== 'false';
}

export function writeLine(stream: NodeJS.WritableStream, text: string): void {
  stream.write(text + '\n');
}

/**
 * `<command> <verb> [options]`: the verb and its parsed options, or the exit code after printing
 * the usage (2 when the verb is missing or an option is wrong). `--help` never gets here: the
 * dispatcher answers it (wantsHelp).
 */
export function parseVerb(
  argv: string[],
  usage: string | CommandHelp,
  spec: { booleans: string[]; values: string[] },
  stderr: NodeJS.WritableStream,
): { verb: string; args: ParsedArgs } | { exitCode: number } {
  const [verb, ...rest] = argv;
  if (!verb) {
    writeLine(stderr, typeof usage === 'string' ? usage : usage.usage);
    return { exitCode: 2 };
  }
  try {
    return { verb, args: parseArgs(rest, spec) };
  } catch (err) {
    writeLine(stderr, `error: ${(err as Error).message}\n${verbUsage(usage, verb)}`);
    return { exitCode: 2 };
  }
}

/** What a usage error of `verb` ends with: that verb's own usage when the help has one, else the command's. */
export function verbUsage(usage: string | CommandHelp, verb: string): string {
  if (typeof usage === 'string') return usage;
  const subcommands = usage.subcommands ?? {};
  return Object.hasOwn(subcommands, verb) ? (subcommands[verb] as string) : usage.usage;
}

/** What `--help` prints for one command: its usage, and each subcommand's own usage by name. */
export interface CommandHelp {
  /** Names `sandbox-sessions <command>`. */
  usage: string;
  /** Each names `sandbox-sessions <command> <subcommand>`. */
  subcommands?: Readonly<Record<string, string>>;
}

/**
 * Whether a command's argv (after the command name) asks for help: `--help` or `-h` anywhere
 * before `--` (after it, they belong to the sandbox command's argv, e.g. `exec NAME -- ls -h`),
 * or `help` as the subcommand.
 */
export function wantsHelp(argv: readonly string[]): boolean {
  if (argv[0] === 'help') return true;
  for (const arg of argv) {
    if (arg === '--') return false;
    if (arg === '--help' || arg === '-h') return true;
  }
  return false;
}

/**
 * The most specific usage for a command's argv: the first word before `--` that names a
 * subcommand picks that subcommand's usage; otherwise the command's. Ends with a newline.
 */
export function usageFor(help: CommandHelp, argv: readonly string[]): string {
  const end = argv.indexOf('--');
  const words = (end >= 0 ? argv.slice(0, end) : argv).filter((a) => !a.startsWith('-'));
  const subcommands = help.subcommands ?? {};
  const sub = words.find((w) => Object.hasOwn(subcommands, w));
  const text = sub !== undefined ? (subcommands[sub] as string) : help.usage;
  return text.endsWith('\n') ? text : `${text}\n`;
}

/**
 * Help for a `<command> <verb> [options]` command from one synopsis per verb (starting with the
 * verb; further lines continue it): the command's usage lists them all, each verb's usage is its
 * own synopsis; `footer` (the options every verb takes) ends both.
 */
export function verbHelp(command: string, synopses: Readonly<Record<string, string>>, footer: string): CommandHelp {
  const prefix = `sandbox-sessions ${command}`;
  const layout = (synopsis: string, indent: number): string => {
    const [first, ...more] = synopsis.split('\n').map((l) => l.trim());
    const verbWidth = (first ?? '').indexOf(' ') + 1;
    return [first, ...more.map((l) => `${' '.repeat(indent + verbWidth)}${l}`)].join('\n');
  };
  const lines = Object.values(synopses).map((s) => `  ${layout(s, 2)}`);
  const subcommands = Object.fromEntries(
    Object.entries(synopses).map(([verb, s]) => [verb, `usage: ${prefix} ${layout(s, `usage: ${prefix} `.length)}\n${footer}`]),
  );
  return { usage: [`usage: ${prefix} <command> [options]`, ...lines, footer].join('\n'), subcommands };
}
