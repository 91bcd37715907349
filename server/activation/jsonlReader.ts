// Reads the agent's stdout as `maka.activation` JSONL (spec §10.3): complete lines are parsed with
// the protocol schema and handed on as they arrive; the first `outcome` is kept, a second is
// ignored (as Maka's line writer does); anything that is not a valid line is a protocol error.
import { type ActivationEvent, type ActivationOutcomeEvent, parseActivationLine } from '../../protocol/activation';
import { ActivationError } from './errors';

/** A line longer than this is not an activation event (the outcome is capped at 256 KiB of response). */
const MAX_LINE_BYTES = 512 * 1024;

export class ActivationJsonlReader {
  private pending: Buffer = Buffer.alloc(0);
  outcome: ActivationOutcomeEvent | undefined;
  lines = 0;

  constructor(
    private readonly activationId: string,
    private readonly onEvent: (event: ActivationEvent) => void,
  ) {}

  push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let nl: number;
    while ((nl = this.pending.indexOf(0x0a)) !== -1) {
      const line = this.pending.subarray(0, nl).toString('utf8');
      this.pending = this.pending.subarray(nl + 1);
      this.line(line);
    }
    if (this.pending.length > MAX_LINE_BYTES) throw new ActivationError('agent_protocol_error', `the agent wrote a stdout line longer than ${MAX_LINE_BYTES} bytes`);
  }

  /** End of output: a trailing line without a newline is still a line. */
  end(): void {
    const rest = this.pending.toString('utf8');
    this.pending = Buffer.alloc(0);
    if (rest.trim() !== '') this.line(rest);
  }

  private line(text: string): void {
    if (text.trim() === '') return;
    let event: ActivationEvent;
    try {
      event = parseActivationLine(text);
    } catch (err) {
      throw new ActivationError('agent_protocol_error', `the agent wrote a line that is not a maka.activation event: ${(err as Error).message.slice(0, 300)}`);
    }
    if (event.activationId !== this.activationId) {
      throw new ActivationError('agent_protocol_error', `the agent reported activation ${JSON.stringify(event.activationId)}, not ${JSON.stringify(this.activationId)}`);
    }
    this.lines += 1;
    if (event.type === 'outcome') {
      if (this.outcome !== undefined) return;
      this.outcome = event;
    }
    this.onEvent(event);
  }
}
