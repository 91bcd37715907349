// The Operations view's rows and the Sandbox Log's text come from runtimed's timestamped JSON lines:
// only audit lines become rows; every line reads as time, stream and message.
import assert from 'node:assert/strict';
import { auditRows, operationSummary, readableLogLine } from '../../../extension/views/operationText';

const base = { run_uid: 'u', run_name: 'sbx-1', namespace: 'default', runtime: 'process', pod: 'local-process' };
const at = (t: string, o: object) => `${t} ${JSON.stringify({ ...base, ...o })}`;
const T1 = '2026-12-01T15:31:56.941000000Z';
const T2 = '2026-12-01T15:31:57.000000001Z';
const lines = [
  at(T1, { stream: 'stdout', message: 'hello', operation: 'command', outcome: 'failed', exit_code: 2 }),
  at(T1, { stream: 'audit', message: 'session operation completed', operation: 'command', outcome: 'failed', exit_code: 2, duration_milliseconds: 41 }),
  at(T2, { stream: 'audit', message: 'session operation completed', operation: 'delete_file', outcome: 'failed', status_code: 'NotFound', duration_milliseconds: 3 }),
  at(T2, { stream: 'audit', message: 'session operation completed', operation: 'command', outcome: 'cancelled' }),
  'not a log line',
  `${T2} {not json`,
];

describe('extension: operation rows and log text', () => {
  it('turns only audit lines into rows, in log order, with their times', () => {
    const rows = auditRows(lines);
    assert.deepEqual(
      rows.map((r) => [r.time, r.audit.operation, r.audit.outcome]),
      [
        [T1, 'command', 'failed'],
        [T2, 'delete_file', 'failed'],
        [T2, 'command', 'cancelled'],
      ],
    );
  });

  it('summarises outcome, exit code, status code and duration', () => {
    const [command, del, cancelled] = auditRows(lines);
    assert.equal(operationSummary(command!.audit), 'failed · exit 2 · 41 ms');
    assert.equal(operationSummary(del!.audit), 'failed · NotFound · 3 ms');
    assert.equal(operationSummary(cancelled!.audit), 'cancelled · 0 ms');
  });

  it('reads each line as time, stream and message; other text stays as it is', () => {
    assert.deepEqual(lines.map(readableLogLine), [
      `${T1} [stdout] hello`,
      `${T1} [audit] command failed · exit 2 · 41 ms`,
      `${T2} [audit] delete_file failed · NotFound · 3 ms`,
      `${T2} [audit] command cancelled · 0 ms`,
      'not a log line',
      `${T2} {not json`,
    ]);
  });
});
