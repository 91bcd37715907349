// The revision each sandbox's changes are shown against (its baseline). Two sources, the later one wins:
// - the sandbox's own mark (SandboxSummary.sessionRevision, protocol/sandboxRevision.ts): the revision it was opened
//   from or last saved as, written by the server whoever asked — this window, another one, an agent over MCP;
// - this user's choice: Compare Sandbox with Revision… sets one, Compare Sandbox Since Opened sets "since opened",
//   Stop Comparing Sandbox sets "none". Opening or saving
//   from here records a choice too, so a Run that could not be marked (a cluster role without `patch`) still has one.
// With neither (a sandbox made from an image, never saved), its changes are shown since it was opened: its opening
// snapshot, which the companion takes on the first comparison (protocol/companion/openings.ts).
// Choices live in the extension's global state, because the window a sandbox is opened in is often not the one that
// made it. No VS Code API here (a Memento is all it needs), so it is unit-testable.
import { z } from 'zod';
import type { SandboxSessionRevision } from '../../protocol/sandboxRevision';

export const BASELINES_KEY = 'sandboxSessions.changeBaselines';
/** Choices kept at most; the oldest set goes first (a sandbox long gone has no use for one). */
export const MAX_BASELINES = 200;

const BaselineSchema = z.object({ sessionId: z.string().min(1), revision: z.string().min(1), setAt: z.number() });
const StoppedSchema = z.object({ stopped: z.literal(true), setAt: z.number() });
const OpenedSchema = z.object({ opened: z.literal(true), setAt: z.number() });
const ChoiceSchema = z.union([BaselineSchema, StoppedSchema, OpenedSchema]);
/** Entries another version stored unreadably are skipped one by one (the others stay). */
const StoredSchema = z.record(z.string(), z.unknown());

/** A revision to compare with; `setAt`: when it became the baseline (ms since the epoch). */
export type ChangeBaseline = z.infer<typeof BaselineSchema>;
type Choice = z.infer<typeof ChoiceSchema>;

/** The part of vscode.Memento this uses. */
export interface BaselineStore {
  get(key: string): unknown;
  update(key: string, value: unknown): Thenable<void>;
}

/** Since the sandbox was opened: what its opening snapshot holds. */
export interface OpenedBaseline {
  opened: true;
}
export const SINCE_OPENED: OpenedBaseline = { opened: true };
/** What a shown sandbox is compared with. */
export type Baseline = ChangeBaseline | OpenedBaseline;

/** The baseline in a label (`Changes since …`): `demo@r2`, or `opened`. */
export const baselineName = (baseline: Baseline): string => ('opened' in baseline ? 'opened' : `${baseline.sessionId}@${baseline.revision}`);
/** The baseline in a sentence (`Added since …`): `demo@r2`, or `the sandbox was opened`. */
export const sinceWords = (baseline: Baseline): string => ('opened' in baseline ? 'the sandbox was opened' : baselineName(baseline));

export function sameBaseline(a: Baseline | undefined, b: Baseline | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if ('opened' in a || 'opened' in b) return 'opened' in a && 'opened' in b;
  return a.sessionId === b.sessionId && a.revision === b.revision;
}

export class ChangeBaselines {
  private readonly listeners = new Set<(key: string) => void>();

  constructor(
    private readonly store: BaselineStore,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The revision a sandbox (by key) is compared with: the later of this user's choice and the sandbox's mark (`mark`,
   * from its summary); none when the later one is Stop Comparing or Since Opened, or when there is neither.
   */
  resolve(key: string, mark?: SandboxSessionRevision): ChangeBaseline | undefined {
    const choice = this.choiceOf(key);
    const marked = mark && { sessionId: mark.sessionId, revision: mark.revision, setAt: Date.parse(mark.at) };
    const later = marked && (choice === undefined || marked.setAt > choice.setAt) ? marked : choice;
    return later === undefined || 'stopped' in later || 'opened' in later ? undefined : later;
  }

  /** Whether the later of this user's choice and the sandbox's mark is Stop Comparing (then nothing is shown). */
  stopped(key: string, mark?: SandboxSessionRevision): boolean {
    const choice = this.choiceOf(key);
    return choice !== undefined && 'stopped' in choice && (mark === undefined || Date.parse(mark.at) <= choice.setAt);
  }

  async set(key: string, baseline: { sessionId: string; revision: string }): Promise<void> {
    await this.choose(key, { sessionId: baseline.sessionId, revision: baseline.revision, setAt: this.now() });
  }

  /** Compare Since Opened: the sandbox's opening snapshot, until it is next opened from or saved as a revision. */
  async sinceOpened(key: string): Promise<void> {
    await this.choose(key, { opened: true, setAt: this.now() });
  }

  /** Stop Comparing: no baseline until the sandbox is next opened from or saved as a revision, or one is chosen. */
  async stop(key: string): Promise<void> {
    await this.choose(key, { stopped: true, setAt: this.now() });
  }

  /** Called with the sandbox's key after its choice was set here. */
  onDidChange(listener: (key: string) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  private async choose(key: string, choice: Choice): Promise<void> {
    const all = this.all();
    all[key] = choice;
    const kept = Object.entries(all)
      .sort(([, a], [, b]) => b.setAt - a.setAt)
      .slice(0, MAX_BASELINES);
    await this.store.update(BASELINES_KEY, Object.fromEntries(kept));
    for (const listener of this.listeners) listener(key);
  }

  /** One sandbox's choice (asked on every change of any sandbox shown: only its own entry is parsed). */
  private choiceOf(key: string): Choice | undefined {
    const stored = StoredSchema.safeParse(this.store.get(BASELINES_KEY) ?? {});
    const choice = stored.success ? ChoiceSchema.safeParse(stored.data[key]) : undefined;
    return choice?.success ? choice.data : undefined;
  }

  private all(): Record<string, Choice> {
    const stored = StoredSchema.safeParse(this.store.get(BASELINES_KEY) ?? {});
    const out: Record<string, Choice> = {};
    if (!stored.success) return out;
    for (const [key, value] of Object.entries(stored.data)) {
      const choice = ChoiceSchema.safeParse(value);
      if (choice.success) out[key] = choice.data;
    }
    return out;
  }
}
