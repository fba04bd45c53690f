#!/usr/bin/env python3
"""No install or update script defines one function signature twice.

Usage: functions_once.py TREE [SCRIPT...]. Checks every sql/awa_shard--*.sql of TREE and the
full install script built from sql/schema/ (sql/schema/*.sql in order, whether or not make
has written it yet), or only the SCRIPTs given. It skips the released scripts listed in
test/released.md5: they are frozen whatever they hold. A signature is the schema-qualified
name and the argument types (OUT arguments, names and defaults left out); a definition is a
CREATE [OR REPLACE] FUNCTION statement, read past comments, strings and dollar quotes.
Prints one line per script and ends with "functions_once: N passed, M failed".
"""
import glob, os, re, sys

TWO_WORD = {'double', 'timestamp', 'bit', 'character', 'time'}
ALIASES = {'int': 'integer', 'int4': 'integer', 'int8': 'bigint', 'int2': 'smallint', 'bool': 'boolean',
           'timestamp with time zone': 'timestamptz', 'float8': 'double precision'}


def statements(text):
    """The SQL statements of a script, comments removed from between them."""
    out, i, n, start = [], 0, len(text), None
    while i < n:
        c = text[i]
        if start is None:
            if c.isspace():
                i += 1
                continue
            if text.startswith('--', i) or c == '\\':
                j = text.find('\n', i)
                i = n if j < 0 else j
                continue
            start = i
        if text.startswith('--', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            k = text.find('*/', i)
            i = n if k < 0 else k + 2
        elif c == "'":
            j = i + 1
            while True:
                k = text.find("'", j)
                if k < 0:
                    k = n - 1  # unterminated: the rest of the script is the string
                    break
                if k + 1 < n and text[k + 1] == "'":
                    j = k + 2
                    continue
                break
            i = k + 1
        elif c == '"':
            k = text.find('"', i + 1)
            i = n if k < 0 else k + 1
        elif c == '$' and not (i and (text[i - 1].isalnum() or text[i - 1] == '_')) and \
                re.match(r'\$([A-Za-z_]\w*)?\$', text[i:]):
            tag = re.match(r'\$([A-Za-z_]\w*)?\$', text[i:]).group(0)
            k = text.find(tag, i + len(tag))
            i = n if k < 0 else k + len(tag)
        elif c == ';':
            out.append(text[start:i + 1])
            start = None
            i += 1
        else:
            i += 1
    return out


def split_args(s):
    parts, depth, cur, i = [], 0, '', 0
    while i < len(s):
        c = s[i]
        if c == "'":
            k = s.find("'", i + 1)
            cur += s[i:k + 1]
            i = k + 1
            continue
        depth += (c == '(') - (c == ')')
        if c == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += c
        i += 1
    return parts + ([cur] if cur.strip() else [])


def signature(stmt):
    m = re.match(r'\s*CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([\w."]+)\s*\(', stmt, re.I)
    if not m:
        return None
    depth, i = 1, m.end()
    while depth:
        depth += (stmt[i] == '(') - (stmt[i] == ')')
        if stmt[i] == "'":
            i = stmt.find("'", i + 1)
        i += 1
    types = []
    for a in split_args(stmt[m.end():i - 1]):
        a = re.split(r'\s+DEFAULT\s+|\s*=\s*', a.strip(), maxsplit=1, flags=re.I)[0].split()
        if a and a[0].upper() in ('IN', 'OUT', 'INOUT', 'VARIADIC'):
            if a[0].upper() == 'OUT':
                continue
            a = a[1:]
        if len(a) >= 2 and a[0].lower().split('(')[0] not in TWO_WORD:
            a = a[1:]
        t = re.sub(r'\s*\(\s*\d+\s*\)', '', ' '.join(a).lower())
        types.append(ALIASES.get(t, t))
    return '%s(%s)' % (m.group(1).lower().replace('"', ''), ', '.join(types))


def check(label, text):
    seen, twice = set(), []
    for st in statements(text):
        sig = signature(st)
        if sig in seen:
            twice.append(sig)
        elif sig:
            seen.add(sig)
    for sig in twice:
        print('not ok - %s defines %s more than once' % (label, sig))
    if not twice:
        print('ok - %s: %d functions, each defined once' % (label, len(seen)))
    return not twice


def main():
    tree = sys.argv[1] if len(sys.argv) > 1 else '.'
    frozen = {line.split()[1].split('/')[-1] for line in open(os.path.join(tree, 'test/released.md5')) if line.strip()}
    if len(sys.argv) > 2:
        scripts = [(p, open(p).read()) for p in sys.argv[2:]]
    else:
        scripts = []
        for p in sorted(glob.glob(os.path.join(tree, 'sql/awa_shard--*.sql'))):
            name = os.path.basename(p)
            if name in frozen:
                print('skip - %s is released and frozen' % name)
            else:
                scripts.append((name, open(p).read()))
        sources = sorted(glob.glob(os.path.join(tree, 'sql/schema/*.sql')))
        if sources:
            scripts.append(('the full script built from sql/schema/', ''.join(open(p).read() for p in sources)))
    ok = sum(check(label, text) for label, text in scripts)
    print('functions_once: %d passed, %d failed' % (ok, len(scripts) - ok))
    return 0 if ok == len(scripts) else 1


if __name__ == '__main__':
    sys.exit(main())
