// Runs the activation command in the sandbox through `operations:stream` and turns its stdout into
// provisional activation events as they arrive. Bounded by a timeout; cancelled with the caller's
// signal (closing the stream cancels the operation in the sandbox). Classifies what went wrong:
// timeout, cancellation, a sandbox that vanished, an agent that died without an outcome, or an
// outcome whose exit code is not the contract's.
import { type ActivationEvent, type ActivationOutcomeEvent, OUTCOME_EXIT_CODES } from '../../protocol/activation';
import { GrpcCode } from '../../protocol/kruntimes/gateway';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { ActivationError } from './errors';
import { ActivationJsonlReader } from './jsonlReader';
import { ACTIVATION_COMMAND_SETTINGS } from './sandboxLayout';

const STDERR_TAIL_BYTES = 4096;

export interface AgentRun {
  outcome: ActivationOutcomeEvent;
  exitCode: number;
}

/**
 * The gateway answered the command with an error instead of running it. InvalidArgument is a command
 * that cannot start (not on the sandbox's PATH, not executable): the agent's fault, and the person can
 * fix it; anything else is the sandbox's.
 */
function commandRefused(failed: { code: number; message?: string | undefined }, argv: string[]): ActivationError {
  const detail = (failed.message ?? `gRPC status ${failed.code}`).slice(0, 300);
  if (failed.code === GrpcCode.InvalidArgument) {
    return new ActivationError(
      'agent_failed',
      `the activation command \`${argv[0] ?? ''}\` could not start in the sandbox (${detail}); install it in the sandbox, or set another with ${ACTIVATION_COMMAND_SETTINGS}. Nothing was committed`,
    );
  }
  return new ActivationError('sandbox_lost', `the sandbox could not run the activation command (${detail}); nothing was committed`);
}

export async function runAgentCommand(input: {
  client: GatewayClient;
  argv: string[];
  env: Record<string, string>;
  activationId: string;
  timeoutMs: number;
  signal?: AbortSignal;
  onEvent: (event: ActivationEvent) => void;
}): Promise<AgentRun> {
  const reader = new ActivationJsonlReader(input.activationId, input.onEvent);
  let stderr = Buffer.alloc(0);
  let sawStdout = false;
  let exitCode: number | undefined;
  let timedOut = false;
  const timeout = AbortSignal.timeout(input.timeoutMs);
  const signal = input.signal ? AbortSignal.any([input.signal, timeout]) : timeout;
  try {
    const events = input.client.stream(
      // A little longer than our own timeout, so ours fires first and is reported as such.
      { command: { argv: input.argv, env: input.env, timeoutMillis: input.timeoutMs + 5_000 } },
      { signal },
    );
    for await (const event of events) {
      if (event.type === 'output' && event.output.data !== undefined) {
        const data = Buffer.from(event.output.data, 'base64');
        if (event.output.stream === 'stdout') {
          sawStdout = true;
          reader.push(data);
        } else {
          stderr = Buffer.concat([stderr, data]).subarray(-STDERR_TAIL_BYTES);
        }
      } else if (event.type === 'completed') {
        const command = event.completed.command;
        if (command === undefined) throw new ActivationError('agent_protocol_error', 'the activation command finished without a command result');
        exitCode = command.exitCode;
        timedOut = command.timedOut === true;
        // A gateway without output events delivers everything at the end.
        if (!sawStdout && command.stdout) reader.push(Buffer.from(command.stdout, 'base64'));
        if (stderr.length === 0 && command.stderr) stderr = Buffer.from(command.stderr, 'base64').subarray(-STDERR_TAIL_BYTES);
      } else if (event.type === 'failed') {
        throw commandRefused(event.failed, input.argv);
      }
    }
    reader.end();
  } catch (err) {
    if (timeout.aborted) throw new ActivationError('activation_timeout', `the activation command did not finish within ${Math.round(input.timeoutMs / 1000)} s and was cancelled`);
    if (input.signal?.aborted) throw new ActivationError('activation_cancelled', 'the activation was cancelled; nothing was committed');
    if (err instanceof ActivationError) throw err;
    throw new ActivationError('sandbox_lost', `lost the sandbox while the agent ran (${(err as Error).message}); nothing was committed`, { cause: err });
  }
  const tail = stderr.toString('utf8').trim();
  if (timedOut) throw new ActivationError('activation_timeout', 'the sandbox stopped the activation command at its operation timeout');
  if (exitCode === undefined) throw new ActivationError('sandbox_lost', 'the activation command ended without an exit status');
  const outcome = reader.outcome;
  if (outcome === undefined) {
    throw new ActivationError('agent_failed', `the agent exited with ${exitCode} without an outcome line${tail ? `: ${tail.slice(-500)}` : ''}`);
  }
  if (OUTCOME_EXIT_CODES[outcome.status] !== exitCode) {
    throw new ActivationError('agent_protocol_error', `the agent reported ${outcome.status} but exited with ${exitCode} (the contract says ${OUTCOME_EXIT_CODES[outcome.status]})`);
  }
  return { outcome, exitCode };
}
