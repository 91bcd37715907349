// The companion server's stderr JSON lines reach the extension's log at their own level, as
// readable text; other lines are kept as warnings; a line split across chunks is logged once.
import assert from 'node:assert/strict';
import type * as vscode from 'vscode';
import { logServerLine, serverLogSink } from '../../../extension/companion/serverLogLines';

function recordingLog(): { log: vscode.LogOutputChannel; lines: string[] } {
  const lines: string[] = [];
  const at = (level: string) => (message: string) => void lines.push(`${level} ${message}`);
  const log = { trace: at('trace'), debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } as unknown as vscode.LogOutputChannel;
  return { log, lines };
}

describe('extension: companion server log lines', () => {
  it('logs each JSON line at its level as "msg key=value"', () => {
    const { log, lines } = recordingLog();
    logServerLine(log, '{"time":"2026-12-01T15:31:56.941Z","level":"info","msg":"companion server listening on stdio","pid":24121}');
    logServerLine(log, '{"time":"t","level":"debug","msg":"request done","method":"initialize","ms":2}');
    logServerLine(log, '{"time":"t","level":"error","msg":"watch failed","error":{"code":"x"}}');
    assert.deepEqual(lines, [
      'info companion server listening on stdio pid=24121',
      'debug request done method=initialize ms=2',
      'error watch failed error={"code":"x"}',
    ]);
  });

  it('keeps lines that are not the server JSON as warnings, and skips blank ones', () => {
    const { log, lines } = recordingLog();
    logServerLine(log, '(node:1) ExperimentalWarning: something');
    logServerLine(log, '{"level":"loud","msg":"x"}');
    logServerLine(log, '   ');
    assert.deepEqual(lines, ['warn companion server: (node:1) ExperimentalWarning: something', 'warn companion server: {"level":"loud","msg":"x"}']);
  });

  it('joins a line split across chunks and flushes a last line without newline', () => {
    const { log, lines } = recordingLog();
    const sink = serverLogSink(log);
    sink.write('{"level":"info","ms');
    sink.write('g":"a"}\n{"level":"warn","msg":"b"}\n{"level":"info",');
    sink.write(Buffer.from('"msg":"c"}'));
    sink.end();
    assert.deepEqual(lines, ['info a', 'warn b', 'info c']);
  });
});
