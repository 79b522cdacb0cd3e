#!/usr/bin/env python3
"""File-level import cycles of a Rust crate, and optionally its layering.

    scripts/module-cycles.py crates/aquaregia-mcp/src [--top-level] [--layers a,b,c...]
        [--allow a,b]

Reads every `.rs` file under the crate's `src/`, finds the paths it uses (`use crate::...`,
`use super::...`, `use self::...`, paths starting with a child module's name, and the same
paths written inline), resolves each to the file that defines the item (following `pub use`
re-exports, so a parent module that only re-exports is not a dependency), and prints the
strongly connected components with more than one file: each is an import cycle.
`--top-level` folds every file into its top-level module (`agent/run.rs` -> `agent`) first,
for the coarser picture. `--layers error,transport,session,...` lists the top-level modules
bottom up (`lib` for the crate root); a file that uses a module of a higher layer is
reported. `--allow error,tool` accepts a cycle of exactly those modules (listed, not failed).
Exits 1 when there is any other cycle or a layering violation.

`mod` declarations are not dependencies, nor are `#[cfg(test)]` modules (everything after
a line `#[cfg(test)]` that opens `mod ... {` is skipped). The parse is lexical (comments and
string literals are stripped first): good enough for the code in this workspace, not for
macros that build paths.
"""

import os
import re
import sys
from collections import defaultdict


def strip(source):
    """Source without comments, string and char literals (newlines kept)."""
    out = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if source.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif source.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if source[i] == "\n" else "")
                    i += 1
        elif c == "r" and re.match(r'r#*"', source[i:i + 10]) and not (i and (source[i - 1].isalnum() or source[i - 1] == "_")):
            m = re.match(r'r(#*)"', source[i:])
            end = source.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + "\n" * source.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and source[j] != '"':
                j += 2 if source[j] == "\\" else 1
            out.append('""' + "\n" * source.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", source[i:i + 4]):
            i += len(re.match(r"'(\\.|[^\\'])'", source[i:]).group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_tests(code):
    """Drops `#[cfg(test)] mod x { ... }` blocks."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", code):
        if m.start() < i:
            continue
        out.append(code[i:m.start()])
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        i = j
    out.append(code[i:])
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (aliases dropped)."""
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [re.sub(r"as\w+$", "", tree.split(" as ")[0])]
    head, rest = tree.split("{", 1)
    body = rest[: rest.rfind("}")]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(body):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    result = []
    for part in filter(None, parts):
        for sub in expand_use(part):
            result.append(head + sub if sub != "self" else head.rstrip(":"))
    return result


def main():
    argv = sys.argv[1:]
    layers = None
    allowed = None
    if "--allow" in argv:
        k = argv.index("--allow")
        allowed = sorted(argv[k + 1].split(","))
        del argv[k:k + 2]
    if "--layers" in argv:
        k = argv.index("--layers")
        layers = argv[k + 1].split(",")
        del argv[k:k + 2]
    args = [a for a in argv if not a.startswith("--")]
    top = "--top-level" in argv
    if len(args) != 1:
        sys.exit(__doc__)
    src = args[0].rstrip("/")
    files = {}  # module path (tuple) -> file
    for root, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            files[tuple(rel)] = path
    code = {m: without_tests(strip(open(p).read())) for m, p in files.items()}
    # Files that are only `#[cfg(test)] mod x;` of their parent are tests, not dependencies.
    for module, text in list(code.items()):
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text):
            child = module + (m.group(1),)
            files.pop(child, None)
            code.pop(child, None)
    children = defaultdict(set)
    for module in files:
        if module:
            children[module[:-1]].add(module[-1])

    # Re-exports: module -> {name: absolute path}
    reexports = defaultdict(dict)
    uses = defaultdict(list)  # module -> absolute paths used
    for module, text in code.items():
        for m in re.finditer(r"(pub(\([^)]*\))?\s+)?use\s+([^;]+);", text):
            for path in expand_use(m.group(3)):
                absolute = absolutize(module, path, children[module])
                if absolute is None:
                    continue
                if m.group(1):
                    reexports[module][absolute[-1]] = absolute
                else:
                    uses[module].append(absolute)
        for m in re.finditer(r"(?<![\w:])(\w+(?:::\w+)+)", text):
            if re.search(r"use\s+[^;]*$", text[: m.start()].rsplit(";", 1)[-1]):
                continue  # part of a use statement, handled above
            absolute = absolutize(module, m.group(1), children[module])
            if absolute is not None:
                uses[module].append(absolute)

    def resolve(path, seen=()):
        """The module (file) that defines the item at `path`."""
        for cut in range(len(path), -1, -1):
            prefix = path[:cut]
            if prefix in files:
                if cut < len(path):
                    name = path[cut]
                    target = reexports[prefix].get(name)
                    if target and target not in seen and target != path:
                        return resolve(target + path[cut + 1:], seen + (path,))
                return prefix
        return None

    edges = defaultdict(set)
    for module, paths in uses.items():
        for path in paths:
            target = resolve(path)
            if target is None:
                continue
            a, b = (module[:1], target[:1]) if top else (module, target)
            if a != b:
                edges[a].add(b)

    nodes = sorted({m[:1] if top else m for m in files})
    cycles = [c for c in tarjan(nodes, edges) if len(c) > 1]
    name = lambda m: "/".join(m) or "lib"
    failed = False
    if not cycles:
        print(f"{src}: no import cycle between {'top-level modules' if top else 'files'} ({len(nodes)})")
    for cycle in cycles:
        members = sorted(cycle)
        accepted = allowed is not None and sorted(name(m) for m in members) == allowed
        failed = failed or not accepted
        note = " (allowed)" if accepted else ""
        print(f"cycle of {len(members)}{note}: " + ", ".join(name(m) for m in members))
        for m in members:
            inside = sorted(name(t) for t in edges[m] if t in cycle)
            print(f"  {name(m)} -> {', '.join(inside)}")
    if layers is not None:
        rank = {layer: i for i, layer in enumerate(layers)}
        layer_of = lambda m: name(m[:1])
        violations = 0
        for a in sorted(edges):
            for b in sorted(edges[a]):
                la, lb = layer_of(a), layer_of(b)
                if la not in rank or lb not in rank:
                    print(f"not in --layers: {la if la not in rank else lb}")
                    violations += 1
                elif rank[lb] > rank[la]:
                    print(f"layering: {name(a)} ({la}) uses {name(b)} ({lb})")
                    violations += 1
        if violations:
            failed = True
        else:
            print(f"{src}: every file uses only its own layer and those below ({' < '.join(layers)})")
    if failed:
        sys.exit(1)


def absolutize(module, path, children=()):
    parts = [p for p in path.split("::") if p]
    if parts and parts[0] in children:
        parts = ["self"] + parts
    if not parts or parts[0] not in ("crate", "super", "self"):
        return None
    base = list(module)
    if parts[0] == "crate":
        base, parts = [], parts[1:]
    while parts and parts[0] in ("super", "self"):
        if parts[0] == "super":
            base = base[:-1]
        parts = parts[1:]
    return tuple(base + parts)


def tarjan(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(component)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    main()
