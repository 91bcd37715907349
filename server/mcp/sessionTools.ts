// The MCP tools on portable sessions: save a sandbox as a session revision, what a sandbox changed
// since a revision, open a revision in a new sandbox, fork a session at a revision, and run one
// activation (one agent turn) in a fresh, throw-away sandbox. Each calls the very service the
// companion's `sessions/saveSandbox`, `sessions/compareSandbox`, `sessions/openInSandbox`,
// `sessions/fork` and `activations/run` call (companionServices.ts);
// this file only adds the agent scope (a sandbox must be the agent's own or granted; the `process`
// backend needs the user's consent) and the MCP shapes.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { StimulusSchema } from '../../protocol/activation';
import { IdentifierSchema, RevisionSchema } from '../../protocol/repository';
import type { WorkOptions } from '../sandboxes/provider';
import { compareSandboxWithRevision } from '../sessions/sandboxChanges';
import { json, type McpToolContext, progressOf, type ToolExtra } from './toolContext';
import { McpToolError } from './toolErrors';
import { agentCreateSpec, describeSandbox, sandboxSpecArgs } from './tools';

const sessionIdArg = IdentifierSchema.describe('The session id in the session repository (letters, digits, ".", "_", "-")');
const revisionArg = RevisionSchema.describe('A retained revision of the session: "r1", "r2", …');

function workOf(extra: ToolExtra, progress: ReturnType<typeof progressOf>): WorkOptions {
  return { signal: extra.signal, ...(progress ? { progress: (phase: string, message?: string) => progress.send(message ?? phase) } : {}) };
}

export function registerSessionTools(server: McpServer, context: McpToolContext): void {
  registerSessionSave(server, context);
  registerSessionDiff(server, context);
  registerSessionOpenRevision(server, context);
  registerSessionFork(server, context);
  registerSessionActivate(server, context);
}

function registerSessionSave(server: McpServer, context: McpToolContext): void {
  const { backends, log } = context;
  server.registerTool(
    'session_save',
    {
      title: 'Save a sandbox as a session revision',
      description:
        "Saves the sandbox's workspace as a revision of a portable session in the session repository: r1 of a new session " +
        '(no expectedRevision), or a compare-and-set commit on expectedRevision (conflict if the head moved: read it with ' +
        'session_open_revision or ask the user). .git, node_modules, caches and logs are left out; a secret file (.env, keys) ' +
        'refuses the save, named. commitId makes a retry return the same revision.',
      inputSchema: {
        sandbox: z.string().min(1).max(1100).describe('The sandbox key, as sandbox_create and sandbox_list return it'),
        sessionId: sessionIdArg,
        expectedRevision: revisionArg
          .optional()
          .describe("The revision this save builds on — the sandbox's sessionRevision in sandbox_list when it is from this session; absent creates the session"),
        commitId: IdentifierSchema.optional().describe('An idempotency key: a retry with the same one returns the same revision'),
      },
      annotations: { title: 'Save a sandbox as a session revision', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    context.tool('session_save', async (args, extra) => {
      const { ref } = await context.resolve(args.sandbox);
      const progress = progressOf(extra);
      const saved = await backends.sessions.saveSandbox(
        {
          sandbox: ref,
          sessionId: args.sessionId,
          ...(args.expectedRevision !== undefined ? { expectedRevision: args.expectedRevision } : {}),
          ...(args.commitId !== undefined ? { commitId: args.commitId } : {}),
        },
        workOf(extra, progress),
      );
      await progress?.flushed();
      log.info('agent saved a sandbox as a session revision', { sandbox: args.sandbox, sessionId: args.sessionId, revision: saved.revision.ref.revision });
      return json({
        sessionId: saved.revision.ref.sessionId,
        revision: saved.revision.ref.revision,
        bundle: saved.bundle,
        included: saved.workspace.includedEntries,
        excluded: saved.workspace.excludedEntries,
      });
    }),
  );
}

function registerSessionDiff(server: McpServer, context: McpToolContext): void {
  const { backends } = context;
  server.registerTool(
    'session_diff',
    {
      title: 'What a sandbox changed since a session revision, or since it was opened',
      description:
        "Lists the files of the sandbox's workspace that differ from a session revision: added, modified " +
        '(other bytes or another executable bit) or deleted — exactly what session_save on that revision would change, ' +
        'compared byte for byte; .git, node_modules, caches and logs are left out as a save leaves them out. Commits nothing. ' +
        'Without sessionId: the revision the sandbox was opened from or last saved as, else since it was opened (its ' +
        'opening snapshot, the one the person’s Source Control view compares with; taken now if it has none, so the first ' +
        'such call lists nothing).',
      inputSchema: {
        sandbox: z.string().min(1).max(1100).describe('The sandbox key, as sandbox_create and sandbox_list return it'),
        sessionId: sessionIdArg.optional().describe('Default: the revision the sandbox was opened from or last saved as, else since it was opened'),
        revision: revisionArg.optional().describe('Default: the head revision'),
      },
      annotations: { title: 'What a sandbox changed since a session revision, or since it was opened', readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    },
    context.tool('session_diff', async (args, extra) => {
      const { ref, summary } = await context.resolve(args.sandbox);
      const progress = progressOf(extra);
      const since = args.sessionId !== undefined ? { sessionId: args.sessionId, revision: args.revision } : summary.sessionRevision;
      if (since === undefined) {
        const changes = await backends.openings.compare(ref, workOf(extra, progress));
        await progress?.flushed();
        return json({ since: 'opened', openedAt: changes.opened.at, taken: changes.taken, changes: changes.changes, total: changes.total, unchanged: changes.unchanged, excluded: changes.workspace.excludedEntries });
      }
      const revision = since.revision ?? (await backends.sessions.revisions(since.sessionId)).find((r) => r.isHead)?.ref.revision;
      if (revision === undefined) throw new McpToolError('not_found', `${since.sessionId} has no retained revision`);
      const changes = await compareSandboxWithRevision(backends, { sandbox: ref, sessionId: since.sessionId, revision }, workOf(extra, progress));
      await progress?.flushed();
      return json({ ...changes.against, changes: changes.changes, total: changes.total, unchanged: changes.unchanged, excluded: changes.workspace.excludedEntries });
    }),
  );
}

function registerSessionOpenRevision(server: McpServer, context: McpToolContext): void {
  const { backends, scope, log } = context;
  server.registerTool(
    'session_open_revision',
    {
      title: 'Open a session revision in a new sandbox',
      description:
        "Creates a new sandbox holding a session revision's workspace (default: the head), verified against its digests. " +
        'The sandbox is then yours like one from sandbox_create; the answer says which isolation it has.',
      inputSchema: { sessionId: sessionIdArg, revision: revisionArg.optional().describe('Default: the head revision'), ...sandboxSpecArgs },
      annotations: { title: 'Open a session revision in a new sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    context.tool('session_open_revision', async (args, extra) => {
      const spec = agentCreateSpec(context, args);
      const progress = progressOf(extra);
      const { sandbox, revision } = await backends.sessions.openInSandbox(
        { sessionId: args.sessionId, ...(args.revision !== undefined ? { revision: args.revision } : {}), sandbox: spec },
        workOf(extra, progress),
      );
      await progress?.flushed();
      scope.markCreated(sandbox.ref);
      log.info('agent opened a session revision in a sandbox', { sandbox: sandbox.key, sessionId: revision.ref.sessionId, revision: revision.ref.revision });
      return json({ ...describeSandbox(sandbox, { createdByThisServer: true, grantedToAgents: false }), sessionId: revision.ref.sessionId, revision: revision.ref.revision });
    }),
  );
}

function registerSessionFork(server: McpServer, context: McpToolContext): void {
  const { backends, log } = context;
  server.registerTool(
    'session_fork',
    {
      title: 'Fork a session at a revision',
      description:
        'Forks a session at a named, retained revision into a new session with its own r1 and forkedFrom lineage (no activation ' +
        'records, leases or credentials). The same forkId always yields the same target, so a retry is safe.',
      inputSchema: {
        forkId: IdentifierSchema.describe('An idempotency key for this fork'),
        sessionId: sessionIdArg.describe('The session to fork'),
        revision: revisionArg.describe('The revision to fork at (never "latest": name it)'),
        targetSessionId: IdentifierSchema.optional().describe('The new session id (default: derived from forkId)'),
      },
      annotations: { title: 'Fork a session at a revision', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    context.tool('session_fork', async (args, extra) => {
      const progress = progressOf(extra);
      const result = await (await backends.activations()).fork(
        {
          forkId: args.forkId,
          source: { sessionId: args.sessionId, revision: args.revision },
          ...(args.targetSessionId !== undefined ? { targetSessionId: args.targetSessionId } : {}),
        },
        progress ? { onProgress: (phase, message) => progress.send(message ?? phase) } : {},
      );
      await progress?.flushed();
      log.info('agent forked a session', { source: `${args.sessionId}@${args.revision}`, target: result.target.sessionId });
      return json(result);
    }),
  );
}

function registerSessionActivate(server: McpServer, context: McpToolContext): void {
  const { backends, log } = context;
  server.registerTool(
    'session_activate',
    {
      title: 'Run one activation of a session',
      description:
        "Runs one activation (one agent turn) of a session in a fresh, throw-away sandbox: check out the head (a new session " +
        'starts empty), run the configured activation command with the stimulus, then commit the result with compare-and-set. ' +
        'A repeated activationId returns the stored outcome and runs nothing. With a progress token, the provisional JSONL events ' +
        'arrive as progress messages; only the result says what was committed.',
      inputSchema: {
        sessionId: sessionIdArg,
        activationId: IdentifierSchema.describe('An idempotency key for this turn'),
        message: z.string().min(1).max(65_536).optional().describe('A user message (stimulus {type: "message", payload: {text}}); or give stimulus'),
        stimulus: StimulusSchema.optional().describe('The whole stimulus ({type: "message" | "schedule" | "system", payload}); or give message'),
        ...sandboxSpecArgs,
      },
      annotations: { title: 'Run one activation of a session', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    context.tool('session_activate', async (args, extra) => {
      if ((args.message === undefined) === (args.stimulus === undefined)) {
        throw new McpToolError('invalid_argument', 'give exactly one of message ("fix the tests") or stimulus ({type, payload})');
      }
      const { name: _name, env: _env, ...sandbox } = agentCreateSpec(context, args);
      const progress = progressOf(extra);
      const result = await (await backends.activations()).run(
        {
          sessionId: args.sessionId,
          activationId: args.activationId,
          stimulus: args.stimulus ?? { type: 'message', payload: { text: args.message } },
          sandbox,
        },
        {
          signal: extra.signal,
          ...(progress
            ? { onEvent: (event) => progress.send(JSON.stringify(event)), onProgress: (phase, message) => progress.send(message ?? phase) }
            : {}),
        },
      );
      await progress?.flushed();
      log.info('agent ran an activation', { sessionId: args.sessionId, activationId: args.activationId, commit: result.commit });
      return json(result);
    }),
  );
}
