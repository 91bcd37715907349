// What one operation answered, as callers use it: era D's events folded into era C's unary answer, and a
// command's base64 output decoded. Apart from the client because the terminal reads these from events too.
import { httpStatusForGrpc, type ExecuteResponse, type StreamEvent } from './gateway';
import { GatewayError, GatewayTransportError } from './gatewayErrors';

export interface CommandOutput {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
}

/**
 * Era D's `execute`: the events of one operation folded into the era-C unary answer. Output is
 * taken from the `output` events; `completed.command.stdout`/`stderr` only for a stream that
 * sent none (spec §10.6 a). `failed` becomes the GatewayError era C answers for that gRPC code.
 */
export async function executeFromEvents(events: AsyncIterable<StreamEvent>): Promise<ExecuteResponse> {
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  for await (const event of events) {
    if (event.type === 'output' && event.output.data) {
      (event.output.stream === 'stderr' ? stderr : stdout).push(Buffer.from(event.output.data, 'base64'));
    } else if (event.type === 'failed') {
      throw new GatewayError(httpStatusForGrpc(event.failed.code), event.failed.message ?? `operation failed (gRPC code ${event.failed.code})`);
    } else if (event.type === 'completed') {
      const result = event.completed.command;
      if (!result) return event.completed;
      const join = (parts: Buffer[], fallback: string | undefined) => (parts.length > 0 ? Buffer.concat(parts).toString('base64') : fallback);
      const out = join(stdout, result.stdout);
      const err = join(stderr, result.stderr);
      return {
        ...event.completed,
        command: { ...result, ...(out ? { stdout: out } : {}), ...(err ? { stderr: err } : {}) },
      };
    }
  }
  throw new GatewayTransportError('the operation ended without a terminal event; the outcome is unknown', true);
}

export function decodeCommandResult(result: NonNullable<ExecuteResponse['command']>): CommandOutput {
  return {
    exitCode: result.exitCode,
    stdout: result.stdout ? Buffer.from(result.stdout, 'base64') : Buffer.alloc(0),
    stderr: result.stderr ? Buffer.from(result.stderr, 'base64') : Buffer.alloc(0),
    timedOut: result.timedOut === true,
  };
}
