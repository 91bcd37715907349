// "Show Sandbox Log": the sandbox's runtimed log in an output channel, followed live — the
// commands' stdout/stderr lines and one line per operation (outcome, exit code, duration), each
// with the time runtimed wrote it. One channel per sandbox; showing it again only reveals it.
import * as vscode from 'vscode';
import { type SandboxRef, sandboxFolderName, sandboxKey } from '../../protocol/sandboxes';
import { messageOf } from '../sandboxes/errorText';
import type { LogFollow, SandboxLogFollows } from '../sandboxes/logFollows';
import { readableLogLine } from './operationText';

interface Followed {
  channel: vscode.OutputChannel;
  follow: LogFollow;
  lines: string[];
}

export class SandboxLogChannels implements vscode.Disposable {
  private readonly channels = new Map<string, Followed>();

  constructor(private readonly follows: SandboxLogFollows) {}

  show(ref: SandboxRef): void {
    const key = sandboxKey(ref);
    let followed = this.channels.get(key);
    if (!followed) {
      const channel = vscode.window.createOutputChannel(`Sandbox Log: ${sandboxFolderName(ref)}`);
      const lines: string[] = [];
      const follow = this.follows.follow(ref, { tailLines: 1000, timestamps: true }, (batch) => {
        for (const line of batch) {
          const text = readableLogLine(line);
          lines.push(text);
          channel.appendLine(text);
        }
        if (lines.length > 5000) lines.splice(0, lines.length - 5000);
      });
      follow.done.then(
        () => channel.appendLine('— the sandbox has ended; its log is complete —'),
        (err: unknown) => channel.appendLine(`— the log cannot be followed: ${messageOf(err)} —`),
      );
      followed = { channel, follow, lines };
      this.channels.set(key, followed);
    }
    followed.channel.show(true);
  }

  /** What the channel of a sandbox shows (for tests). */
  text(key: string): string | undefined {
    return this.channels.get(key)?.lines.join('\n');
  }

  dispose(): void {
    for (const { channel, follow } of this.channels.values()) {
      follow.stop();
      channel.dispose();
    }
    this.channels.clear();
  }
}
