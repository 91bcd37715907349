// The `sandbox-sessions` CLI and companion-server entry point (bundled to dist/server.js):
// dispatches `sandbox-sessions <command> …` to the command modules under server/cli/, loading only
// the one it runs (each is its own bundle), and answers `--help`/`-h` for every command and
// subcommand here, once, from the table below.
import { type CommandHelp, usageFor, wantsHelp } from './cli/args';
import { enableCompileCache } from './cli/compileCache';
import type { CommandHandler, CommandIo } from './cli/io';
import { saveCommandBundleCaches } from './cli/warmCodeCache';
import { SERVER_VERSION } from './version';

/** A command's module, once loaded. */
export interface LoadedCommand {
  /** What `--help` prints: the command's usage, or its subcommand's. */
  help: CommandHelp;
  handler: CommandHandler;
}

export interface CommandEntry {
  summary: string;
  /**
   * Loads the command's code on demand, so a call pays only for its own command (the daemon never
   * loads Kubernetes, pg or gRPC). Always `import('./cli/<module>.js')` with a literal path: esbuild.mjs
   * builds each such module as its own bundle, dist/cli/<module>.js, and this one as a require of it.
   */
  load: () => Promise<LoadedCommand>;
}

/** Every command the CLI offers; each one is implemented end to end. */
export const commands: Readonly<Record<string, CommandEntry>> = {
  server: {
    summary: 'run the companion JSON-RPC server (--stdio)',
    load: () => import('./cli/serverCommand.js').then((m) => ({ help: m.SERVER_HELP, handler: m.runServerCommand })),
  },
  gateway: {
    summary: 'run the local gateway daemon (--detach, --status, --stop)',
    load: () => import('./cli/gateway.js').then((m) => ({ help: m.GATEWAY_HELP, handler: (argv, io) => m.runGatewayCommand(argv, io) })),
  },
  sandbox: {
    summary: 'local sandboxes: create|list|get|exec|cancel|close|delete|artifacts|operations|logs|port-forward',
    load: () => import('./cli/sandbox.js').then((m) => ({ help: m.SANDBOX_HELP, handler: (argv, io) => m.runSandboxCommand(argv, io) })),
  },
  kruntimes: {
    summary: 'kruntimes sandboxes (kubeconfig): contexts|list|create|get|exec|close|delete|artifacts|logs|port-forward',
    load: () => import('./cli/kruntimes.js').then((m) => ({ help: m.KRUNTIMES_HELP, handler: (argv, io) => m.runKruntimesCommand(argv, io) })),
  },
  doctor: {
    summary: 'which local backends work on this machine, and why not',
    load: () => import('./cli/doctor.js').then((m) => ({ help: m.DOCTOR_HELP, handler: m.runDoctorCommand })),
  },
  bundle: {
    summary: 'Session Bundles: pack|inspect|hydrate|cleanup',
    load: () => import('./cli/bundle.js').then((m) => ({ help: m.BUNDLE_HELP, handler: m.runBundleCommand })),
  },
  session: {
    summary: 'the session repository: list|show|revisions|checkout|commit|delete|activate|fork|diff|gc',
    load: () => import('./cli/session.js').then((m) => ({ help: m.SESSION_HELP, handler: m.runSessionCommand })),
  },
  mcp: {
    summary: 'run the MCP server for agents over stdio or --http (sandbox_create, sandbox_exec, session_save, …)',
    load: () => import('./cli/mcpCommand.js').then((m) => ({ help: m.MCP_HELP, handler: m.runMcpCommand })),
  },
};

function commandNamed(name: string): CommandEntry | undefined {
  return Object.hasOwn(commands, name) ? commands[name] : undefined;
}

function usage(): string {
  const rows = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return [
    `sandbox-sessions ${SERVER_VERSION}`,
    '',
    'Usage: sandbox-sessions <command> [options]',
    '',
    'Commands:',
    ...rows,
    '  version    print the version',
    '  help       print this help; `help <command> [<subcommand>]` prints that command\'s',
    '',
    'Every command and subcommand takes --help (or -h): `sandbox-sessions bundle pack --help`.',
    '',
  ].join('\n');
}

/**
 * Node >= 22.15 ships zstd; the bundle codec and the local runtime depend on it. Node says so in process.versions,
 * which spares every command (and the daemon, for as long as it runs) loading zlib for the check.
 */
export function zstdAvailable(): boolean {
  if (process.versions.zstd !== undefined) return true;
  // An older Node (getBuiltinModule: 20.16, 22.3) or one that does not list it: ask zlib itself.
  const getBuiltin = process.getBuiltinModule as typeof process.getBuiltinModule | undefined;
  return getBuiltin !== undefined && typeof getBuiltin('node:zlib').createZstdCompress === 'function';
}

function unknownCommand(name: string, io: CommandIo): number {
  io.stderr.write(`sandbox-sessions: unknown command "${name}"\n\n${usage()}`);
  return 2;
}

export async function main(argv: string[], io: CommandIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.stdout.write(usage());
    return 2;
  }
  // `help [<command> [<subcommand>]]`
  if (name === 'help') {
    const [topic, ...sub] = rest;
    if (topic === undefined || topic === '--help' || topic === '-h') {
      io.stdout.write(usage());
      return 0;
    }
    const command = commandNamed(topic);
    if (!command) return unknownCommand(topic, io);
    io.stdout.write(usageFor((await command.load()).help, sub));
    return 0;
  }
  const command = commandNamed(name);
  // `--help`/`-h` before any `--`: the most specific usage, before any work (or zstd check) is done.
  if (command && wantsHelp(rest)) {
    io.stdout.write(usageFor((await command.load()).help, rest));
    return 0;
  }
  if (!command && (name === 'version' || name.startsWith('-')) && wantsHelp(argv)) {
    io.stdout.write(usage());
    return 0;
  }
  if (name === 'version' || name === '--version') {
    io.stdout.write(`${SERVER_VERSION}\n`);
    return 0;
  }
  if (!command) return unknownCommand(name, io);
  if (!zstdAvailable()) {
    io.stderr.write(
      `sandbox-sessions: Node ${process.version} has no built-in zstd; run it with Node >= 22.15 ` +
        '(`npm install` puts one in node_modules/.bin).\n',
    );
    return 1;
  }
  const loaded = await command.load();
  try {
    return await loaded.handler(rest, io);
  } catch (err) {
    // node:util's parseArgs refusing the command line (an unknown option, a missing value) is a usage error.
    if (!isParseArgsError(err)) throw err;
    io.stderr.write(`error: ${parseArgsText(err.message)}\n${usageFor(loaded.help, rest)}`);
    return 2;
  }
}

function isParseArgsError(err: unknown): err is Error & { code: string } {
  const code = err instanceof Error ? (err as NodeJS.ErrnoException).code : undefined;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}

/** parseArgs' message without its hint about `--` (which quotes unevenly): "Unknown option '--bogus'". */
export function parseArgsText(message: string): string {
  const hint = message.indexOf('. To specify a positional argument');
  return hint >= 0 ? message.slice(0, hint) : message;
}

if (require.main === module) {
  // Before any command bundle is required: those are what the cache saves compiling again.
  enableCompileCache();
  main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr }).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`sandbox-sessions: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  ).finally(saveCommandBundleCaches); // once the command's code has run: what its warm code cache holds
}
