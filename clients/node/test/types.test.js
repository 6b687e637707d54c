// src/index.d.ts declares the package's API: tsc --noEmit checks test/types/example.ts (a
// typed program using the API, with lines that must be errors) against it, and a file
// written here from what the JavaScript really exports, so that a declaration missing, or
// one naming what does not exist, fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as skiplock from '../src/index.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = `${root}node_modules/typescript/bin/tsc`;

// Members of the classes that are the package's own business, not its API.
const INTERNAL = {
  Client: ['ownsPool', 'call'],
};

// members lists an object's own fields and the methods of its classes, constructor aside.
function members(obj) {
  const names = new Set(Object.keys(obj));
  for (let p = Object.getPrototypeOf(obj); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const n of Object.getOwnPropertyNames(p)) if (n !== 'constructor') names.add(n);
  }
  return [...names];
}

const union = (names) => (names.length === 0 ? 'never' : names.map((n) => JSON.stringify(n)).join(' | '));

test('the type declarations check with tsc and name what the package exports', async (t) => {
  assert.ok(existsSync(tsc), 'typescript is missing: npm ci installs it (a devDependency)');
  const client = new skiplock.Client('postgres://localhost/unused'); // makes no connection
  t.after(() => client.close());
  const worker = new skiplock.Worker(client, { handlers: {}, handleSignals: false });
  const job = new skiplock.Job(client, { id: '1', checkpoints: null });
  const publicOf = (name, obj) => members(obj).filter((n) => !(INTERNAL[name] ?? []).includes(n));

  // Exact: the value exports, Client's and Job's members. The worker keeps much state in its
  // fields, so for it only: each declared member exists.
  const checks = `// Written by test/types.test.js from the JavaScript; removed after the run.
import * as skiplock from 'skiplock';
import type { Client, Job, Worker } from 'skiplock';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const exportsMatch: Same<keyof typeof skiplock, ${union(Object.keys(skiplock))}> = true;
export const clientMatches: Same<keyof Client, ${union(publicOf('Client', client))}> = true;
export const jobMatches: Same<keyof Job, ${union(publicOf('Job', job))}> = true;
export const workerDeclaresOnlyWhatExists: Same<Exclude<keyof Worker, ${union(members(worker))}>, never> = true;
`;
  const file = `${root}test/types/exports-${process.pid}.ts`;
  await writeFile(file, checks);
  t.after(() => rm(file, { force: true }));

  let out;
  try {
    out = await promisify(execFile)(process.execPath, [tsc, '-p', `${root}test/types`], { cwd: root, timeout: 120000 });
  } catch (err) {
    assert.fail(`tsc --noEmit failed (${err.code ?? err.signal}):\n${err.stdout}${err.stderr}\nthe generated checks:\n${checks}`);
  }
  assert.equal(`${out.stdout}${out.stderr}`, '');
});
