// README.md's example runs as written and prints what the README says it prints.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile, rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { url } from './helpers.js';

const root = fileURLToPath(new URL('..', import.meta.url));

test('readme_example_runs_as_written', async (t) => {
  const readme = await readFile(`${root}README.md`, 'utf8');
  const blocks = [...readme.matchAll(/```(\w*)\n([\s\S]*?)```/g)];
  const code = blocks.find((b) => b[1] === 'js')[2];
  const expected = blocks[blocks.findIndex((b) => b[1] === 'js') + 1][2];
  // Inside the package folder, so that `import ... from 'skiplock'` resolves to this package.
  const file = `${root}readme-example-${process.pid}.mjs`;
  await writeFile(file, code);
  t.after(() => rm(file, { force: true }));
  const { stdout } = await promisify(execFile)(process.execPath, [file], {
    env: { ...process.env, DATABASE_URL: url }, timeout: 30000,
  });
  assert.equal(stdout, expected);
});
