// An audit Event cut without a word disagreed with the decision's annotation (a CI run caught it: a submit
// reason of 1,064 characters). The cut must be visible, counted, and within the limit.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EVENT_MESSAGE_LIMIT, eventMessage } from '../../../lib/cluster/event-message.js';

const WHERE = 'the annotation';

describe('eventMessage', () => {
  it('keeps a reason at the limit whole', () => {
    const reason = 'r'.repeat(EVENT_MESSAGE_LIMIT);
    assert.equal(eventMessage(reason, WHERE), reason);
  });

  it('cuts a longer reason visibly, within the limit, counting what it cut and saying where the rest is', () => {
    for (const length of [EVENT_MESSAGE_LIMIT + 1, 1064, 5000, 123_456]) {
      const reason = Array.from({ length }, (_, i) => String.fromCharCode(97 + (i % 26))).join('');
      const message = eventMessage(reason, WHERE);
      assert.ok(message.length <= EVENT_MESSAGE_LIMIT, `${length}: ${message.length}`);
      const match = /^(.*) … \[(\d+) more characters; the full reason is in the annotation\]$/s.exec(message);
      assert.ok(match, message.slice(-80));
      const [, kept = '', cut = ''] = match;
      assert.ok(reason.startsWith(kept));
      assert.equal(kept.length + Number(cut), length);
      // Nothing is cut that would have fitted: one more kept character would pass the limit.
      assert.ok(message.length >= EVENT_MESSAGE_LIMIT - 1, `${length}: ${message.length}`);
    }
  });
});
