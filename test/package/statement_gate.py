#!/usr/bin/env python3
"""Every statement a C function of the extension prepares or runs goes through the pin.

Usage: statement_gate.py TREE. The worker path's C functions carry no SET search_path
clause: they pin search_path and jit before their first statement (src/statement_settings.cpp,
docs/design.md §9 "Statement settings"). That holds while every SPI call that parses, plans or
runs a statement, and every call that runs a function found by OID through fmgr (which could
be a SQL-language function, parsed under the caller's search path), sits in a function that
calls pin_statement_settings() before it. Checks, for each such call in src/*.cpp:
  - it is in one of the functions allowed to make it (the checked SPI helpers of spi_util.cpp,
    the shard plans of citus.cpp, the lane sequence's DDL in reserve.cpp, and the background
    worker's own transactions in worker.cpp, which set their own search_path);
  - in a function of spi_util.cpp, citus.cpp or reserve.cpp, pin_statement_settings() comes
    before it in the same function;
and that push_hot_path_planner and run_unless_serialization_failure pin before they open a
GUC level or a subtransaction. Prints one line per check and ends with
"statement_gate: N passed, M failed".
"""
import glob, os, re, sys

from tap import Checks

tree = sys.argv[1] if len(sys.argv) > 1 else '.'
STATEMENT_CALLS = re.compile(r'\b(SPI_prepare(?:_cursor|_params|_extended)?|SPI_execute(?:_plan|_snapshot|_with_args|_plan_with_paramlist|_extended)?'
                             r'|SPI_exec|SPI_execp|SPI_cursor_open(?:_with_args|_with_paramlist)?|SPI_cursor_parse_open'
                             r'|OidFunctionCall\d|fmgr_info(?:_cxt)?)\s*\(')
ALLOWED = {
    'spi_util.cpp': {'keep_plan', 'keep_generic_plan', 'exec_plan', 'exec_plan_latest', 'exec_plan_snapshot'},
    'citus.cpp': {'keep_shard_plan'},
    'reserve.cpp': {'create_lane_sequence', 'drop_stale_lane_sequence'},
    'worker.cpp': None,  # the background worker's own transactions (any function of the file)
}
checks = Checks('statement_gate')
check = checks.check


def functions(text):
    """(name, body) of every top-level function definition: a line that names it, then a
    body from a '{' in column 0 to the next '}' in column 0."""
    out = []
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        if lines[i] == '{' and i > 0 and not re.match(r'(namespace\b|extern\b)', lines[i - 1]):
            j = i - 1
            header = lines[j]
            while j > 0 and '(' not in header:
                j -= 1
                header = lines[j] + ' ' + header
            m = re.search(r'(\w+)\s*\(', lines[j])
            name = m.group(1) if m else '?'
            k = i + 1
            while k < len(lines) and lines[k] != '}':
                k += 1
            out.append((name, '\n'.join(lines[i:k + 1])))
            i = k
        i += 1
    return out


for path in sorted(glob.glob(os.path.join(tree, 'src', '*.cpp'))):
    base = os.path.basename(path)
    text = re.sub(r'/\*.*?\*/', '', open(path).read(), flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "''", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    for name, body in functions(text):
        for m in STATEMENT_CALLS.finditer(body):
            call = m.group(1)
            allowed = base in ALLOWED and (ALLOWED[base] is None or name in ALLOWED[base])
            check(allowed, f'{base}:{name} may call {call}')
            if allowed and ALLOWED[base] is not None:
                pin = body.find('pin_statement_settings()')
                check(0 <= pin < m.start(), f'{base}:{name} pins before {call}')
    if base == 'spi_util.cpp':
        bodies = dict(functions(text))
        for name, opener in (('push_hot_path_planner', 'NewGUCNestLevel()'),
                             ('run_unless_serialization_failure', 'BeginInternalSubTransaction(')):
            body = bodies.get(name, '')
            pin = body.find('pin_statement_settings()')
            check(0 <= pin < body.find(opener), f'spi_util.cpp:{name} pins before {opener}')

checks.finish()
