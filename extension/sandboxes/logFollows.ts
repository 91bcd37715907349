// Follows sandbox logs through the companion server (`sandboxes/logs` with `follow`): one request
// per follower, whose lines come back as `sandboxes/log` notifications tagged with its followId.
// The language client keeps one handler per notification method, so every follower of this window
// goes through this one dispatcher.
import * as vscode from 'vscode';
import { companionNotifications } from '../../protocol/companion';
import type { SandboxRef } from '../../protocol/sandboxes';
import { type CompanionClient, CompanionRequestError } from '../companion/companionClient';

export interface LogFollow {
  /** Resolves when the Run has ended (its log is complete), or rejects with why following failed. */
  readonly done: Promise<void>;
  stop(): void;
}

export class SandboxLogFollows implements vscode.Disposable {
  private readonly listeners = new Map<string, (lines: string[]) => void>();
  private readonly subscription: vscode.Disposable;
  private next = 0;

  constructor(private readonly companion: CompanionClient) {
    this.subscription = companion.onNotification('sandboxes/log', (raw) => {
      const parsed = companionNotifications['sandboxes/log'].params.safeParse(raw);
      if (parsed.success) this.listeners.get(parsed.data.followId)?.(parsed.data.lines);
    });
  }

  /** Delivers the last `tailLines` lines (of those since `sinceTime`), then every new one, until the Run ends or `stop()`. */
  follow(ref: SandboxRef, query: { tailLines?: number; sinceTime?: string; timestamps?: boolean }, onLines: (lines: string[]) => void): LogFollow {
    const followId = `follow-${process.pid}-${++this.next}`;
    const cancel = new vscode.CancellationTokenSource();
    this.listeners.set(followId, onLines);
    const done = this.companion
      .request('sandboxes/logs', { ref, ...query, follow: true, followId }, { token: cancel.token })
      .then(
        () => undefined,
        (err: unknown) => {
          if (err instanceof CompanionRequestError && err.code === 'cancelled') return;
          throw err;
        },
      )
      .finally(() => {
        this.listeners.delete(followId);
        cancel.dispose();
      });
    return { done, stop: () => cancel.cancel() };
  }

  dispose(): void {
    this.subscription.dispose();
    this.listeners.clear();
  }
}
