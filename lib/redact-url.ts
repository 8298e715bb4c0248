// A URL may carry credentials (PROMETHEUS_URL=https://user:password@host, or ?token=...): every URL that goes
// into a log line or an error message goes through here first. Requests themselves still use the real URL.

const HIDDEN = '***';

/** A URL inside free text: a scheme, `://`, then everything up to white space or a quote. */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s'"<>]*/gi;
/**
 * The userinfo of a URL: everything up to the LAST `@` before the path (an unencoded `@`, `?` or `#` in a
 * password must not leave part of it behind).
 */
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)[^/]*@/i;
/** Query values: `?token=x&a=b` -> `?token=***&a=***`; a fragment is dropped. */
const QUERY_VALUE = /([?&][^=&#]*=)[^&#]*/g;

function redactOne(url: string): string {
  const [rest = ''] = url.replace(USERINFO, `$1${HIDDEN}@`).split('#', 1);
  const query = rest.indexOf('?');
  if (query < 0) return rest;
  return rest.slice(0, query) + rest.slice(query).replace(QUERY_VALUE, `$1${HIDDEN}`);
}

/**
 * The text with every URL in it stripped of its secrets: userinfo replaced by `***`, every query value by
 * `***`, fragments dropped. A URL alone is a text too; what is no URL at all comes back unchanged.
 */
export function redactUrls(text: string): string {
  return text.replace(URL_IN_TEXT, redactOne);
}
