// The §2.10 event sequence of one Session operation — `accepted`, `output`…, then exactly one
// `completed` or `failed` — produced once and shared by the two transports that carry it:
// `operations:stream` (NDJSON lines) and `operations:ws` (one text frame per event). Each
// transport encodes the events and applies its own size limit; a failure before `accepted`
// is thrown, so the caller can still answer with a plain HTTP error (or an `error` frame).
import type { SessionOperation, StreamEvent } from '../../protocol/kruntimes/gateway';
import type { LocalSession } from '../local/localSession';
import { SessionError } from '../local/sessionError';

/**
 * One event: the protocol's stream event (StreamEventSchema) less `progress`, which a local command never reports.
 * produceOperationEvents writes each one's fields in the order the kruntimes gateway writes them.
 */
export type OperationEvent = Exclude<StreamEvent, { type: 'progress' }>;

export interface OperationEventOptions {
  operationId: string;
  /** Aborting it cancels the operation (the caller went away, or asked to cancel). */
  signal?: AbortSignal;
}

/** gRPC code Internal, for failures that carry no code of their own. */
const INTERNAL = 13;

/**
 * Runs `op` on `session`, handing each event to `emit` as it happens. Resolves after the
 * terminal event; rejects only when the operation fails before it was accepted.
 */
export async function produceOperationEvents(
  session: LocalSession,
  op: SessionOperation,
  opts: OperationEventOptions,
  emit: (event: OperationEvent) => void,
): Promise<void> {
  let sequence = 0;
  let accepted = false;
  try {
    const result = await session.execute(op, {
      operationId: opts.operationId,
      clientSignal: opts.signal,
      onAccepted: (id) => {
        accepted = true;
        emit({ sequence: ++sequence, type: 'accepted', accepted: { operationID: id } });
      },
      onOutput: (stream, data) => emit({ sequence: ++sequence, type: 'output', output: { stream, data: data.toString('base64') } }),
    });
    emit({ sequence: ++sequence, type: 'completed', completed: result });
  } catch (err) {
    if (!accepted) throw err;
    const code = err instanceof SessionError ? err.grpcCode : INTERNAL;
    emit({ sequence: ++sequence, type: 'failed', failed: { code, message: (err as Error).message } });
  }
}
