// The revision each sandbox's changes are shown against (its baseline): set when a revision is opened in a new
// sandbox, moved on when the sandbox is saved as a revision, chosen with Compare Sandbox with Revision…. Kept in
// the extension's global state, because the window a sandbox is opened in is often not the one that made it.
// No VS Code API here (a Memento is all it needs), so it is unit-testable.
import { z } from 'zod';

export const BASELINES_KEY = 'sandboxSessions.changeBaselines';
/** Baselines kept at most; the oldest set goes first (a sandbox long gone has no use for one). */
export const MAX_BASELINES = 200;

const BaselineSchema = z.object({ sessionId: z.string().min(1), revision: z.string().min(1), setAt: z.number() });
const StoredSchema = z.record(z.string(), BaselineSchema);

export type ChangeBaseline = z.infer<typeof BaselineSchema>;

/** The part of vscode.Memento this uses. */
export interface BaselineStore {
  get(key: string): unknown;
  update(key: string, value: unknown): Thenable<void>;
}

export class ChangeBaselines {
  private readonly listeners = new Set<(key: string) => void>();

  constructor(
    private readonly store: BaselineStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** The baseline of a sandbox (by key), if it has one. What another version stored unreadably counts as none. */
  get(key: string): ChangeBaseline | undefined {
    return this.all()[key];
  }

  async set(key: string, baseline: { sessionId: string; revision: string }): Promise<void> {
    const all = this.all();
    all[key] = { sessionId: baseline.sessionId, revision: baseline.revision, setAt: this.now() };
    const kept = Object.entries(all)
      .sort(([, a], [, b]) => b.setAt - a.setAt)
      .slice(0, MAX_BASELINES);
    await this.store.update(BASELINES_KEY, Object.fromEntries(kept));
    this.fire(key);
  }

  async delete(key: string): Promise<void> {
    const all = this.all();
    if (!(key in all)) return;
    delete all[key];
    await this.store.update(BASELINES_KEY, all);
    this.fire(key);
  }

  /** Called with the sandbox's key after its baseline was set or removed here. */
  onDidChange(listener: (key: string) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  private all(): Record<string, ChangeBaseline> {
    const parsed = StoredSchema.safeParse(this.store.get(BASELINES_KEY) ?? {});
    return parsed.success ? { ...parsed.data } : {};
  }

  private fire(key: string): void {
    for (const listener of this.listeners) listener(key);
  }
}
