// Where an activation puts things inside its fresh sandbox (relative to the sandbox root, whose
// absolute path comes from running `pwd`): the hydrated Session under `session/{state,workspace}`,
// the per-activation config root (credentials; never packed) and the request file — three
// non-overlapping roots, as `maka activate` requires — and the activation command line.
import posix from 'node:path/posix';
import { z } from 'zod';
import { ActivationError } from './errors';

export const REMOTE = {
  session: 'session',
  state: 'session/state',
  workspace: 'session/workspace',
  config: 'config',
  inputDir: 'activation',
  input: 'activation/request.json',
} as const;

export interface ActivationCommandConfig {
  /** The command prefix; the roots and input are appended. Default: `maka activate`. */
  argv: string[];
  /** Extra arguments after the roots (e.g. `--permission-mode explore`, `--model …`). */
  extraArgs?: string[];
  /** Non-secret environment for the command (credentials come per activation). */
  env?: Record<string, string>;
  /** Bounded: the command is cancelled after this long (default and maximum 5 minutes, the gateway's operation limit). */
  timeoutMs?: number;
}

export const DEFAULT_ACTIVATION_COMMAND: ActivationCommandConfig = { argv: ['maka', 'activate'] };

/** Where a person sets another activation command, for messages that tell them how. */
export const ACTIVATION_COMMAND_SETTINGS = 'SANDBOX_SESSIONS_ACTIVATION_COMMAND (a JSON array), the CLI\'s `-- <command…>` or VS Code\'s sandboxSessions.activation.command';

/**
 * The activation command from SANDBOX_SESSIONS_ACTIVATION_COMMAND (a JSON array of strings, e.g.
 * `["maka","activate"]`; the extension sets it from `sandboxSessions.activation.command`), for the
 * companion server and the CLI alike; undefined when it is not set.
 */
export function activationCommandFromEnv(env: NodeJS.ProcessEnv): ActivationCommandConfig | undefined {
  const raw = env.SANDBOX_SESSIONS_ACTIVATION_COMMAND;
  if (!raw) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    value = undefined;
  }
  const parsed = z.array(z.string().min(1)).min(1).safeParse(value);
  if (!parsed.success) throw new ActivationError('invalid_request', `SANDBOX_SESSIONS_ACTIVATION_COMMAND must be a JSON array of strings, e.g. ["maka","activate"], not ${raw.slice(0, 80)}`);
  return { argv: parsed.data };
}

export function activationArgv(command: ActivationCommandConfig, sandboxRoot: string): string[] {
  const abs = (rel: string) => posix.join(sandboxRoot, rel);
  return [
    ...command.argv,
    '--state-root',
    abs(REMOTE.state),
    '--workspace-root',
    abs(REMOTE.workspace),
    '--config-root',
    abs(REMOTE.config),
    '--input',
    abs(REMOTE.input),
    ...(command.extraArgs ?? []),
  ];
}
