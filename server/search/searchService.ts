// `sandboxes/search`: picks where a sandbox is searched and runs one bounded search there.
// A sandbox whose workspace is a directory of this machine (the local runtime) is walked in place
// by the companion — no command enters its queue, GNU grep picks the files worth reading when it is
// there (hostGrep.ts), and a Finalizing sandbox is searched too (reads only). Any other sandbox
// runs find/grep as one command through the session (one round trip however many files; GNU's tools
// or BusyBox's, as in Alpine images); when that is refused (a Finalizing sandbox takes no commands)
// or the image lacks the tools, the gateway's file API is walked instead.
import fsp from 'node:fs/promises';
import { CompanionError } from '../../protocol/companion';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { ProviderKind, SandboxRef } from '../../protocol/sandboxes';
import type { SearchPartial, SearchQuery, SearchResult } from '../../protocol/search';
import type { SandboxProvider } from '../sandboxes/provider';
import { CommandSearchUnavailable, searchByCommand } from './commandSearch';
import { gatewayTree } from './gatewayTree';
import { gnuGrepAvailable, searchWithGrep } from './hostGrep';
import { hostTree, resolveSearchFolder } from './hostTree';
import { requiredLiteral } from './requiredLiteral';
import { SearchRun } from './searchRun';
import { searchTree } from './treeSearch';

export interface SearchOptions {
  signal?: AbortSignal;
  /** Streamed batches; without it every result is in the response. */
  onPartial?: (partial: SearchPartial) => void;
  /** What the search is doing, in words (e.g. that it waits for the sandbox's queue). */
  onPhase?: (phase: string, message: string) => void;
  /** Tests and benchmarks: skip the in-place search even where it is possible. */
  avoidHost?: boolean;
  /** Tests and benchmarks: search in place without GNU grep's help (the in-process walk). */
  avoidGrep?: boolean;
}

/** Folders listed / files read at the same time (in place; over the file API). */
const HOST_CONCURRENCY = 8;
const FILES_API_CONCURRENCY = 8;

export class SandboxSearchService {
  constructor(private readonly providers: ReadonlyMap<ProviderKind, SandboxProvider>) {}

  async search(ref: SandboxRef, query: SearchQuery, options: SearchOptions = {}): Promise<SearchResult> {
    const provider = this.providers.get(ref.provider);
    if (!provider) throw new CompanionError('unavailable', `the ${ref.provider} provider is not available in this server`);
    // Reads only: a Finalizing (draining) sandbox is searched too. A bad pattern or folder throws the search
    // service's own error (search_query, search_path); server/errorMapping.ts routes it.
    if (!options.avoidHost && query.kind === 'text') void gnuGrepAvailable(); // the first search's probe, while the sandbox is looked up
    const hostDir = options.avoidHost ? undefined : await provider.hostDirectory?.(ref, 'read');
    if (hostDir !== undefined) return await searchHostDirectory(hostDir, query, options);
    const connection = await provider.open(ref);
    const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls, readRetryWindowMs: 2000 });
    try {
      return await searchThroughGateway(client, query, options);
    } finally {
      await client.close();
    }
  }
}

function checkFolder(folder: string): string {
  const cleaned = folder.replace(/^\/+/, '').replace(/\/+$/, '');
  if (cleaned.split('/').includes('..')) throw new CompanionError('invalid_params', `the folder to search must be inside the sandbox's workspace: ${folder}`);
  return cleaned === '.' ? '' : cleaned;
}

/** Searches a workspace directory of this machine in place (exported for the benchmark and tests). */
export async function searchHostDirectory(hostDir: string, query: SearchQuery, options: SearchOptions = {}): Promise<SearchResult> {
  // Text with a literal every match contains: GNU grep picks the files to read (hostGrep.ts). Its probe
  // (once per process) runs while the folder is checked.
  const literal = query.kind === 'text' && !options.avoidGrep ? requiredLiteral(query) : undefined;
  const useGrep = literal !== undefined ? gnuGrepAvailable() : Promise.resolve(false);
  const root = await fsp.realpath(hostDir);
  const folder = await resolveSearchFolder(root, checkFolder(query.folder));
  const run = new SearchRun(query, options.onPartial, options.signal);
  try {
    options.onPhase?.('searching', 'searching the sandbox folder');
    if (literal !== undefined && (await useGrep)) {
      await searchWithGrep(root, folder, run, literal);
    } else {
      await searchTree(hostTree(root), folder, run, { concurrency: HOST_CONCURRENCY });
    }
    options.signal?.throwIfAborted();
    return run.finish('host');
  } finally {
    run.dispose();
  }
}

/** A sandbox elsewhere: a find/grep command, or the file API when commands are refused. */
export async function searchThroughGateway(client: GatewayClient, query: SearchQuery, options: SearchOptions = {}): Promise<SearchResult> {
  const folder = checkFolder(query.folder);
  const run = new SearchRun(query, options.onPartial, options.signal);
  try {
    options.onPhase?.('queued', `searching with ${query.kind === 'text' ? 'grep' : 'find'} in the sandbox (it runs after the command running there, if any)`);
    try {
      await searchByCommand(client, folder, run);
      options.signal?.throwIfAborted();
      return run.finish('command');
    } catch (err) {
      if (!(err instanceof CommandSearchUnavailable) || run.stats.filesSearched > 0 || run.stats.matches > 0) throw err;
      options.onPhase?.('searching', `searching through the file API (${err.message})`);
    }
    await searchTree(gatewayTree(client), folder, run, { concurrency: FILES_API_CONCURRENCY });
    options.signal?.throwIfAborted();
    return run.finish('files-api');
  } finally {
    run.dispose();
  }
}

