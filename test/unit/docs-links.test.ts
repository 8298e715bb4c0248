// Every relative link in README.md and docs/*.md resolves: the file exists, and a #fragment names a heading of
// the target (GitHub's anchors). The README was split into docs/ files that link to each other's sections;
// a renamed heading or a moved file must fail here, not leave a reader at a dead link.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

const documents = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** The lines outside fenced code blocks: links and headings in code are text, not markdown. */
function proseLines(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').filter((line) => {
    if (line.trimStart().startsWith('```')) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const times = seen.get(slug) ?? 0;
    seen.set(slug, times + 1);
    anchors.add(times === 0 ? slug : `${slug}-${times}`);
  }
  return anchors;
}

/** Relative link targets ([text](target)), inline code spans left out. */
function relativeLinksOf(markdown: string): string[] {
  // Joined, since a link's text may wrap onto the next line.
  const prose = proseLines(markdown)
    .join('\n')
    .replace(/`[^`\n]*`/g, '``');
  return [...prose.matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)]
    .map((match) => match[1] ?? '')
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

/** Why a link from `from` (a path relative to the repository) does not resolve, or undefined when it does. */
function brokenReason(from: string, target: string): string | undefined {
  const [path = '', fragment] = target.split('#', 2);
  const file = path === '' ? from : relative(ROOT, resolve(ROOT, dirname(from), path));
  if (!existsSync(join(ROOT, file))) return `${file} does not exist`;
  if (fragment === undefined || statSync(join(ROOT, file)).isDirectory() || !file.endsWith('.md')) return;
  const anchors = anchorsOf(readFileSync(join(ROOT, file), 'utf8'));
  return anchors.has(fragment) ? undefined : `${file} has no heading with the anchor #${fragment}`;
}

describe('relative links in README.md and docs/', () => {
  it('finds the documents and their links', () => {
    assert.ok(documents.length > 5, `documents: ${documents.join(', ')}`);
    assert.ok(relativeLinksOf(readFileSync(join(ROOT, 'README.md'), 'utf8')).length > 5);
  });

  it('turns headings into the anchors GitHub gives them', () => {
    const anchors = anchorsOf(
      '# In-place right-sizing (`pods/resize`)\n## Node.js version\n```sh\n# a comment\n```\n## Node.js version',
    );
    assert.deepEqual(
      [...anchors],
      ['in-place-right-sizing-podsresize', 'nodejs-version', 'nodejs-version-1'],
    );
  });

  it('reads relative links only, outside code', () => {
    const links = relativeLinksOf(
      'see [a](a.md#x), [b](https://example.com), `[c](c.md)`, [d](#y) and [wrapped\ntext](f.md)\n```\n[e](e.md)\n```',
    );
    assert.deepEqual(links, ['a.md#x', '#y', 'f.md']);
  });

  for (const document of documents) {
    it(`${document}: every relative link resolves`, () => {
      const broken = relativeLinksOf(readFileSync(join(ROOT, document), 'utf8'))
        .map((target) => ({ target, reason: brokenReason(document, target) }))
        .filter((link) => link.reason !== undefined);
      assert.deepEqual(broken, []);
    });
  }
});
