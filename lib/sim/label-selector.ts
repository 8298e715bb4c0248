// Equality-based label selectors as `kubectl get pods -l` accepts them: 'k=v', 'k==v', 'k!=v', 'k', '!k',
// comma-separated (AND). Set-based selectors ('k in (a,b)') are rejected rather than misread.

export type LabelRequirement =
  | { key: string; op: 'equals' | 'notEquals'; value: string }
  | { key: string; op: 'exists' | 'notExists' };

const KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Parses a selector; throws a RangeError naming the bad term. An empty selector matches everything. */
export function parseLabelSelector(selector: string | undefined): LabelRequirement[] {
  if (selector === undefined || selector.trim() === '') return [];
  return selector.split(',').map((raw) => {
    const term = raw.trim();
    const notEquals = /^([^!=\s]+)\s*!=\s*(.*)$/.exec(term);
    const equals = /^([^!=\s]+)\s*==?\s*(.*)$/.exec(term);
    let requirement: LabelRequirement;
    if (notEquals)
      requirement = { key: notEquals[1] ?? '', op: 'notEquals', value: (notEquals[2] ?? '').trim() };
    else if (equals) requirement = { key: equals[1] ?? '', op: 'equals', value: (equals[2] ?? '').trim() };
    else if (term.startsWith('!')) requirement = { key: term.slice(1).trim(), op: 'notExists' };
    else requirement = { key: term, op: 'exists' };
    if (!KEY.test(requirement.key)) throw new RangeError(`invalid label selector term '${term}'`);
    if ('value' in requirement && !VALUE.test(requirement.value)) {
      throw new RangeError(`invalid label selector term '${term}'`);
    }
    return requirement;
  });
}

export function matchesLabels(
  requirements: LabelRequirement[],
  labels: Record<string, string> | undefined,
): boolean {
  return requirements.every((r) => {
    const value = labels?.[r.key];
    switch (r.op) {
      case 'equals':
        return value === r.value;
      case 'notEquals':
        return value !== r.value;
      case 'exists':
        return value !== undefined;
      default:
        return value === undefined;
    }
  });
}
