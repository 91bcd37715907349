// A small, strict argv parser for the CLI commands: known flags only (an unknown flag is an
// error naming it), `--flag value` or `--flag=value`, repeatable flags, positionals, and `--`
// ending the flags (what follows is a command's argv).
export class UsageError extends Error {
  override readonly name = 'UsageError';
  readonly code = 'usage';
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

export function bool(args: ParsedArgs, name: string): boolean {
  const v = flag(args, name);
  return v !== undefined && v !== 'false';
}

export function writeLine(stream: NodeJS.WritableStream, text: string): void {
  stream.write(text + '\n');
}

/**
 * `<command> <verb> [options]`: the verb and its parsed options, or the exit code after printing
 * the usage (0 for `help`, 2 when the verb is missing or an option is wrong).
 */
export function parseVerb(
  argv: string[],
  usage: string,
  spec: { booleans: string[]; values: string[] },
  stdout: NodeJS.WritableStream,
  stderr: NodeJS.WritableStream,
): { verb: string; args: ParsedArgs } | { exitCode: number } {
  const [verb, ...rest] = argv;
  if (!verb || verb === '--help' || verb === 'help') {
    writeLine(verb ? stdout : stderr, usage);
    return { exitCode: verb ? 0 : 2 };
  }
  try {
    return { verb, args: parseArgs(rest, spec) };
  } catch (err) {
    writeLine(stderr, `error: ${(err as Error).message}\n${usage}`);
    return { exitCode: 2 };
  }
}
