#!/usr/bin/env python3
"""Each catalog version calls the C entry points of its own version.

Usage: entry_points.py TREE. For every versioned entry point of the library (a symbol
`name_1_1` declared with AWA_SQL_FUNCTION in src/*.cpp whose unsuffixed `name` also exists),
checks that:
  - the frozen 1.0 script names only `name` (the 1.0 entry point, src/compat_1_0.cpp);
  - the 1.0 -> 1.1 update script and the full 1.1 script (built from sql/schema/) name only
    `name_1_1`, and each of them names it (the update re-points every such function);
  - every unsuffixed versioned entry point is defined in src/compat_1_0.cpp, the one file that
    holds what the library keeps for a 1.0 catalog, and nowhere else.
Prints one line per check and ends with "entry_points: N passed, M failed".
"""
import glob, os, re, sys

from tap import Checks

tree = sys.argv[1] if len(sys.argv) > 1 else '.'
sources = {p: open(p).read() for p in sorted(glob.glob(os.path.join(tree, 'src', '*.cpp')))}
defined = {}
for path, text in sources.items():
    for name in re.findall(r'^AWA_SQL_FUNCTION\((\w+)\)', text, re.M):
        defined.setdefault(name, []).append(os.path.basename(path))
versioned = sorted(n[:-4] for n in defined if n.endswith('_1_1') and n[:-4] in defined)


def symbols(text):
    """The C symbols a script names."""
    return set(re.findall(r"'MODULE_PATHNAME'\s*,\s*'(\w+)'", text))


def script(name):
    return open(os.path.join(tree, 'sql', name)).read()


full_1_1 = ''.join(open(p).read() for p in sorted(glob.glob(os.path.join(tree, 'sql', 'schema', '*.sql'))))
scripts = {'awa_shard--1.0.sql': (script('awa_shard--1.0.sql'), ''),
           'awa_shard--1.0--1.1.sql': (script('awa_shard--1.0--1.1.sql'), '_1_1'),
           'awa_shard--1.1.sql (sql/schema/)': (full_1_1, '_1_1')}
checks = Checks('entry_points')
check = checks.check


check(len(versioned) > 0, 'versioned entry points found: ' + ', '.join(versioned))
for label, (text, suffix) in scripts.items():
    named = symbols(text)
    for base in versioned:
        wrong = base + ('' if suffix else '_1_1')
        want = base + suffix
        check(wrong not in named, '%s does not name %s' % (label, wrong))
        if suffix:
            check(want in named, '%s names %s' % (label, want))
for base in versioned:
    check(defined[base] == ['compat_1_0.cpp'], '%s is defined in compat_1_0.cpp only (%s)' % (base, ', '.join(defined[base])))
checks.finish()
