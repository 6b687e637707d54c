// README.md's examples run as written and print what the README says they print: each ```js
// block is a program, and the next block is its output.
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
  const examples = blocks.flatMap((b, i) => (b[1] === 'js' ? [[b[2], blocks[i + 1][2]]] : []));
  assert.ok(examples.length >= 2, `found ${examples.length} js examples`);
  for (const [i, [code, expected]] of examples.entries()) {
    // Inside the package folder, so that `import ... from 'skiplock'` resolves to this package.
    const file = `${root}readme-example-${process.pid}-${i}.mjs`;
    await writeFile(file, code);
    t.after(() => rm(file, { force: true }));
    const { stdout } = await promisify(execFile)(process.execPath, [file], {
      env: { ...process.env, DATABASE_URL: url }, timeout: 30000,
    });
    assert.equal(stdout, expected, `example ${i + 1}`);
  }
});
