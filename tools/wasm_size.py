#!/usr/bin/env python3
"""Where a wasm bundle's bytes are (issue 23, load times): each section's size raw and gzipped
(`gzip -9`), and, when the file has a name section (cargo's output before wasm-bindgen and
wasm-opt: target/wasm32-unknown-unknown/wasm-release/<bin>.wasm), its code by Rust path
(v0-mangled names, the first DEPTH path segments: crate, module, ...). A generic function counts
where it is defined (serde's, core's), not where it is used.

    python3 tools/wasm_size.py dist/vramcalc-card_bg.wasm
    python3 tools/wasm_size.py target/wasm32-unknown-unknown/wasm-release/vramcalc-web.wasm --depth 2 --top 40
"""
import argparse
import collections
import gzip
import re

SECTIONS = {0: 'custom', 1: 'type', 2: 'import', 3: 'func', 4: 'table', 5: 'memory', 6: 'global',
            7: 'export', 8: 'start', 9: 'elem', 10: 'code', 11: 'data', 12: 'datacount'}


def leb(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7f) << s
        s += 7
        if x < 0x80:
            return r, i


def read(path):
    """(sections [(name, body)], imported function count, code body sizes, function names)."""
    b = open(path, 'rb').read()
    i, sections, sizes, names, imported = 8, [], [], {}, 0
    while i < len(b):
        sid = b[i]
        size, i = leb(b, i + 1)
        body, i = b[i:i + size], i + size
        name = SECTIONS.get(sid, str(sid))
        if sid == 0:
            n, j = leb(body, 0)
            name = 'custom:' + body[j:j + n].decode()
            if name == 'custom:name':
                j += n
                while j < len(body):
                    kind = body[j]
                    n, j = leb(body, j + 1)
                    sub, j = body[j:j + n], j + n
                    if kind == 1:
                        count, k = leb(sub, 0)
                        for _ in range(count):
                            idx, k = leb(sub, k)
                            n, k = leb(sub, k)
                            names[idx], k = sub[k:k + n].decode('utf8', 'replace'), k + n
        elif sid == 2:
            count, j = leb(body, 0)
            for _ in range(count):
                for _ in range(2):
                    n, j = leb(body, j)
                    j += n
                kind = body[j]
                j += 1
                if kind == 0:
                    _, j = leb(body, j)
                    imported += 1
                elif kind == 1:
                    flags = body[j + 1]
                    _, j = leb(body, j + 2)
                    if flags & 1:
                        _, j = leb(body, j)
                elif kind == 2:
                    flags = body[j]
                    _, j = leb(body, j + 1)
                    if flags & 1:
                        _, j = leb(body, j)
                else:
                    j += 2
        elif sid == 10:
            count, j = leb(body, 0)
            for _ in range(count):
                n, j = leb(body, j)
                sizes.append(n)
                j += n
        sections.append((name, body))
    return b, sections, imported, sizes, names


def path_of(name, depth):
    """The first `depth` segments of a v0-mangled Rust path (`crate::module::…`)."""
    m = re.search(r'C(?:s[0-9A-Za-z]*_)?(\d+)([A-Za-z_][A-Za-z0-9_]*)', name)
    if not m:
        return name[:40]
    n = int(m.group(1))
    parts, rest = [m.group(2)[:n]], name[m.start(2) + n:]
    while len(parts) < depth:
        m = re.match(r'[A-Za-z]*?(?:s\d*_)?(\d+)([A-Za-z_][A-Za-z0-9_]*)', rest)
        if not m:
            break
        n = int(m.group(1))
        parts.append(m.group(2)[:n])
        rest = rest[m.start(2) + n:]
    return '::'.join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('wasm')
    ap.add_argument('--depth', type=int, default=2)
    ap.add_argument('--top', type=int, default=30)
    a = ap.parse_args()
    b, sections, imported, sizes, names = read(a.wasm)
    print(f'{a.wasm}: {len(b):,} B, gzip -9 {len(gzip.compress(b, 9)):,} B')
    for name, body in sections:
        print(f'  {name:32} {len(body):>10,} B  gzip -9 {len(gzip.compress(body, 9)):>9,} B')
    if names:
        by = collections.Counter()
        for k, size in enumerate(sizes):
            by[path_of(names.get(imported + k, '?'), a.depth)] += size
        total = sum(by.values())
        print(f'code by Rust path (function bodies, {total:,} B):')
        for p, size in by.most_common(a.top):
            print(f'  {size:>9,} B {100 * size / total:5.1f} %  {p}')


if __name__ == '__main__':
    main()
