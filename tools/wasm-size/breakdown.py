#!/usr/bin/env python3
"""What each crate costs in a wasm module: code bytes per crate, `cargo bloat`-style.

Reads the module's sections, its function bodies and the `name` section rustc writes (function
names, demangled), and sums each function's body size under the crate its name starts with
(for `<A as B>::f`, the crate of A; generic code is counted where it was instantiated from, as
the name says). Usage: breakdown.py MODULE.wasm [TOP]
Standard library only, so it runs wherever Python 3 does.
"""
import re
import sys
from collections import defaultdict


def leb(data, i):
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def sections(data):
    assert data[:4] == b"\0asm", "not a wasm module"
    i = 8
    while i < len(data):
        sid = data[i]
        size, i = leb(data, i + 1)
        yield sid, data[i : i + size]
        i += size


def imported_functions(body):
    count, i = leb(body, 0)
    functions = 0
    for _ in range(count):
        for _ in range(2):  # module and field names
            n, i = leb(body, i)
            i += n
        kind = body[i]
        i += 1
        if kind == 0:  # function: type index
            _, i = leb(body, i)
            functions += 1
        elif kind == 1:  # table: reftype, limits
            i += 1
            flags, i = leb(body, i + 0)
            _, i = leb(body, i)
            if flags & 1:
                _, i = leb(body, i)
        elif kind == 2:  # memory: limits
            flags, i = leb(body, i)
            _, i = leb(body, i)
            if flags & 1:
                _, i = leb(body, i)
        elif kind == 3:  # global: type, mutability
            i += 2
        else:
            raise ValueError(f"import kind {kind}")
    return functions


def body_sizes(body):
    count, i = leb(body, 0)
    sizes = []
    for _ in range(count):
        size, j = leb(body, i)
        sizes.append(j - i + size)
        i = j + size
    return sizes


def function_names(body):
    names = {}
    n, i = leb(body, 0)
    i += n  # "name"
    while i < len(body):
        sub = body[i]
        size, i = leb(body, i + 1)
        end = i + size
        if sub == 1:
            count, j = leb(body, i)
            for _ in range(count):
                index, j = leb(body, j)
                length, j = leb(body, j)
                names[index] = body[j : j + length].decode("utf-8", "replace")
                j += length
        i = end
    return names


ESCAPES = {"$LT$": "<", "$GT$": ">", "$RF$": "&", "$BP$": "*", "$C$": ",", "$SP$": "@", "$u20$": " ",
           "$u27$": "'", "$u5b$": "[", "$u5d$": "]", "$u7b$": "{", "$u7d$": "}", "$u7e$": "~", "$u3b$": ";",
           "$u2b$": "+", "$u22$": '"'}


def demangle(name):
    """The path of a legacy-mangled Rust symbol (`_ZN…E`), hash left out; others as they are."""
    if not name.startswith("_ZN"):
        return name
    i, parts = 3, []
    while i < len(name) and name[i].isdigit():
        j = i
        while name[j].isdigit():
            j += 1
        length = int(name[i:j])
        part = name[j : j + length]
        i = j + length
        if part.startswith("_$"):
            part = part[1:]
        for code, text in ESCAPES.items():
            part = part.replace(code, text)
        parts.append(part.replace("..", "::"))
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    return "::".join(parts)


def crate_of(name):
    if name.startswith("_R"):
        # v0 mangling (the prebuilt standard library): the first crate named in it.
        match = re.search(r"C[sn]?[0-9A-Za-z]*_?(\d+)([A-Za-z_][A-Za-z0-9_]*)", name)
        if match:
            return match.group(2)[: int(match.group(1))]
        return "?"
    name = demangle(name)
    # `<T as Trait>::f`, T a generic parameter: the trait's crate.
    generic = re.match(r"<([A-Z][A-Za-z0-9]*) as ([^>]+)>", name)
    if generic and "::" not in generic.group(1):
        name = generic.group(2)
    name = name.lstrip("<&*( ")
    name = re.sub(r"^(mut |const |dyn |impl )+", "", name)
    match = re.match(r"[A-Za-z_][A-Za-z0-9_]*", name)
    return match.group(0) if match else "?"


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    data = open(path, "rb").read()
    imports, sizes, names, data_bytes = 0, [], {}, 0
    for sid, body in sections(data):
        if sid == 2:
            imports = imported_functions(body)
        elif sid == 10:
            sizes = body_sizes(body)
        elif sid == 11:
            data_bytes = len(body)
        elif sid == 0:
            n, j = leb(body, 0)
            if body[j : j + n] == b"name":
                names = function_names(body)
    if not names:
        sys.exit(f"{path} has no name section: use the module rustc wrote, before wasm-opt")
    per_crate = defaultdict(lambda: [0, 0])
    for k, size in enumerate(sizes):
        crate = crate_of(names.get(imports + k, "?"))
        per_crate[crate][0] += size
        per_crate[crate][1] += 1
    code = sum(sizes)
    print(f"{path}: {code} bytes of code in {len(sizes)} functions, {data_bytes} bytes of data")
    print(f"{'crate':<28} {'code bytes':>11} {'share':>6} {'functions':>9}")
    for crate, (size, count) in sorted(per_crate.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{crate:<28} {size:>11} {100 * size / code:>5.1f}% {count:>9}")


if __name__ == "__main__":
    main()
