// The `sandbox-sessions` CLI and companion-server entry point (bundled to dist/server.js):
// dispatches `sandbox-sessions <command> …` to the command modules under server/cli/.
import zlib from 'node:zlib';
import type { CommandHandler, CommandIo } from './cli/io';
import { runBundleCommand } from './cli/bundle';
import { runDoctorCommand } from './cli/doctor';
import { runGatewayCommand } from './cli/gateway';
import { runKruntimesCommand } from './cli/kruntimes';
import { runSandboxCommand } from './cli/sandbox';
import { runServerCommand } from './cli/serverCommand';
import { runSessionCommand } from './cli/session';
import { SERVER_VERSION } from './version';

interface CommandEntry {
  summary: string;
  handler: CommandHandler;
}

/** Every command the CLI offers; each one is implemented end to end. */
const commands: Record<string, CommandEntry> = {
  server: { summary: 'run the companion JSON-RPC server (--stdio)', handler: runServerCommand },
  gateway: { summary: 'run the local gateway daemon (--detach, --stop)', handler: (argv, io) => runGatewayCommand(argv, io) },
  sandbox: { summary: 'local sandboxes: create|list|get|exec|cancel|close|delete|artifacts', handler: (argv, io) => runSandboxCommand(argv, io) },
  kruntimes: { summary: 'kruntimes sandboxes (kubeconfig): contexts|list|create|get|exec|close|delete|artifacts', handler: (argv, io) => runKruntimesCommand(argv, io) },
  doctor: { summary: 'which local backends work on this machine, and why not', handler: runDoctorCommand },
  bundle: { summary: 'Session Bundles: pack|inspect|hydrate|cleanup', handler: runBundleCommand },
  session: { summary: 'the session repository: list|show|revisions|checkout|commit|delete', handler: runSessionCommand },
};

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
    '  help       print this help',
    '',
  ].join('\n');
}

/** Node >= 22.15 ships zstd; the bundle codec and the local runtime depend on it. */
export function zstdAvailable(): boolean {
  return typeof zlib.createZstdCompress === 'function';
}

export async function main(argv: string[], io: CommandIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    io.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === 'version' || name === '--version') {
    io.stdout.write(`${SERVER_VERSION}\n`);
    return 0;
  }
  const command = commands[name];
  if (!command) {
    io.stderr.write(`sandbox-sessions: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  if (!zstdAvailable()) {
    io.stderr.write(
      `sandbox-sessions: Node ${process.version} has no built-in zstd; run it with Node >= 22.15 ` +
        '(`npm install` puts one in node_modules/.bin).\n',
    );
    return 1;
  }
  return command.handler(rest, io);
}

if (require.main === module) {
  main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr }).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`sandbox-sessions: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
