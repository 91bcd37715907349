// Opening a sandbox as a workspace folder can restart the extension host (VS Code does so when
// the first folder changes or a window becomes multi-root), killing the code that asked. So the
// intent is saved first and finished by the next activation: reveal the folder, open a terminal.
import * as vscode from 'vscode';
import { z } from 'zod';

const KEY = 'sandboxSessions.pendingOpen';
const MAX_AGE_MS = 2 * 60_000;

const PendingOpenSchema = z.object({
  key: z.string(),
  openTerminal: z.boolean(),
  at: z.number(),
});
export type PendingOpen = z.infer<typeof PendingOpenSchema>;

export async function recordPendingOpen(state: vscode.Memento, intent: Omit<PendingOpen, 'at'>): Promise<void> {
  await state.update(KEY, { ...intent, at: Date.now() });
}

/** The saved intent if it is recent, cleared so it is finished once. */
export async function takePendingOpen(state: vscode.Memento): Promise<PendingOpen | undefined> {
  const parsed = PendingOpenSchema.safeParse(state.get(KEY));
  await state.update(KEY, undefined);
  if (!parsed.success || Date.now() - parsed.data.at > MAX_AGE_MS) return undefined;
  return parsed.data;
}
